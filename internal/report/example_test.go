package report_test

import (
	"fmt"

	"github.com/proctor-sandbox/proctor/internal/report"
)

func ExampleBuild() {
	r := report.Build(report.Input{
		Suite:  "demo",
		Agents: []string{"alpha"},
		Tasks:  []string{"fix-bug"},
		Trials: []report.Trial{
			{Agent: "alpha", Task: "fix-bug", Index: 0, Status: "clean", Passed: true, Reward: 1, Verified: true},
			{Agent: "alpha", Task: "fix-bug", Index: 1, Status: "clean", Verified: true},
			{Agent: "alpha", Task: "fix-bug", Index: 2}, // pending: not counted
		},
	})
	a := r.Agents[0]
	fmt.Printf("%s: %d/%d passed, %.3f [%.3f, %.3f], pass@2 %.2f\n",
		a.Name, a.Passed, a.Trials, a.PassRate, a.CILow, a.CIHigh, a.PassAtK[1].Value)
	// Output: alpha: 1/2 passed, 0.500 [0.095, 0.905], pass@2 1.00
}

// How reproducible a score is: the share of tasks whose trials disagree,
// how far a second run of the same tasks would move the score, and a
// bootstrap interval over tasks and trials.
func ExampleBuild_reproducibility() {
	in := report.Input{Suite: "demo", Agents: []string{"alpha"}}
	for task, passes := range [][]bool{
		{true, true, false, true}, {false, false, false, false},
		{true, false, true, false}, {true, true, true, true},
	} {
		for i, p := range passes {
			in.Trials = append(in.Trials, report.Trial{Agent: "alpha", Task: fmt.Sprint("task-", task),
				Index: i, Status: "clean", Passed: p, Verified: true})
		}
	}
	a := report.Build(in).Agents[0]
	fmt.Printf("pass rate %.3f, bootstrap [%.3f, %.3f]\n", a.PassRate, *a.BootLow, *a.BootHigh)
	fmt.Printf("%d of %d tasks disagree\n", a.DisagreeingTasks, a.RepeatedTasks)
	// Var = (3·1/3 + 0 + 2·2/3 + 0)/16² = (7/3)/256; √(2·Var) ≈ 0.135.
	fmt.Printf("run to run ± %.3f, expected difference %.3f\n", *a.RunToRunSD, *a.RunToRunMeanAbs)
	// Output:
	// pass rate 0.562, bootstrap [0.188, 0.938]
	// 2 of 4 tasks disagree
	// run to run ± 0.135, expected difference 0.108
}

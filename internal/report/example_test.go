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

package report

import (
	"fmt"
	"io"
	"testing"
	"time"
)

// large is a suite of 10 agents × 100 tasks × 10 trials.
func large() Input {
	in := Input{Suite: "large", Generated: time.Unix(0, 0)}
	for a := range 10 {
		in.Agents = append(in.Agents, fmt.Sprintf("agent-%02d", a))
	}
	for k := range 100 {
		in.Tasks = append(in.Tasks, fmt.Sprintf("task-%03d", k))
	}
	for a, agent := range in.Agents {
		for k, task := range in.Tasks {
			for i := range 10 {
				h := (a*7919 + k*104729 + i*1299709) % 1000
				status := "clean"
				var viol []string
				if h%97 == 0 {
					status, viol = "compromised", []string{"network"}
				}
				in.Trials = append(in.Trials, Trial{
					Agent: agent, Task: task, Index: i, Status: status,
					Passed: h < 100*(a+1)/2+k*3, Reward: float64(h) / 1000,
					WallMS: int64(1000 + h*37), ModelCalls: h % 20,
					InputTokens: int64(h * 100), OutputTokens: int64(h * 10),
					Violations: viol, Bundle: fmt.Sprintf("%s/%s/%d", agent, task, i),
					Verified: h%101 != 0, VerifyError: "digest mismatch",
				})
			}
		}
	}
	return in
}

func BenchmarkBuildAndWrite10k(b *testing.B) {
	in := large()
	start := time.Now()
	for b.Loop() {
		r := Build(in)
		for _, w := range []func(io.Writer) error{r.JSON, r.Markdown, r.CSV, r.HTML} {
			if err := w(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Logf("%d trials: Build + JSON + Markdown + CSV + HTML took %v per run", len(in.Trials), time.Since(start)/time.Duration(b.N))
}

// BenchmarkBuild10k is Build alone, whose largest part is the agents'
// bootstraps.
func BenchmarkBuild10k(b *testing.B) {
	in := large()
	for b.Loop() {
		Build(in)
	}
}

package dataset_test

import (
	"fmt"

	"github.com/proctor-sandbox/proctor/internal/dataset"
)

func ExampleParseRegistry() {
	registry := `[{"name": "terminal-bench", "version": "2.0", "description": "Terminal-Bench 2.0",
  "tasks": [{"name": "adaptive-rejection-sampler",
             "git_url": "https://github.com/laude-institute/terminal-bench-2.git",
             "git_commit_id": "69671fbaac6d67a7ef0dfec016cc38a64ef7a77c",
             "path": "adaptive-rejection-sampler"}]}]`
	reg, err := dataset.ParseRegistry("registry.json", []byte(registry))
	if err != nil {
		fmt.Println(err)
		return
	}
	ref, _ := dataset.ParseRef("terminal-bench@2.0")
	d, err := reg.Find(ref)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range d.Tasks {
		fmt.Println(t.Name, t.Commit[:12], t.Path)
	}
	_, err = reg.Find(dataset.Ref{Name: "terminal-bench", Version: "3.0"})
	fmt.Println(err)
	// Output:
	// adaptive-rejection-sampler 69671fbaac6d adaptive-rejection-sampler
	// registry registry.json: terminal-bench has no version "3.0" (it has 2.0): no such version
}

package store_test

import (
	"fmt"
	"log"
	"os"

	"github.com/proctor-sandbox/proctor/internal/store"
)

func Example() {
	dir, err := os.MkdirTemp("", "proctor-bench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := store.Open(dir)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	err = s.CreateSuite(store.Suite{
		Trials: 2,
		Agents: []store.Agent{{Name: "claude", Command: "claude -p"}, {Name: "codex", Command: "codex exec"}},
		Tasks:  []store.Task{{Name: "fix-parser", Dir: "tasks/fix-parser", Digest: "sha256:…"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := s.Requeue(); err != nil { // after a crash: claimed trials run again
		log.Fatal(err)
	}
	for {
		t, err := s.Claim()
		if err != nil {
			log.Fatal(err)
		}
		if t == nil {
			break
		}
		fmt.Printf("trial %d: %s on %s, run %d\n", t.ID, t.Agent, t.Task, t.Index)
		if err := s.Finish(t.ID, store.Result{Status: "graded", Passed: true, Reward: 1}); err != nil {
			log.Fatal(err)
		}
	}
	counts, err := s.Counts()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(counts)
	// Output:
	// trial 1: claude on fix-parser, run 0
	// trial 2: codex on fix-parser, run 0
	// trial 3: claude on fix-parser, run 1
	// trial 4: codex on fix-parser, run 1
	// map[done:4 failed:0 pending:0 running:0]
}

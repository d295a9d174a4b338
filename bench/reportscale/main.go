// Command reportscale makes a big suite for timing `proctor report`: it
// copies (hard links) the first finished trial of a real suite into every
// trial of a new suite of agents x tasks x trials, with the same result
// and bundle, so that the report verifies as many real bundles.
//
//	go run ./bench/reportscale -from SUITE -out DIR [-agents 10 -tasks 100 -trials 10]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/proctor-sandbox/proctor/internal/store"
	"github.com/proctor-sandbox/proctor/internal/suite"
)

func main() {
	from := flag.String("from", "", "a suite with a finished trial")
	out := flag.String("out", "", "the suite to make (must not exist)")
	agents := flag.Int("agents", 10, "agents")
	tasks := flag.Int("tasks", 100, "tasks")
	trials := flag.Int("trials", 10, "trials of each agent on each task")
	flag.Parse()
	if err := run(*from, *out, *agents, *tasks, *trials); err != nil {
		fmt.Fprintln(os.Stderr, "reportscale:", err)
		os.Exit(1)
	}
}

func run(from, out string, na, nt, n int) error {
	src, err := store.Open(from)
	if err != nil {
		return err
	}
	su, err := src.Suite()
	if err != nil {
		return err
	}
	ts, err := src.Trials()
	if err != nil {
		return err
	}
	src.Close()
	var model *store.Trial
	for i := range ts {
		if ts[i].State == store.StateDone && ts[i].Result != nil && ts[i].Result.BundleSHA256 != "" {
			model = &ts[i]
			break
		}
	}
	if model == nil {
		return fmt.Errorf("%s: no finished trial", from)
	}
	if err := os.Mkdir(out, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"suite.key", "suite.key.pub"} {
		if _, err := os.Stat(filepath.Join(from, f)); err == nil {
			if err := os.Link(filepath.Join(from, f), filepath.Join(out, f)); err != nil {
				return err
			}
		}
	}
	big := store.Suite{Trials: n, Options: su.Options, Created: time.Now().UTC()}
	for i := 0; i < na; i++ {
		big.Agents = append(big.Agents, store.Agent{Name: fmt.Sprintf("agent%02d", i), Command: "true"})
	}
	for i := 0; i < nt; i++ {
		big.Tasks = append(big.Tasks, store.Task{Name: fmt.Sprintf("task%03d", i), Dir: su.Tasks[0].Dir, Digest: su.Tasks[0].Digest})
	}
	dst, err := store.Open(out)
	if err != nil {
		return err
	}
	defer dst.Close()
	if err := dst.CreateSuite(big); err != nil {
		return err
	}
	srcDir := filepath.Join(from, model.Result.Out)
	files, err := os.ReadDir(srcDir)
	if err != nil {
		return err
	}
	count := 0
	for {
		t, err := dst.Claim()
		if err != nil {
			return err
		}
		if t == nil {
			break
		}
		rel := suite.TrialDir(t)
		if err := os.MkdirAll(filepath.Join(out, rel), 0o755); err != nil {
			return err
		}
		for _, f := range files {
			if err := os.Link(filepath.Join(srcDir, f.Name()), filepath.Join(out, rel, f.Name())); err != nil {
				return err
			}
		}
		r := *model.Result
		r.Out = rel
		if err := dst.Finish(t.ID, r); err != nil {
			return err
		}
		count++
	}
	fmt.Printf("reportscale: %s: %d trials\n", out, count)
	return nil
}

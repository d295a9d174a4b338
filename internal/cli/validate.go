package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/tooling"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

// The agents validation runs: the task's own solution, and one that does
// nothing.
const (
	// As Harbor runs it, with bash; with sh where the environment has no
	// bash (a busybox image).
	oracleAgent = trial.OracleAgent
	nopAgent    = "true"
	// maxRepeat bounds validate --repeat.
	maxRepeat = 1000
)

// validateRun is one trial of a validation.
type validateRun struct {
	name, cmd  string
	solution   bool // the agent gets /solution
	wantPassed bool
}

func newValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		out    string
		repeat int
		strict bool
		tf     trialFlags
		nf     netFlags
	)
	c := &cobra.Command{
		Use:   "validate TASK_DIR",
		Short: "Check a task: its solution must pass and a do-nothing agent must fail",
		Long: `Run two trials of the task: the oracle (solution/solve.sh, mounted at
/solution, as the agent) must pass cleanly, and a do-nothing agent must not
pass. The results of both go under --out (oracle/ and nop/), or a temporary
directory that is removed afterwards.

With --repeat N, the oracle runs N times (oracle-1/ …) and the grader runs
N more times on the first one's frozen changeset (regrade-1/ …): every
reward, status and expected test outcome must be the same each time, or
the task is reported flaky, naming what changed.

After the oracle, validate prints what the task exposes, from the tooling
profile learned on the oracle's run: the verifier's tooling the agent
could write (outside the workspace in state grading, in it always), which
the profile freezes, and hidden material, files the grader reads that are
data (expected outputs, a hidden test set) in the environment the agent
sees, and so can read. With --strict each hidden file, and a built-in
profile (a guess, nothing learned), is a finding that fails validation.

Exit status: 0 when the task is valid; 1 when it is not; 125 when a trial
could not be run.

The network flags are proctor run's: a task whose verifier fetches its
tools needs --verifier-allow-host (and --host-map, --ca-file for a
mirror), one built from environment/Dockerfile --build-allow-host.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &exitError{code: exitUsage, err: fmt.Errorf("validate: want one task directory, got %d arguments", len(args)),
					hint: "proctor validate TASK_DIR"}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			t, err := loadTask(args[0])
			if err != nil {
				return err
			}
			if t.Solution == "" {
				return fmt.Errorf("%s: missing (validation runs the solution as the agent)", filepath.Join(t.Dir, "solution", "solve.sh"))
			}
			base := out
			if base == "" {
				if base, err = os.MkdirTemp("", "proctor-validate-"); err != nil {
					return err
				}
				defer os.RemoveAll(base)
			}
			if repeat < 1 || repeat > maxRepeat {
				return usageErr("--repeat %d: want 1 to %d", repeat, maxRepeat)
			}
			valid := true
			o, err := tf.options(stderr)
			if err != nil {
				return err
			}
			// The trials' network, as proctor run's: the verifier's
			// allow-list and host maps, the environment build's allow-list.
			if err := nf.apply(&o); err != nil {
				return err
			}
			var runs []validateRun
			for i := 1; i <= repeat; i++ {
				name := "oracle"
				if repeat > 1 {
					name = fmt.Sprintf("oracle-%d", i)
				}
				runs = append(runs, validateRun{name, oracleAgent, true, true})
			}
			runs = append(runs, validateRun{"nop", nopAgent, false, false})
			var oracles []*trial.Verdict
			var findings []string
			for _, a := range runs {
				o.Task, o.Agent, o.Solution, o.Out = t, a.cmd, a.solution, filepath.Join(base, a.name)
				v, err := trial.Run(c.Context(), o)
				if err != nil {
					return fmt.Errorf("%s trial: %w", a.name, err)
				}
				ok := v.Passed == a.wantPassed && (!a.wantPassed || v.Status == trial.StatusClean)
				verdict := "ok"
				if !ok {
					verdict, valid = "WRONG", false
				}
				fmt.Fprintf(stdout, "%-6s %s: passed=%t status=%s reward=%g\n", a.name, verdict, v.Passed, v.Status, v.Reward)
				if a.solution {
					oracles = append(oracles, v)
					if len(oracles) == 1 {
						if findings, err = showExposure(stdout, t, o.Out); err != nil {
							return err
						}
					}
				}
			}
			flaky := false
			if repeat > 1 {
				changes := trial.Changes(oracles)
				// The grader again and again on the first oracle's frozen
				// changeset: a deterministic grader says the same each time.
				graded := []*trial.Verdict{oracles[0]}
				first := filepath.Join(base, "oracle-1")
				for i := 1; i <= repeat; i++ {
					v, err := trial.Regrade(c.Context(), trial.RegradeOptions{
						Task: t, Archive: filepath.Join(first, trial.ChangesetFile), Digest: oracles[0].Changeset.Digest,
						Out: filepath.Join(base, fmt.Sprintf("regrade-%d", i)), CacheDir: o.CacheDir, ScratchDir: o.ScratchDir, Storage: o.Storage,
						Progress: o.Progress, AgentPhase: oracles[0].Phases[trial.PhaseAgent], Net: o.Net,
					})
					if err != nil {
						return fmt.Errorf("regrade %d: %w", i, err)
					}
					graded = append(graded, v)
				}
				regraded := trial.Changes(graded)
				for _, ch := range changes {
					fmt.Fprintf(stdout, "flaky: the oracle's %d runs differ: %s\n", repeat, ch)
				}
				for _, ch := range regraded {
					fmt.Fprintf(stdout, "flaky: the grader on one frozen changeset (oracle-1, then %d regrades) differs: %s\n", repeat, ch)
				}
				flaky = len(changes)+len(regraded) > 0
				if !flaky {
					fmt.Fprintf(stdout, "stable: %d oracle runs and %d gradings of one changeset agree\n", repeat, repeat+1)
				}
			}
			switch {
			case flaky:
				return &exitError{code: exitNotPassed, err: fmt.Errorf("%s: flaky: the same inputs gave different results", t.Name),
					hint: "a test or the reward changed between runs; see the lines above and the logs under --out"}
			case !valid:
				return &exitError{code: exitNotPassed, err: fmt.Errorf("%s: %w", t.Name, errValidate),
					hint: "the oracle must pass cleanly and the do-nothing agent must fail; see the logs under --out"}
			}
			if strict && len(findings) > 0 {
				for _, f := range findings {
					fmt.Fprintf(stdout, "strict: %s\n", f)
				}
				return &exitError{code: exitNotPassed, err: fmt.Errorf("%s: --strict: %d finding(s)", t.Name, len(findings)),
					hint: "see the strict: lines above; keep expected outputs and hidden tests under tests/, which the agent never sees"}
			}
			fmt.Fprintf(stdout, "%s: valid\n", t.Name)
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "", "keep the trials' results under this directory")
	c.Flags().BoolVar(&strict, "strict", false, "fail on every hidden file the agent can read and on a built-in (not learned) tooling profile")
	c.Flags().IntVar(&repeat, "repeat", 1, "run the oracle N times and grade its changeset N more times; any test or reward that changes makes the task flaky")
	tf.register(c)
	nf.register(c)
	return c
}

// maxExamples bounds the paths validate names in one line.
const maxExamples = 10

// showExposure prints what the task exposes, from the tooling profile of
// the oracle trial in dir, and returns the findings --strict fails on.
func showExposure(w io.Writer, t *task.Task, dir string) ([]string, error) {
	name := filepath.Join(dir, trial.ToolingFile)
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("the oracle's tooling profile: %w", err)
	}
	p, err := tooling.Parse(name, b)
	if err != nil {
		return nil, err
	}
	var findings []string
	source := p.Source
	if p.Source == tooling.SourceBuiltin {
		source += " (" + p.Reason + ")"
		findings = append(findings, "the tooling profile is built in, not learned: "+p.Reason)
	}
	fmt.Fprintf(w, "tooling: %s, %d files, %d probed, %d search dirs\n", source, len(p.Files), len(p.Probed), len(p.SearchDirs))
	e := p.Exposure(t.Proctor.Grading)
	roots := strings.Join(p.CodeRoots, " ")
	if t.Proctor.Grading == task.GradingState {
		fmt.Fprintf(w, "writable outside %s (state grading): %s\n", roots, frozen(e.Outside))
	} else {
		fmt.Fprintf(w, "writable outside %s: none (workspace grading carries %s only)\n", roots, roots)
	}
	fmt.Fprintf(w, "writable in %s: %s\n", roots, frozen(e.Inside))
	if len(e.Hidden) == 0 {
		fmt.Fprintf(w, "hidden: none the grader reads\n")
	}
	for i, h := range e.Hidden {
		if i == maxExamples {
			fmt.Fprintf(w, "hidden: … and %d more\n", len(e.Hidden)-i)
			break
		}
		fmt.Fprintf(w, "hidden: %s: the grader reads it, and the agent can too\n", h)
	}
	for _, h := range e.Hidden {
		findings = append(findings, h+": hidden material the grader reads is in the agent's environment")
	}
	return findings, nil
}

// frozen says how many tooling paths there are, naming up to maxExamples
// of them, the system's (/usr, /etc …) last.
func frozen(paths []string) string {
	if len(paths) == 0 {
		return "no tooling"
	}
	ex := slices.Clone(paths)
	slices.SortStableFunc(ex, func(a, b string) int {
		switch sa, sb := tooling.System(a), tooling.System(b); {
		case sa == sb:
			return 0
		case sb:
			return -1
		}
		return 1
	})
	s := fmt.Sprintf("%d tooling paths, frozen by the profile: %s", len(paths), strings.Join(ex[:min(len(ex), maxExamples)], " "))
	if len(ex) > maxExamples {
		s += fmt.Sprintf(" … and %d more", len(ex)-maxExamples)
	}
	return s
}

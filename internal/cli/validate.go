package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

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
		tf     trialFlags
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

Exit status: 0 when the task is valid; 1 when it is not; 125 when a trial
could not be run.`,
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
						Out: filepath.Join(base, fmt.Sprintf("regrade-%d", i)), CacheDir: o.CacheDir, ScratchDir: o.ScratchDir,
						Progress: o.Progress, AgentPhase: oracles[0].Phases[trial.PhaseAgent],
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
			fmt.Fprintf(stdout, "%s: valid\n", t.Name)
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "", "keep the trials' results under this directory")
	c.Flags().IntVar(&repeat, "repeat", 1, "run the oracle N times and grade its changeset N more times; any test or reward that changes makes the task flaky")
	tf.register(c)
	return c
}

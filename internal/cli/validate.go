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
	oracleAgent = "if command -v bash >/dev/null; then exec bash " + trial.SolutionPath + "/solve.sh; else exec sh " + trial.SolutionPath + "/solve.sh; fi"
	nopAgent    = "true"
)

func newValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		out string
		tf  trialFlags
	)
	c := &cobra.Command{
		Use:   "validate TASK_DIR",
		Short: "Check a task: its solution must pass and a do-nothing agent must fail",
		Long: `Run two trials of the task: the oracle (solution/solve.sh, mounted at
/solution, as the agent) must pass cleanly, and a do-nothing agent must not
pass. The results of both go under --out (oracle/ and nop/), or a temporary
directory that is removed afterwards.

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
			valid := true
			o, err := tf.options(stderr)
			if err != nil {
				return err
			}
			for _, a := range []struct {
				name, cmd  string
				solution   bool
				wantPassed bool
			}{
				{"oracle", oracleAgent, true, true},
				{"nop", nopAgent, false, false},
			} {
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
			}
			if !valid {
				return &exitError{code: exitNotPassed, err: fmt.Errorf("%s: %w", t.Name, errValidate),
					hint: "the oracle must pass cleanly and the do-nothing agent must fail; see the logs under --out"}
			}
			fmt.Fprintf(stdout, "%s: valid\n", t.Name)
			return nil
		},
	}
	c.Flags().StringVar(&out, "out", "", "keep both trials' results under this directory")
	tf.register(c)
	return c
}

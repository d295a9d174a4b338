package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

// Exit codes shared by every subcommand.
const (
	exitUsage = 2   // the command line is wrong
	exitSetup = 125 // proctor could not do what was asked (sandbox setup, bad input)
)

// exitError carries an exit code and an optional hint up to Main.
type exitError struct {
	code int
	err  error
	hint string
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// exitStatus is a subcommand's wish to exit with a code without an error
// message (exec passing on the command's own status).
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// Main runs proctor with args (without the program name) and returns the
// process exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == sandbox.InitCommand {
		return sandbox.RunInit(args[1:])
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return reportError(err, stderr)
}

// reportError prints err in the house format and returns the exit code.
func reportError(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	var st exitStatus
	if errors.As(err, &st) {
		return int(st)
	}
	code, hint := exitSetup, ""
	var ee *exitError
	if errors.As(err, &ee) {
		code, hint = ee.code, ee.hint
	}
	var se *sandbox.SetupError
	if errors.As(err, &se) && se.Hint != "" && hint == "" {
		hint = se.Hint
	}
	fmt.Fprintf(stderr, "proctor: error: %s\n", oneLine(err.Error()))
	if hint != "" {
		fmt.Fprintf(stderr, "proctor: hint: %s\n", oneLine(hint))
	}
	return code
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "proctor",
		Short:         "Run AI coding agents on benchmark tasks in tamper-proof sandboxes",
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &exitError{code: exitUsage, err: err, hint: fmt.Sprintf("see `%s --help`", c.CommandPath())}
	})
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newExecCmd(stdin, stdout, stderr), newRunCmd(stdout, stderr), newValidateCmd(stdout, stderr),
		newKeygenCmd(stdout), newVerifyCmd(stdout), newRegradeCmd(stdout, stderr), newReplayCmd(stdout, stderr), newClusterCmd(stdout, stderr), newWorkerCmd(stdout, stderr), newProbeCmd(stdout), newInitCmd(),
		newBenchCmd(stdout, stderr), newReportCmd(stdout, stderr), newImageCmd(stdout, stderr),
		newSWEBenchCmd(stdout), newDatasetCmd(stdout, stderr), newAgentCmd(stdout, stderr))
	// Unknown subcommands and stray arguments are usage errors too.
	root.Args = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageErr("unknown command %q", args[0])
		}
		return nil
	}
	root.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	return root
}

// newInitCmd is the hidden internal subcommand the sandbox re-executes. Main
// dispatches it before cobra runs; this entry only keeps it out of help and
// documents it.
func newInitCmd() *cobra.Command {
	return &cobra.Command{
		Use:    sandbox.InitCommand,
		Short:  "internal use only: the sandbox's init process",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return usageErr("%s is started by proctor itself", sandbox.InitCommand)
		},
	}
}

package imagebuild

import (
	"errors"
	"fmt"
)

// Sentinels wrapped by a build's errors.
var (
	// ErrUnsupported: an instruction, flag or form Proctor does not
	// build. It is never silently ignored.
	ErrUnsupported = errors.New("not supported")
	// ErrEscape: a source path leads out of the build context (a ".."
	// component, an absolute or escaping symlink).
	ErrEscape = errors.New("leads out of the build context")
	// ErrNetwork: a step needed the network and the build's allow-list
	// refused it (or there is none).
	ErrNetwork = errors.New("refused by the build's network policy")
	// ErrStepFailed: a RUN step's command did not exit 0.
	ErrStepFailed = errors.New("step failed")
	// ErrContextChanged: a file of the context changed while it was
	// being built from.
	ErrContextChanged = errors.New("build context changed during the build")
)

// LineError is an error at one line of a Dockerfile:
// "environment/Dockerfile:7: RUN exited 100: …".
type LineError struct {
	File string // the Dockerfile, as the build names it
	Line int    // 1-based; 0 when the error is about the whole file
	Err  error
}

func (e *LineError) Error() string {
	if e.Line <= 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err)
}

// Unwrap returns the cause.
func (e *LineError) Unwrap() error { return e.Err }

// StepError is a RUN step that failed: its exit status (or the limit that
// ended it) and where its output is kept.
type StepError struct {
	Instruction string // e.g. "RUN"
	ExitCode    int
	Limit       string // the sandbox limit that ended it, "" if none
	Tail        string // the last line the step printed, quoted for a terminal
	Log         string // the build log holding the step's whole output
}

func (e *StepError) Error() string {
	how := fmt.Sprintf("exited %d", e.ExitCode)
	if e.Limit != "" {
		how = "hit the " + e.Limit + " limit"
	}
	s := e.Instruction + " " + how
	if e.Tail != "" {
		s += ": " + e.Tail
	}
	if e.Log != "" {
		s += " (log: " + e.Log + ")"
	}
	return s
}

// Unwrap returns ErrStepFailed.
func (e *StepError) Unwrap() error { return ErrStepFailed }

// unsupported wraps ErrUnsupported with what is not supported and, where
// there is one, the way around it.
func unsupported(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrUnsupported)
}

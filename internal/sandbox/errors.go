package sandbox

import (
	"errors"
	"fmt"
)

// ErrInitProtocol means the sandbox's init process broke the host–init
// protocol (it died early or sent something unexpected).
var ErrInitProtocol = errors.New("sandbox init protocol error")

// SpecError is a Spec that cannot be run as given. Nothing was created.
type SpecError struct {
	Field string // the flag or field at fault: "rootfs", "bind", "memory", …
	Value string // the offending value, when there is one
	Err   error
}

func (e *SpecError) Error() string {
	if e.Value != "" {
		return fmt.Sprintf("%s %q: %v", e.Field, e.Value, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Field, e.Err)
}

func (e *SpecError) Unwrap() error { return e.Err }

// SetupError is an isolation step that could not be applied. The run did not
// start (or was stopped before the command ran); nothing is left behind.
type SetupError struct {
	Step string // what was being done: "mounting /proc", "creating cgroup", …
	Hint string // what the user can do about it, or ""
	Err  error
}

func (e *SetupError) Error() string { return fmt.Sprintf("%s: %v", e.Step, e.Err) }

func (e *SetupError) Unwrap() error { return e.Err }

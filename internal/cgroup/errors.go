package cgroup

import (
	"errors"
	"sort"
	"strings"
)

var (
	// ErrMissingControllers matches every *MissingControllersError with
	// errors.Is.
	ErrMissingControllers = errors.New("cgroup: controllers unavailable")

	// ErrInternalProcesses means a cgroup v2 controller could not be enabled
	// for children of the caller's cgroup because that cgroup has processes
	// in it (the "no internal processes" rule), and New could neither move
	// the caller to a leaf of its own nor, as root, use <cgroup2 root>/proctor.
	ErrInternalProcesses = errors.New("cgroup: caller's cgroup has processes in it")

	// ErrInvalidName means the group name is empty, too long or not a single
	// path element.
	ErrInvalidName = errors.New("cgroup: invalid group name")

	// ErrInvalidLimits means a Limits field is negative, not a number or out
	// of range.
	ErrInvalidLimits = errors.New("cgroup: invalid limits")

	// ErrInvalidPid means AddProc was given 0, a negative pid or the
	// caller's own pid.
	ErrInvalidPid = errors.New("cgroup: invalid pid")

	// ErrNoHierarchy means no writable cgroup hierarchy was found to hold a
	// group that needs no controller.
	ErrNoHierarchy = errors.New("cgroup: no usable cgroup hierarchy")

	// ErrKillTimeout means processes were still in the group after Kill
	// stopped retrying.
	ErrKillTimeout = errors.New("cgroup: processes still in group after kill")

	// ErrDestroyed means the group was already destroyed.
	ErrDestroyed = errors.New("cgroup: group destroyed")
)

// MissingControllersError lists every controller that the requested limits
// need but that cannot be used here. New returns it before creating anything.
type MissingControllersError struct {
	Controllers []string          // sorted: "cpu", "memory", "pids"
	Reasons     map[string]string // controller → why it is unusable, when known
}

func (e *MissingControllersError) Error() string {
	var b strings.Builder
	b.WriteString("cgroup: controllers unavailable: ")
	for i, c := range e.Controllers {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c)
		if r := e.Reasons[c]; r != "" {
			b.WriteString(" (")
			b.WriteString(r)
			b.WriteString(")")
		}
	}
	return b.String()
}

// Is reports whether target is ErrMissingControllers.
func (e *MissingControllersError) Is(target error) bool { return target == ErrMissingControllers }

func newMissing(reasons map[string]string) *MissingControllersError {
	e := &MissingControllersError{Reasons: reasons}
	for c := range reasons {
		e.Controllers = append(e.Controllers, c)
	}
	sort.Strings(e.Controllers)
	return e
}

package seccomp

import (
	"errors"
	"fmt"
)

var (
	// ErrUnsupportedArch is returned by Program and ProgramFor for an
	// architecture that has no syscall table here.
	ErrUnsupportedArch = errors.New("seccomp: unsupported architecture")

	// ErrNoNewPrivs is returned by Install when the calling thread has not
	// set no_new_privs.
	ErrNoNewPrivs = errors.New("seccomp: no_new_privs is not set on the calling thread")

	// ErrInvalidProgram is returned by Install for an empty program or one
	// longer than the kernel accepts.
	ErrInvalidProgram = errors.New("seccomp: invalid filter program")

	// ErrThreadSync is wrapped by TSyncError.
	ErrThreadSync = errors.New("seccomp: cannot synchronise filter to all threads")
)

// TSyncError reports that seccomp(2) with SECCOMP_FILTER_FLAG_TSYNC
// refused to install the filter because thread TID could not take it (for
// example it already has an unrelated filter). In that case no thread of
// the process received the filter.
type TSyncError struct {
	TID int
}

func (e *TSyncError) Error() string {
	return fmt.Sprintf("%v: thread %d", ErrThreadSync, e.TID)
}

// Unwrap returns ErrThreadSync.
func (e *TSyncError) Unwrap() error { return ErrThreadSync }

package store

import (
	"errors"
	"fmt"
)

// Sentinel errors of the package; match them with errors.Is.
var (
	// ErrNotStore is wrapped by every error that says DIR/proctor.db is not
	// a Proctor store Open can use (see NotStoreError).
	ErrNotStore = errors.New("not a proctor store")
	// ErrLocked is wrapped by LockedError.
	ErrLocked = errors.New("store is locked")
	// ErrSuiteExists is returned by CreateSuite when the store already has
	// a suite.
	ErrSuiteExists = errors.New("store already has a suite")
	// ErrNoSuite is returned by Suite when CreateSuite has not been called.
	ErrNoSuite = errors.New("store has no suite")
	// ErrNoTrial is wrapped when a trial ID is not in the plan.
	ErrNoTrial = errors.New("no such trial")
	// ErrNotRunning is wrapped when Finish is given a trial that is not
	// running (pending, or already done or failed).
	ErrNotRunning = errors.New("trial is not running")
)

// NotStoreError says why the file at Path is not a Proctor store. It
// unwraps to ErrNotStore. The file is left unchanged.
type NotStoreError struct {
	Path   string // the database file
	Reason string // one line, lower case: what is wrong with it
	Err    error  // the underlying error, if any
}

func (e *NotStoreError) Error() string {
	return fmt.Sprintf("%s is not a proctor store: %s", e.Path, e.Reason)
}

// Unwrap returns ErrNotStore and the underlying error, if any.
func (e *NotStoreError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrNotStore, e.Err}
	}
	return []error{ErrNotStore}
}

// LockedError is returned by Open when another Store, in this process or
// another one, holds DIR open. PID is the owner's pid as recorded in
// DIR/proctor.lock, or 0 when it could not be read. It unwraps to
// ErrLocked.
type LockedError struct {
	Dir string
	PID int
}

func (e *LockedError) Error() string {
	if e.PID <= 0 {
		return fmt.Sprintf("%s is in use by another proctor bench (pid unknown)", e.Dir)
	}
	return fmt.Sprintf("%s is in use by another proctor bench (pid %d)", e.Dir, e.PID)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

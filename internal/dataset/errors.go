package dataset

import (
	"errors"
	"fmt"
)

var (
	// ErrRegistry means the registry is not in Harbor's format, or breaks
	// a rule of it (a *RegistryError names the field).
	ErrRegistry = errors.New("bad registry")
	// ErrUnknownDataset means the registry has no dataset of that name.
	ErrUnknownDataset = errors.New("no such dataset")
	// ErrUnknownVersion means the registry has the dataset, not that
	// version.
	ErrUnknownVersion = errors.New("no such version")
	// ErrNotCached means the dataset has not been pulled into the cache.
	ErrNotCached = errors.New("not cached")
	// ErrTampered means a cached task is not what was pulled (see
	// *TamperError).
	ErrTampered = errors.New("tampered with")
	// ErrNoCommit means the repository has no such commit, or not the
	// task's path at it.
	ErrNoCommit = errors.New("not in the repository")
	// ErrUnsafe means a task holds what the cache refuses: a symlink out
	// of it, a submodule, a name git would not check out.
	ErrUnsafe = errors.New("refused")
	// ErrTooLarge means a task is over the size or file caps.
	ErrTooLarge = errors.New("too large")
	// ErrRef means a dataset reference is not NAME@VERSION.
	ErrRef = errors.New("want NAME@VERSION")
)

// RegistryError is a registry that does not parse, or a field of it that
// breaks a rule: Source is where the registry was read from, Field the
// JSON path of the field ("[3].tasks[2].git_commit_id"), "" for the whole.
type RegistryError struct {
	Source string
	Field  string
	Err    error
}

func (e *RegistryError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s: %v", e.Source, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", e.Source, e.Field, e.Err)
}

func (e *RegistryError) Unwrap() []error { return []error{ErrRegistry, e.Err} }

// TamperError is a cached task whose digest is not the one its lock
// pinned when it was pulled.
type TamperError struct {
	Dataset string // NAME@VERSION
	Task    string
	Dir     string
	Want    string // the digest pinned at pull
	Got     string // the digest now ("" when the task's directory is gone)
}

func (e *TamperError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("dataset %s: task %s: %s is gone: the cache was %v", e.Dataset, e.Task, e.Dir, ErrTampered)
	}
	return fmt.Sprintf("dataset %s: task %s: %s was %v: its digest is %s, pinned %s at pull", e.Dataset, e.Task, e.Dir, ErrTampered, e.Got, e.Want)
}

func (e *TamperError) Unwrap() error { return ErrTampered }

// TaskError is a failure to fetch or keep one task of a dataset.
type TaskError struct {
	Dataset string // NAME@VERSION
	Task    string
	Err     error
}

func (e *TaskError) Error() string {
	return fmt.Sprintf("dataset %s: task %s: %v", e.Dataset, e.Task, e.Err)
}

func (e *TaskError) Unwrap() error { return e.Err }

package gitbase

import (
	"errors"
	"fmt"
)

var (
	// ErrNoCommit matches every *RefError with errors.Is.
	ErrNoCommit = errors.New("no such commit")

	// ErrNotRepository means src is not the top of a git working tree, nor a
	// bare repository, nor a linked worktree.
	ErrNotRepository = errors.New("not a git repository")

	// ErrGitNotFound means no git executable was found in PATH.
	ErrGitNotFound = errors.New("git not found in PATH (install git, e.g. apt-get install git)")

	// ErrUnsupported means the source repository uses a format this package
	// cannot read: reftable ref storage or an unknown object format.
	ErrUnsupported = errors.New("unsupported repository format")
)

// RefError means Ref does not name a commit in the repository at Repo: no
// such ref or object, an ambiguous abbreviation, or an object that is not a
// commit and does not peel to one. Nothing was built.
//
// Its message leaves the field name to the caller, who knows it:
// fmt.Errorf("git_base %w", err) reads
//
//	git_base "v9": no such commit in /path/repo
type RefError struct {
	Ref  string // the base as given
	Repo string // the source repository, absolute
	Err  error  // what git said, when git was asked; may be nil
}

func (e *RefError) Error() string {
	return fmt.Sprintf("%q: no such commit in %s", e.Ref, e.Repo)
}

// Unwrap returns ErrNoCommit and, when there is one, the underlying cause.
func (e *RefError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrNoCommit}
	}
	return []error{ErrNoCommit, e.Err}
}

// GitError is a git command that failed while building a copy. Stderr holds
// git's message on one line.
type GitError struct {
	Args   []string // the git subcommand and its arguments, without the hardening options
	Stderr string
	Err    error
}

func (e *GitError) Error() string {
	name := "git"
	if len(e.Args) > 0 {
		name += " " + e.Args[0]
	}
	if e.Stderr != "" {
		return fmt.Sprintf("%s: %v: %s", name, e.Err, e.Stderr)
	}
	return fmt.Sprintf("%s: %v", name, e.Err)
}

func (e *GitError) Unwrap() error { return e.Err }

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

	// ErrMissingObjects matches every *MissingError with errors.Is.
	ErrMissingObjects = errors.New("objects reachable from the base are missing")

	// ErrLeak matches every *LeakError with errors.Is.
	ErrLeak = errors.New("the copy holds more than the base's history")
)

// MissingError means the source repository lacks objects reachable from
// the base commit: a partial clone (--filter=blob:none, tree:0) that never
// fetched them, or a damaged one. Proctor never fetches; nothing was built.
type MissingError struct {
	Repo    string // the source repository, absolute
	Commit  string // the base commit
	Missing int    // how many objects are missing
	First   string // the first missing object's id
}

func (e *MissingError) Error() string {
	return fmt.Sprintf("%s lacks %d object(s) reachable from %s (first %s): fetch them, for a partial clone with git -C %s fetch --refetch --no-filter origin, or use a full clone",
		e.Repo, e.Missing, e.Commit, e.First, e.Repo)
}

func (e *MissingError) Unwrap() error { return ErrMissingObjects }

// LeakError means a copy failed the post-condition every copy is checked
// against before it is published: it held an object not reachable from
// the base, a file in .git that could name or hold another (a .promisor
// or .keep file, an alternates file, a commit-graph, a second ref…), or
// lacked an object it should hold. The copy was discarded.
type LeakError struct {
	Copy   string // the .git directory checked
	Detail string // what was found
}

func (e *LeakError) Error() string {
	return fmt.Sprintf("copy %s failed its check (%s) and was discarded", e.Copy, e.Detail)
}

func (e *LeakError) Unwrap() error { return ErrLeak }

// SubmoduleError means a submodule the base records cannot be given to
// the copy at the commit the base records: its repository is not in the
// source (not initialised), or lacks that commit. Nothing was built.
type SubmoduleError struct {
	Repo   string // the superproject's source repository, absolute
	Path   string // the submodule's path in the base's tree
	Commit string // the commit the base records for it
	Err    error
}

func (e *SubmoduleError) Error() string {
	return fmt.Sprintf("submodule %s at %s: %v", e.Path, e.Commit, e.Err)
}

func (e *SubmoduleError) Unwrap() error { return e.Err }

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

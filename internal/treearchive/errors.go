package treearchive

import (
	"errors"
	"fmt"
)

var (
	// ErrFormat matches every *FormatError.
	ErrFormat = errors.New("not a canonical tree archive")
	// ErrChanged means a file changed while it was packed.
	ErrChanged = errors.New("changed while being packed")
	// ErrDigest means an archive's bytes are not those the caller expected.
	ErrDigest = errors.New("archive digest mismatch")
)

// FormatError is an archive that is not canonical or not well formed: at
// byte Offset, in the entry Path (when known).
type FormatError struct {
	Offset int64
	Path   string
	Err    error
}

func (e *FormatError) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("tree archive: at byte %d, entry %q: %v", e.Offset, e.Path, e.Err)
	}
	return fmt.Sprintf("tree archive: at byte %d: %v", e.Offset, e.Err)
}

func (e *FormatError) Unwrap() []error { return []error{ErrFormat, e.Err} }

// LimitError is a tree or an archive past one of its Limits.
type LimitError struct {
	What  string // "entries", "bytes", "depth", "path length"
	Limit int64
	Path  string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("tree archive: %q: more than the %d %s allowed", e.Path, e.Limit, e.What)
}

// PathError is a failure on one entry of the tree, packing or unpacking.
type PathError struct {
	Op   string
	Path string // relative to the tree's root
	Err  error
}

func (e *PathError) Error() string { return fmt.Sprintf("%s %q: %v", e.Op, e.Path, e.Err) }

func (e *PathError) Unwrap() error { return e.Err }

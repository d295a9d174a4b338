package cluster

import (
	"errors"
	"fmt"
)

var (
	// ErrTampered is matched by every *TamperedError: bytes that do not hash
	// to the digest they are named by.
	ErrTampered = errors.New("archive does not match its digest")
	// ErrConflict is returned when a name is already taken by other content.
	ErrConflict = errors.New("name already holds different content")
	// ErrNotFound is returned when a task archive or result is not stored.
	ErrNotFound = errors.New("not found")
	// ErrBadDigest is returned for a digest not of the form "sha256:" + 64 hex digits.
	ErrBadDigest = errors.New(`digest must be "sha256:" followed by 64 lower-case hex digits`)
	// ErrBadTrial is returned for a trial message that is incomplete or not JSON.
	ErrBadTrial = errors.New("bad trial message")
)

// TamperedError reports that the object Name did not hash to Want but to Got.
type TamperedError struct {
	Name string // object name
	Want string // the digest it is stored under
	Got  string // the digest of what was read ("" if unknown)
}

func (e *TamperedError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("%s: archive does not match its digest", e.Name)
	}
	return fmt.Sprintf("%s: archive does not match its digest: got %s", e.Name, e.Got)
}

// Unwrap returns ErrTampered.
func (e *TamperedError) Unwrap() error { return ErrTampered }

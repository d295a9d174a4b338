package workspace

import (
	"errors"
	"fmt"
)

// Sentinels. Each is returned wrapped with the path or archive name at fault;
// test with errors.Is.
var (
	// ErrLayers: the []Layer given is not usable (relative or unclean paths,
	// two layers at one mount point, no layer for an entry).
	ErrLayers = errors.New("invalid layers")
	// ErrLimits: a Limits field is negative.
	ErrLimits = errors.New("invalid limits")
	// ErrOverlayMetadata: an upper holds overlay metadata this package does not
	// understand (redirect, metacopy, an odd opaque value, any unknown
	// trusted.overlay.* attribute). Extract fails closed on it.
	ErrOverlayMetadata = errors.New("unexpected overlay metadata")
	// ErrChanged: an upper changed while it was being read (a file grew or
	// shrank, an entry was replaced). The agent's processes must be dead first.
	ErrChanged = errors.New("upper directory changed while being read")
	// ErrOtherFilesystem: an entry of an upper is on another file system than
	// the upper itself (something is mounted inside it).
	ErrOtherFilesystem = errors.New("entry on another file system than its upper")
	// ErrUpperNotEmpty: Apply was given an upper directory that is not empty.
	ErrUpperNotEmpty = errors.New("upper directory is not empty")
	// ErrNotDir: Apply met a parent that is not a directory (a symlink, a file,
	// a whiteout) where it had to descend. It never follows it.
	ErrNotDir = errors.New("parent is not a directory")
	// ErrNoDigest: Apply was not told which changeset to expect.
	ErrNoDigest = errors.New("no expected changeset digest")
)

// Reasons of a FormatError: the archive is not one Extract could have written.
var (
	ErrBadName         = errors.New("invalid entry name")     // absolute, "." or "..", empty component, too long, reserved ".wh." prefix
	ErrEntryType       = errors.New("entry type not allowed") // hard link, device, fifo, global header, unknown type
	ErrPAXRecord       = errors.New("PAX record not allowed") // anything but path, linkpath and size
	ErrBadMode         = errors.New("mode not allowed")       // setuid, setgid, type bits; symlink not 0777; whiteout not 0
	ErrBadWhiteout     = errors.New("malformed whiteout")     // not an empty mode-0 regular file
	ErrMisplacedOpaque = errors.New("opaque marker not right after its directory")
	ErrUnsorted        = errors.New("entries not sorted by path")
	ErrDuplicate       = errors.New("duplicate entry")
	ErrBelowNonDir     = errors.New("entry below a non-directory entry")
	ErrTrailingData    = errors.New("data after the end of the archive")
	ErrNotCanonical    = errors.New("archive is not in canonical form") // fields Extract never sets, other encodings
	ErrTruncated       = errors.New("archive truncated or corrupt")
)

// LimitError is a changeset over one of the Limits. What is "files", "bytes",
// "depth" or "path length"; Limit is the limit that was passed; Path is the
// entry at which it was noticed.
type LimitError struct {
	What  string
	Limit int64
	Path  string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("changeset over the %s limit (%d) at %q", e.What, e.Limit, e.Path)
}

// FormatError is an archive that is not exactly what Extract writes. Name is
// the tar name at fault ("" when the fault is not in one entry); Err is one of
// the reasons above or the archive/tar error.
type FormatError struct {
	Name string
	Err  error
}

func (e *FormatError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("changeset archive: %v", e.Err)
	}
	return fmt.Sprintf("changeset archive: entry %q: %v", e.Name, e.Err)
}

func (e *FormatError) Unwrap() error { return e.Err }

// TamperError is an archive that does not match the changeset it should hold:
// an entry, a content hash or the digest differs, or it does not parse where
// the expected changeset says it must. It means the archive was altered (or
// damaged) after it was made; never apply such an archive.
type TamperError struct {
	Path   string // the entry at fault, or ""
	Reason string
	Err    error // the FormatError or LimitError behind it, if any
}

func (e *TamperError) Error() string {
	msg := "changeset archive altered: " + e.Reason
	if e.Path != "" {
		msg += fmt.Sprintf(" at %q", e.Path)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *TamperError) Unwrap() error { return e.Err }

package hermetic

import (
	"errors"
	"fmt"
	"github.com/proctor-sandbox/proctor/internal/netpolicy"
	"strconv"
)

// Sentinels; test with errors.Is. None is ever returned with key material
// in its text.
var (
	// ErrTampered: a recording's body does not hash to the digest its
	// index names, is not a regular file, or an index is not the one the
	// caller expected (LoadDir with a digest). See BlobError.
	ErrTampered = errors.New("hermetic: recording tampered with")
	// ErrMissingBlob: a body the index names is not in the blob directory.
	ErrMissingBlob = errors.New("hermetic: recorded body missing")
	// ErrMalformed: an index is not as this package writes one. See
	// IndexError.
	ErrMalformed = errors.New("hermetic: malformed recording index")
	// ErrRecordingFull: a recording went over its limits (Limits.MaxTotal,
	// MaxExchanges) and is incomplete.
	ErrRecordingFull = errors.New("hermetic: recording over its limits")
	// ErrCAKeyExposed: the store's CA key file may be read, or replaced,
	// by someone other than the user running Proctor. It is not used.
	ErrCAKeyExposed = errors.New("hermetic: CA key file not private")
	// ErrBadCA: the store's CA file cannot be read as a CA.
	ErrBadCA = errors.New("hermetic: bad CA file")
	// ErrBadHostMap: a host mapping entry is malformed. See HostMapError.
	ErrBadHostMap = netpolicy.ErrBadHostMap
	// ErrBadKey: a store key is not 1-128 of [A-Za-z0-9._-] (not starting
	// with '.').
	ErrBadKey = errors.New("hermetic: bad recording key")
	// ErrClosed: Serve was called after Close.
	ErrClosed = errors.New("hermetic: proxy closed")
)

// BlobError is a recorded body that could not be used: missing
// (ErrMissingBlob), or not what the index says (ErrTampered).
type BlobError struct {
	SHA256 string // the digest the index names
	Reason string
	Err    error // ErrTampered or ErrMissingBlob
}

func (e *BlobError) Error() string {
	return fmt.Sprintf("%v: body sha256:%s: %s", e.Err, e.SHA256, e.Reason)
}

// Unwrap returns ErrTampered or ErrMissingBlob.
func (e *BlobError) Unwrap() error { return e.Err }

// IndexError is why an index was refused: the exchange (0-based; -1 for
// the whole index) and field at fault.
type IndexError struct {
	Exchange int
	Field    string // JSON field; "" for the whole exchange or index
	Reason   string
	Err      error // ErrMalformed, ErrTampered (digest), ErrRecordingFull (over a limit)
}

func (e *IndexError) Error() string {
	s := e.Err.Error()
	if e.Exchange >= 0 {
		s += ": exchange " + strconv.Itoa(e.Exchange)
	}
	if e.Field != "" {
		s += ", field " + strconv.Quote(e.Field)
	}
	return s + ": " + e.Reason
}

// Unwrap returns the sentinel.
func (e *IndexError) Unwrap() error { return e.Err }

// HostMapError reports a host mapping entry ParseHostMap refused
// (netpolicy.HostMapError).
type HostMapError = netpolicy.HostMapError

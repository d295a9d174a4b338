package bundle

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Sentinels, matched with errors.Is through the *VerifyError that Verify
// returns. ErrBadSignature, ErrWrongKey, ErrChain and ErrArtifact all match
// ErrTampered as well, so a caller can tell "someone changed this" from
// "this is not a bundle" (ErrSchema) with one check.
var (
	// ErrSchema means the document is not a well-formed bundle: not UTF-8,
	// not JSON, a duplicate key, a missing, unknown or ill-typed field, a
	// value of the wrong form (a digest, a time, a name), an unsupported
	// schema or algorithm. A truncated bundle is ErrSchema.
	ErrSchema = errors.New("malformed")

	// ErrTampered means the bundle's content contradicts itself or its
	// signature: it was changed after signing. Used on its own for a signer
	// fingerprint that does not match the signer's public key.
	ErrTampered = errors.New("tampered")

	// ErrBadSignature means the signature does not verify over the payload.
	// It matches ErrTampered.
	ErrBadSignature = &sentinel{msg: "bad signature", parents: []error{ErrTampered}}

	// ErrWrongKey means the bundle is signed, but not by the key the caller
	// trusts (WithPublicKey). It matches ErrBadSignature and ErrTampered.
	ErrWrongKey = &sentinel{msg: "signed by another key", parents: []error{ErrBadSignature}}

	// ErrChain means the signed timeline's hash chain is broken: a sequence
	// number out of place, a prev that is not the previous event's hash, a
	// hash that is not the event's. It matches ErrTampered.
	ErrChain = &sentinel{msg: "broken hash chain", parents: []error{ErrTampered}}

	// ErrArtifact means an artifact on disk does not match the manifest:
	// another size or sha256, not a regular file, or missing when
	// WithRequireArtifacts was given. It matches ErrTampered.
	ErrArtifact = &sentinel{msg: "does not match the manifest", parents: []error{ErrTampered}}
)

// Sentinels of the key files, matched with errors.Is through the errors of
// ReadPrivateKey, ReadPublicKey and WriteKeyFiles.
var (
	// ErrKeyFormat means a key file is not in the documented one-line form.
	ErrKeyFormat = errors.New("bad key file")

	// ErrKeyPermissions means a private key file can be read or written by
	// its group or by others.
	ErrKeyPermissions = errors.New("private key file is open to group or others")
)

// sentinel is an error value that also matches its parents with errors.Is.
type sentinel struct {
	msg     string
	parents []error
}

func (s *sentinel) Error() string { return s.msg }

func (s *sentinel) Is(target error) bool {
	for _, p := range s.parents {
		if errors.Is(p, target) {
			return true
		}
	}
	return false
}

// VerifyError is the only error type Verify returns for a bundle that fails
// (errors in the caller's options are plain errors). Its message is one line,
// "FIELD: SENTINEL: DETAIL".
type VerifyError struct {
	// Field names the first thing that failed: "bundle" for the document as
	// a whole (not JSON, a duplicate key, too large), "signature",
	// "payload.manifest[2].sha256", "payload.timeline[3].prev",
	// "artifact changeset.tar".
	Field string
	// Err wraps one of ErrSchema, ErrTampered, ErrBadSignature, ErrWrongKey,
	// ErrChain, ErrArtifact.
	Err error
}

func (e *VerifyError) Error() string {
	msg := "unknown error"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Field == "" {
		return oneLine(msg)
	}
	return oneLine(e.Field + ": " + msg)
}

func (e *VerifyError) Unwrap() error { return e.Err }

// detail is an error that reads "SENTINEL: MESSAGE" and matches SENTINEL.
type detail struct {
	sentinel error
	msg      string
}

func (d *detail) Error() string { return d.sentinel.Error() + ": " + d.msg }
func (d *detail) Unwrap() error { return d.sentinel }

// fail returns a *VerifyError for field, matching sentinel.
func fail(field string, sentinel error, format string, args ...any) *VerifyError {
	return &VerifyError{Field: field, Err: &detail{sentinel: sentinel, msg: fmt.Sprintf(format, args...)}}
}

// maxShown bounds how much of a value from the input goes into a message.
const maxShown = 80

// show renders a value from an untrusted document for a message: quoted,
// escaped, and cut to maxShown bytes.
func show(s string) string {
	if len(s) > maxShown {
		cut := maxShown
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return strconv.Quote(s)
}

// oneLine escapes control characters and invalid UTF-8 so that s prints on
// one line and cannot drive a terminal.
func oneLine(s string) string {
	clean := true
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	q := strconv.Quote(s)
	return strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
}

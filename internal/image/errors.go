package image

import (
	"errors"
	"fmt"
)

// ErrNotFound is returned by [Store.Resolve] and [Store.Remove] when no
// stored image matches a reference.
var ErrNotFound = errors.New("image not found")

// ErrLimit is wrapped by errors from an unpack that went over the size or
// entry count cap (a decompression bomb, or an image larger than allowed).
var ErrLimit = errors.New("image over the unpack limit")

// ErrUnsafe is wrapped by every [*UnsafeEntryError].
var ErrUnsafe = errors.New("unsafe layer entry")

// UnsafeEntryError reports a layer entry refused because applying it could
// write outside the rootfs, or because its name or link is malformed.
type UnsafeEntryError struct {
	Layer  string // the layer's digest, e.g. "sha256:…"
	Entry  string // the entry's name as the tar header gave it
	Reason string
}

func (e *UnsafeEntryError) Error() string {
	return fmt.Sprintf("layer %s: entry %q: %s", e.Layer, e.Entry, e.Reason)
}

// Unwrap returns [ErrUnsafe].
func (e *UnsafeEntryError) Unwrap() error { return ErrUnsafe }

// TamperedError reports a layer whose uncompressed content does not hash to
// the diff ID the image config lists for it.
type TamperedError struct {
	Layer string // the layer's digest
	Want  string // diff ID from the config
	Got   string // hash of the content read
}

func (e *TamperedError) Error() string {
	return fmt.Sprintf("layer %s: content hashes to %s, config says %s", e.Layer, e.Got, e.Want)
}

// notFound wraps ErrNotFound with the reference and the usual hint.
func notFound(ref string) error {
	return fmt.Errorf("%w: %s (hint: proctor image pull REF or proctor image import FILE)", ErrNotFound, ref)
}

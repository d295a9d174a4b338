package trapfs

import "errors"

var (
	// ErrInvalidNode means a Node given to Mount has an empty or relative
	// Path, or a Path with a NUL byte, or no node was given at all.
	ErrInvalidNode = errors.New("trapfs: invalid node")

	// ErrNoRecord means Mount was given a nil record callback.
	ErrNoRecord = errors.New("trapfs: nil record callback")

	// ErrNoSuchNode means Clone was given an index outside the nodes passed
	// to Mount.
	ErrNoSuchNode = errors.New("trapfs: no such node")

	// ErrClosed means the filesystem was already closed.
	ErrClosed = errors.New("trapfs: closed")

	// ErrInit means the kernel's FUSE_INIT handshake did not complete.
	ErrInit = errors.New("trapfs: FUSE handshake failed")
)

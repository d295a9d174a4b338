// Package rootimage makes a container image from a root directory without
// Docker: the tree as one layer (sorted, owners, modes, hard links and
// symlinks kept, or every entry owned by root; /dev's entries, fifos,
// sockets and devices left out, as image builders leave them), optional
// layers over it, and a config with the usual PATH, a working directory
// and a command, written as a `docker save` archive that `proctor image
// import` reads.
//
// It serves the examples (examples/images/mkimage: the busybox image and
// the Terminal-Bench examples' Debian base) and the tests (testcorpus's
// Debian images). It must never be imported by code that ships in the
// proctor binary: the binary reads images, it does not make them from a
// directory (cmd/proctor's TestBinaryDeps checks).
package rootimage

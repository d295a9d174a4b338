// Package testcorpus builds, at test time and with the real tools, the
// inputs people really have, so that every guarantee is tested on them and
// not only on fixtures made to fit:
//
//   - git repositories in every shape git makes (git.go: full, blobless
//     and treeless partial clones, shallow, shared and referenced clones,
//     cruft and kept packs, a multi-pack-index with bitmaps and
//     commit-graphs, packed refs, linked worktrees, separate git dirs,
//     replace refs, SHA-256, reftable, submodules), each from an upstream
//     whose later history holds the answer to a task;
//   - root filesystems as users make them (debian.go: Debian roots made by
//     mmdebstrap, and one as docker export ships it, unpacked by tar), and
//     images of them (image.go, over internal/rootimage);
//   - the hosts a Terminal-Bench 2 verifier fetches its tools from, on
//     loopback (internet.go, over internal/standin, which the examples
//     share).
//
// The next shape that breaks a guarantee is one more entry in GitShapes
// or one more root function; the tests of gitbase, trial and swebench run
// the cheating agents of examples/agents over every one.
//
// It is for tests only. It must never be imported by code that ships in
// the proctor binary, and never reach beyond this machine: partial clones
// are served by local file:// remotes, and mmdebstrap fetches only from
// the host's own apt sources.
package testcorpus

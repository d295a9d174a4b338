// Package workspace turns what an agent changed in its sandbox into a
// changeset, and applies the permitted part of a changeset to a fresh sandbox.
//
// A sandbox's file system is a set of overlays (Layer): read-only lower layers
// plus one upper directory per layer on the host, where every change lands.
// Once the agent's whole process tree is dead, Extract reads the uppers into a
// canonical tar archive (same changes, same bytes, same digest) and a
// Changeset describing it; ReadArchive and Reader parse and check such an
// archive again (to apply it, or to re-grade later); Apply writes the entries a
// policy keeps into the empty upper directories of the grader's sandbox.
// Deletions travel as OCI whiteouts; the archive format is described next to
// writeHeaders in changeset.go.
//
// Everything in an upper was made by the adversary: names, types, modes,
// sizes, symlink targets, hard links, special files. So this package must
// never:
//
//   - follow a symlink found in an upper or in an archive, or resolve a path
//     from it by name from the root: it walks with directory descriptors
//     (openat with O_NOFOLLOW, openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS);
//   - open a fifo, socket or device (opening can block or have side effects);
//     only directories and regular files, chosen from lstat and re-checked
//     with fstat on the descriptor, are ever opened;
//   - carry setuid or setgid bits, hard links, devices, owners, xattrs or
//     times from an upper;
//   - read past a limit: Limits are checked before the bytes or entries that
//     would pass them are read;
//   - guess at overlay metadata it does not understand (redirect, metacopy):
//     it fails closed;
//   - apply an archive that differs from the changeset it was told to expect
//     (TamperError), or write outside the uppers it was given.
//
// It knows nothing of tasks, policies or signing: which entries are
// permitted is the caller's keep function, and the digest is the caller's to
// record.
package workspace

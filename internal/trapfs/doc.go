// Package trapfs records attempts to reach hidden places inside a sandbox.
//
// Hiding is done elsewhere, by mounts: the real tests are simply not in the
// sandbox's mount namespace, and masked host files are covered. This package
// adds an audit on top. It serves a tiny FUSE filesystem from the host (the
// "trap") whose nodes the caller mounts over the hidden places: an empty trap
// directory over /tests, a trap file over each masked file, and so on. Every
// access that reaches a node is answered by the trap and reported to a
// callback as an Access:
//
//   - a name looked up inside a trap directory ("lookup /tests/test_outputs.py",
//     answered ENOENT and never cached, so every attempt is seen);
//   - a trap directory opened for listing ("opendir"; it lists as empty);
//   - a trap file opened ("open"; it reads as an empty read-only file);
//   - access(2) or chdir(2) on a node ("access"; execute permission on a
//     file is decided by the kernel from the mode, 0444, without asking);
//   - every attempt to change anything ("create", "mkdir", "mknod", "symlink",
//     "link", "unlink", "rmdir", "rename", "setattr", "setxattr",
//     "removexattr", "write", "fallocate", "copy_file_range", "tmpfile"),
//     refused with EROFS.
//
// Reading attributes (stat, statfs, getxattr, listxattr) is answered but not
// recorded. The mount is deliberately not read-only and the kernel is not
// asked to check permissions itself (no default_permissions): otherwise it
// would refuse write attempts before the trap could see them. The trap
// refuses them itself, and has nowhere to put anything anyway. Ordinary file access elsewhere in the sandbox never touches FUSE,
// so the trap costs nothing until something reaches for a hidden place; the
// kernel hands over the name being looked up, so there is no race on the
// caller's memory.
//
// Mount creates the filesystem as a detached mount (fsopen/fsmount: it is in
// no mount table) whose root lists node i under the name strconv.Itoa(i); the
// root is for the host only and nothing done at it is recorded. Clone returns
// a detached mount of one node, which the sandbox attaches with move_mount(2).
// Close aborts the FUSE connection: any clone still mounted then fails with
// ENOTCONN.
//
// What the package must never do:
//
//   - serve content: no node ever has data, entries, a link target or an
//     extended attribute, whatever is asked; files have size 0 and read as
//     empty, directories list only "." and "..";
//   - be what enforces isolation: if the trap misbehaved or died, nothing
//     hidden would show (accesses would fail with ENOTCONN), because it has
//     nothing to show;
//   - accept a change: every write-like request is refused and nothing is
//     stored;
//   - let a slow record callback stall the kernel: records are queued and,
//     when the queue is full, dropped and counted (FS.Dropped);
//   - panic on a request, however malformed: every decode is bounds-checked;
//   - enable a FUSE feature it does not implement: it negotiates no
//     capability flags at all (no writeback cache, no splice, no readdirplus,
//     no export support, no locks).
package trapfs

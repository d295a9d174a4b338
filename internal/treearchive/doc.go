// Package treearchive provides a faithful, canonical archive of a directory
// tree: what a task directory (a Debian root in its rootfs included), an
// agent directory or a trial's output is when it travels between machines.
// Unpacked, it gives back every entry with its kind, name (any bytes),
// permission bits (set-id and sticky included), owner, group, modification
// time and content or link target or device number, hard links as hard
// links, empty directories; so the tree's Merkle digest (internal/task) is
// the same on both sides. The same tree always gives the same bytes.
//
// Not carried: extended attributes (file capabilities such as ping's
// security.capability, ACLs, SELinux labels), access and change times,
// inode numbers. A rootfs is mounted nosuid inside a sandbox, where file
// capabilities count for nothing either.
//
// The format, so that a reader elsewhere can be written from this alone.
// Integers are unsigned LEB128 varints (the minimal encoding only), time
// seconds a zig-zag varint:
//
//	archive = magic entry* end
//	magic   = "proctor-tree-archive\x00v1\n"                        (24 bytes)
//	entry   = kind:1 path meta body
//	path    = varint(len) bytes   relative, "/"-separated; "." for the root
//	meta    = varint(mode & 07777) varint(uid) varint(gid) zigzag(mtime s) varint(mtime ns)
//	body    = 'd' directory:          (nothing)
//	          'f' regular file:       varint(size) content
//	          'F' regular file, the first of a group of hard links: as 'f'
//	          'h' hard link:          varint(len) path of an earlier 'F'; meta equal to its
//	          'l' symbolic link:      varint(len) target (not empty, no NUL); mode 0
//	          'c' character device, 'b' block device: varint(major) varint(minor)
//	          'p' fifo, 's' socket:   (nothing)
//	end     = 'E' varint(entries) varint(content bytes)
//
// Entries come depth first: the root directory ".", then each directory's
// children sorted by name as byte strings, each directory's subtree right
// after it. Names are 1 to 255 bytes with no "/" or NUL and are not "." or
// "..". Every 'F' is the target of at least one later 'h'. Nothing follows
// the end. The archive's digest is the SHA-256 of all its bytes.
//
// What the package must never do: follow a symbolic link or a path out of
// the tree, on either side; open anything but directories and regular files
// when packing (lstat, then fstat on the descriptor, which must be the same
// file); unpack an entry anywhere but beneath the destination, through
// directories it made itself; accept bytes that another tree, or another
// encoding of this one, would give; leave a half-unpacked tree where the
// caller looks (Unpack works in a directory the caller then renames).
package treearchive

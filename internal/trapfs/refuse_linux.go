package trapfs

import (
	"strings"
	"syscall"
)

// refuse answers every request that would change something: EROFS, and a
// record when the target is a node or inside one. Arguments are decoded only
// to name the target; a request that does not decode is answered EIO.
func (s *server) refuse(op uint32, id uint64, c *cursor) result {
	var (
		name   string // operation
		target = id   // the node the path starts from
		child  string // name inside target, if any
		arg    string
		argID  uint64 // a second node whose path is arg, if any
		argSub string // name inside argID, if any
	)
	switch op {
	case opCreate:
		name = "create"
		c.take(16) // fuse_create_in
		child = c.name()
	case opTmpfile:
		name = "tmpfile"
		c.take(16) // fuse_create_in; the name is the kernel's own
	case opMknod:
		name = "mknod"
		c.take(16) // fuse_mknod_in
		child = c.name()
	case opMkdir:
		name = "mkdir"
		c.take(8) // fuse_mkdir_in
		child = c.name()
	case opSymlink:
		name = "symlink"
		child = c.name()
		arg = c.name() // the link's target, as given
	case opUnlink:
		name = "unlink"
		child = c.name()
	case opRmdir:
		name = "rmdir"
		child = c.name()
	case opRename, opRename2:
		name = "rename"
		argID = c.u64() // newdir
		if op == opRename2 {
			c.take(8) // flags, padding
		}
		child = c.name()
		argSub = c.name()
	case opLink:
		// The new name is made in the target directory; arg is the
		// existing node it would point at.
		name = "link"
		argID = c.u64() // oldnodeid
		child = c.name()
	case opSetattr:
		name = "setattr"
		valid := c.u32()
		c.take(84) // the rest of fuse_setattr_in
		arg = setattrNames(valid)
	case opWrite:
		name = "write"
		c.take(40) // fuse_write_in; the data is not looked at
	case opSetxattr:
		name = "setxattr"
		c.take(8) // fuse_setxattr_in as sent without FUSE_SETXATTR_EXT
		arg = c.name()
	case opRemovexattr:
		name = "removexattr"
		arg = c.name()
	case opFallocate:
		name = "fallocate"
		c.take(32) // fuse_fallocate_in
	case opCopyFileRange:
		// The file written to is the target; arg is the file read.
		name = "copy_file_range"
		c.take(16) // fh_in, off_in
		target, argID = c.u64(), id
		c.take(32) // fh_out, off_out, len, flags
	}
	if c.bad {
		return fail(syscall.EIO)
	}
	r := result{errno: syscall.EROFS}
	n, ok := s.node(target)
	if !ok {
		return r // the root is the host's and nothing else exists
	}
	r.access, r.path, r.arg = name, n.Path, arg
	if child != "" {
		r.path = join(n.Path, child)
	}
	if argID != 0 {
		r.arg = "" // outside the trap, if not a node
		if m, ok := s.node(argID); ok {
			r.arg = m.Path
			if argSub != "" {
				r.arg = join(m.Path, argSub)
			}
		}
	}
	return r
}

// setattrNames lists the attributes a SETATTR would change, in a fixed
// order: "mode,uid,gid,size,atime,mtime,ctime".
func setattrNames(valid uint32) string {
	var names []string
	for _, f := range [...]struct {
		bits uint32
		name string
	}{
		{fattrMode, "mode"}, {fattrUID, "uid"}, {fattrGID, "gid"}, {fattrSize, "size"},
		{fattrAtime | fattrAtimeNow, "atime"}, {fattrMtime | fattrMtimeNow, "mtime"},
		{fattrCtime, "ctime"},
	} {
		if valid&f.bits != 0 {
			names = append(names, f.name)
		}
	}
	return strings.Join(names, ",")
}

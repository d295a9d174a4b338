package trapfs

import (
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Node ids: the root is FUSE_ROOT_ID; node i of Mount's slice is i+firstNode.
// The inode number of every object is its node id, so both are stable.
const (
	rootID    = 1
	firstNode = 2
)

// validSecs is the entry and attribute timeout of the root and the nodes:
// none of them ever changes. Failed lookups are answered with an error, which
// the kernel never caches, so every attempt reaches the trap.
const validSecs = 24 * 60 * 60

// Directory entry types (DT_DIR, DT_REG).
const (
	dtDir = 4
	dtReg = 8
)

// server answers requests. It is immutable after newServer, except for
// initialized, which only the one goroutine that handles requests touches.
type server struct {
	nodes []Node
	sec   uint64 // the timestamps every object shows
	nsec  uint32

	initialized bool // a FUSE_INIT has been answered with success
}

func newServer(nodes []Node, now time.Time) *server {
	return &server{
		nodes: append([]Node(nil), nodes...),
		sec:   uint64(now.Unix()),
		nsec:  uint32(now.Nanosecond()),
	}
}

// node returns the node a node id stands for.
func (s *server) node(id uint64) (Node, bool) {
	if id < firstNode || id-firstNode >= uint64(len(s.nodes)) {
		return Node{}, false
	}
	return s.nodes[id-firstNode], true
}

// attr returns the attributes of the root or a node.
func (s *server) attr(id uint64) (attr, bool) {
	a := attr{
		Ino: id, Atime: s.sec, Mtime: s.sec, Ctime: s.sec,
		AtimeNsec: s.nsec, MtimeNsec: s.nsec, CtimeNsec: s.nsec,
		Blksize: 4096, // uid and gid stay 0
	}
	isDir := id == rootID
	if n, ok := s.node(id); ok {
		isDir = n.Dir
	} else if id != rootID {
		return attr{}, false
	}
	if isDir {
		a.Mode, a.Nlink = syscall.S_IFDIR|0o555, 2
	} else {
		a.Mode, a.Nlink = syscall.S_IFREG|0o444, 1
	}
	return a, true
}

// rootIndex maps a name in the root to a node index: only the canonical
// decimal spelling of an index in range.
func (s *server) rootIndex(name string) (int, bool) {
	i, err := strconv.Atoi(name)
	if err != nil || i < 0 || i >= len(s.nodes) || strconv.Itoa(i) != name {
		return 0, false
	}
	return i, true
}

// join names a child of a node for a record. The name is kept as the kernel
// sent it: not cleaned, not unquoted.
func join(dir, name string) string {
	if strings.HasSuffix(dir, "/") {
		return dir + name
	}
	return dir + "/" + name
}

// noReply reports whether the kernel expects no answer to an opcode.
func noReply(op uint32) bool {
	switch op {
	case opForget, opBatchForget, opInterrupt, opNotifyReply:
		return true
	}
	return false
}

// handle answers one message. It appends the reply, if any, to out and
// returns it (nil when none is due), with the access to record, if any. It
// never blocks and never panics, whatever msg holds.
func (s *server) handle(msg, out []byte) (reply []byte, rec Access, record bool) {
	req, err := parseRequest(msg)
	if err != nil {
		// Answer EIO if the unique can be read and an answer is due; a
		// reply to unique 0 would be taken for a notification.
		if len(msg) < 16 {
			return nil, Access{}, false
		}
		op, unique := ne.Uint32(msg[4:]), ne.Uint64(msg[8:])
		if unique == 0 || noReply(op) {
			return nil, Access{}, false
		}
		return appendError(out, unique, syscall.EIO), Access{}, false
	}
	if req.Hdr.Unique == 0 || noReply(req.Hdr.Opcode) {
		// FORGET and BATCH_FORGET: the nodes are static, nothing to drop.
		// INTERRUPT: every request is answered at once, nothing to stop.
		return nil, Access{}, false
	}
	// The reply is built in place: a header to fill in, then the payload
	// that dispatch appends.
	start := len(out)
	scratch := append(out, zeroHeader[:]...)
	res := s.dispatch(&req, scratch)
	if res.access != "" {
		rec = Access{
			Time: time.Now(),
			PID:  int(req.Hdr.PID),
			UID:  int(req.Hdr.UID),
			GID:  int(req.Hdr.GID),
			Op:   res.access,
			Path: res.path,
			Arg:  res.arg,
		}
		record = true
	}
	if res.errno != 0 {
		return appendError(out[:start], req.Hdr.Unique, res.errno), rec, record
	}
	reply = res.payload
	if reply == nil {
		reply = scratch
	}
	putOutHeader(reply[start:], req.Hdr.Unique)
	return reply, rec, record
}

var zeroHeader [outHeaderLen]byte

// result is the outcome of one request: an errno or a reply, and what to
// record (nothing when access is ""). payload is nil (no payload) or the
// scratch buffer given to dispatch with the payload appended.
type result struct {
	errno   syscall.Errno
	payload []byte
	access  string
	path    string
	arg     string
}

func fail(errno syscall.Errno) result { return result{errno: errno} }

// dispatch answers a well-formed request. Every payload is appended to
// scratch, which ends with the reply's header.
func (s *server) dispatch(req *request, scratch []byte) result {
	id := req.Hdr.NodeID
	c := &cursor{b: req.Body}
	switch req.Hdr.Opcode {
	case opInit:
		return s.init(c, scratch)
	case opDestroy:
		return result{}
	case opLookup:
		return s.lookup(id, c, scratch)
	case opGetattr:
		a, ok := s.attr(id)
		if !ok {
			return fail(syscall.ENOENT)
		}
		return result{payload: appendAttrOut(scratch, &a, validSecs)}
	case opOpen, opOpendir:
		return s.open(req.Hdr.Opcode == opOpendir, id, c, scratch)
	case opRead:
		if a, ok := s.attr(id); !ok {
			return fail(syscall.ENOENT)
		} else if a.Mode&syscall.S_IFMT != syscall.S_IFREG {
			return fail(syscall.EISDIR)
		}
		return result{} // no data, whatever the offset and size
	case opReaddir:
		return s.readdir(id, c, scratch)
	case opRelease, opReleasedir, opFlush, opFsync, opFsyncdir:
		return result{} // no per-open state, nothing written
	case opStatfs:
		return result{payload: s.statfs(scratch)}
	case opAccess:
		return s.access(id, c)
	case opGetxattr:
		return fail(syscall.ENODATA)
	case opListxattr:
		size := c.u32()
		if c.bad {
			return fail(syscall.EIO)
		}
		if size == 0 {
			// Asked for the size of the list: fuse_getxattr_out{size: 0}.
			return result{payload: append(scratch, make([]byte, getxattrOutLen)...)}
		}
		return result{} // the empty list
	case opReadlink:
		return fail(syscall.EINVAL) // nothing here is a symlink
	case opCreate, opMknod, opMkdir, opSymlink, opUnlink, opRmdir, opRename,
		opRename2, opLink, opSetattr, opWrite, opSetxattr, opRemovexattr,
		opFallocate, opCopyFileRange, opTmpfile:
		return s.refuse(req.Hdr.Opcode, id, c)
	}
	// Everything else, including READDIRPLUS, locks, ioctl, poll, lseek,
	// bmap and opcodes newer than this code, which the kernel either does
	// not send unless negotiated or falls back from on ENOSYS.
	return fail(syscall.ENOSYS)
}

// init answers FUSE_INIT. It enables no capability: every flag is 0.
func (s *server) init(c *cursor, scratch []byte) result {
	major, minor := c.u32(), c.u32()
	c.u32() // max_readahead: none wanted
	c.u32() // flags: none taken
	if c.bad {
		return fail(syscall.EIO)
	}
	out := make([]byte, initOutLen)
	ne.PutUint32(out[0:], protoMajor)
	if major > protoMajor {
		// The kernel will retry with our major; the rest is ignored.
		return result{payload: append(scratch, out...)}
	}
	if major < protoMajor || minor < minKernelMin {
		return fail(syscall.EPROTO)
	}
	ne.PutUint32(out[4:], min(minor, protoMinor))
	ne.PutUint32(out[20:], maxWrite) // max_write
	ne.PutUint32(out[24:], 1)        // time_gran: 1 ns
	s.initialized = true
	return result{payload: append(scratch, out...)}
}

// lookup answers a name looked up in the root (the host's own Clone: a node,
// not recorded) or in a trap directory (recorded, never found).
func (s *server) lookup(parent uint64, c *cursor, scratch []byte) result {
	name := c.name()
	if c.bad {
		return fail(syscall.EIO)
	}
	if parent == rootID {
		i, ok := s.rootIndex(name)
		if !ok {
			return fail(syscall.ENOENT)
		}
		a, _ := s.attr(uint64(i) + firstNode)
		return result{payload: appendEntryOut(scratch, &a, validSecs)}
	}
	n, ok := s.node(parent)
	if !ok {
		return fail(syscall.ENOENT)
	}
	if !n.Dir {
		return fail(syscall.ENOTDIR)
	}
	return result{errno: syscall.ENOENT, access: "lookup", path: join(n.Path, name)}
}

// open answers OPEN and OPENDIR. Opening a node is recorded; a trap file
// opens read-only or not at all.
func (s *server) open(dir bool, id uint64, c *cursor, scratch []byte) result {
	flags := c.u32()
	c.u32() // open_flags
	if c.bad {
		return fail(syscall.EIO)
	}
	if id == rootID {
		if !dir {
			return fail(syscall.EISDIR)
		}
		return result{payload: appendOpenOut(scratch, 0)}
	}
	n, ok := s.node(id)
	switch {
	case !ok:
		return fail(syscall.ENOENT)
	case dir != n.Dir && dir:
		return fail(syscall.ENOTDIR)
	case dir != n.Dir:
		return fail(syscall.EISDIR)
	case dir:
		return result{payload: appendOpenOut(scratch, 0), access: "opendir", path: n.Path}
	}
	// No FOPEN_DIRECT_IO: reads go through the page cache, so the kernel
	// itself stops at the size, 0, and never even asks for data.
	r := result{access: "open", path: n.Path, arg: accessMode(flags)}
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		r.errno = syscall.EROFS
		return r
	}
	r.payload = appendOpenOut(scratch, 0)
	return r
}

// accessMode names the access mode of open flags for a record.
func accessMode(flags uint32) string {
	switch flags & syscall.O_ACCMODE {
	case syscall.O_RDONLY:
		return "read"
	case syscall.O_WRONLY:
		return "write"
	case syscall.O_RDWR:
		return "read-write"
	}
	return "invalid"
}

// readdir lists "." and ".." and, in the root only, the nodes.
func (s *server) readdir(id uint64, c *cursor, scratch []byte) result {
	c.u64() // fh
	offset := c.u64()
	size := c.u32()
	if c.bad {
		return fail(syscall.EIO)
	}
	if a, ok := s.attr(id); !ok || a.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return fail(syscall.ENOTDIR)
	}
	count := uint64(2)
	if id == rootID {
		count += uint64(len(s.nodes))
	}
	b := scratch
	for i := offset; i < count; i++ {
		name, ino, typ := ".", id, uint32(dtDir)
		switch {
		case i == 1:
			name, ino = "..", rootID
		case i >= 2:
			name, ino = strconv.FormatUint(i-2, 10), i-2+firstNode
			if !s.nodes[i-2].Dir {
				typ = dtReg
			}
		}
		if uint64(len(b)-len(scratch)+direntLen(name)) > uint64(size) {
			break
		}
		b = appendDirent(b, ino, i+1, typ, name)
	}
	return result{payload: b}
}

// statfs describes an empty filesystem with no free space.
func (s *server) statfs(scratch []byte) []byte {
	b := scratch
	for _, v := range [...]uint64{0, 0, 0, uint64(len(s.nodes)) + 1, 0} { // blocks, bfree, bavail, files, ffree
		b = ne.AppendUint64(b, v)
	}
	for _, v := range [...]uint32{4096, 255, 4096, 0} { // bsize, namelen, frsize, padding
		b = ne.AppendUint32(b, v)
	}
	return append(b, make([]byte, 6*4)...) // spare
}

// access answers access(2) and chdir(2) checks, recording those on nodes.
func (s *server) access(id uint64, c *cursor) result {
	mask := c.u32()
	if c.bad {
		return fail(syscall.EIO)
	}
	var r result
	isDir := id == rootID
	if n, ok := s.node(id); ok {
		isDir = n.Dir
		r.access, r.path = "access", n.Path
		for _, m := range [...]struct {
			bit    uint32
			letter string
		}{{4, "r"}, {2, "w"}, {1, "x"}} {
			if mask&m.bit != 0 {
				r.arg += m.letter
			}
		}
	} else if id != rootID {
		return fail(syscall.ENOENT)
	}
	switch {
	case mask&2 != 0: // W_OK
		r.errno = syscall.EROFS
	case mask&1 != 0 && !isDir: // X_OK on a file
		r.errno = syscall.EACCES
	}
	return r
}

//go:build linux

package trapfs

import (
	"syscall"
	"testing"
)

// hcase is one request and the answer it must get.
type hcase struct {
	name    string
	msg     []byte
	errno   syscall.Errno
	noReply bool
	payload int  // payload length; -1: not checked
	rec     *rec // the record it must cause, if any
}

// handlerCases are requests of every kind, well-formed and not. They are
// also the fuzzer's seeds.
func handlerCases() []hcase {
	openIn := func(flags uint32) []byte { return u32(flags, 0) }
	readIn := func(off uint64, size uint32) []byte {
		return append(append(u64(0, off), u32(size, 0)...), append(u64(0), u32(0, 0)...)...)
	}
	r := func(op, path, arg string) *rec { return &rec{op, path, arg} }
	setattr := func(valid uint32) []byte { return append(u32(valid), zeros(84)...) }
	withExt := func(m []byte) []byte { // one 8-byte extension appended
		m = append(m, zeros(8)...)
		ne.PutUint32(m, uint32(len(m)))
		ne.PutUint16(m[36:], 1)
		return m
	}
	return []hcase{
		// Lookups.
		{name: "lookup in trap dir", msg: msg(opLookup, idTests, cstr("test_outputs.py")), errno: syscall.ENOENT, rec: r("lookup", "/tests/test_outputs.py", "")},
		{name: "lookup under trailing slash", msg: msg(opLookup, idSol, cstr("solve.sh")), errno: syscall.ENOENT, rec: r("lookup", "/solution/solve.sh", "")},
		{name: "lookup odd name", msg: msg(opLookup, idTests, cstr("..\n\xff")), errno: syscall.ENOENT, rec: r("lookup", "/tests/..\n\xff", "")},
		{name: "lookup with extension", msg: withExt(msg(opLookup, idTests, cstr("x"))), errno: syscall.ENOENT, rec: r("lookup", "/tests/x", "")},
		{name: "lookup in root", msg: msg(opLookup, rootID, cstr("0")), payload: entryOutLen},
		{name: "lookup in file", msg: msg(opLookup, idMasked, cstr("x")), errno: syscall.ENOTDIR},
		{name: "lookup in unknown", msg: msg(opLookup, 99, cstr("x")), errno: syscall.ENOENT},
		{name: "lookup no NUL", msg: msg(opLookup, idTests, []byte("x")), errno: syscall.EIO},
		{name: "lookup empty name", msg: msg(opLookup, idTests, cstr("")), errno: syscall.EIO},
		{name: "lookup no body", msg: msg(opLookup, idTests), errno: syscall.EIO},

		// Opens and reads.
		{name: "open file", msg: msg(opOpen, idMasked, openIn(syscall.O_RDONLY)), payload: openOutLen, rec: r("open", "/etc/masked.conf", "read")},
		{name: "open file write", msg: msg(opOpen, idMasked, openIn(syscall.O_WRONLY)), errno: syscall.EROFS, rec: r("open", "/etc/masked.conf", "write")},
		{name: "open file rdwr", msg: msg(opOpen, idMasked, openIn(syscall.O_RDWR)), errno: syscall.EROFS, rec: r("open", "/etc/masked.conf", "read-write")},
		{name: "open file trunc", msg: msg(opOpen, idMasked, openIn(syscall.O_RDONLY|syscall.O_TRUNC)), errno: syscall.EROFS, rec: r("open", "/etc/masked.conf", "read")},
		{name: "open file accmode 3", msg: msg(opOpen, idMasked, openIn(3)), errno: syscall.EROFS, rec: r("open", "/etc/masked.conf", "invalid")},
		{name: "open dir", msg: msg(opOpen, idTests, openIn(0)), errno: syscall.EISDIR},
		{name: "open root", msg: msg(opOpen, rootID, openIn(0)), errno: syscall.EISDIR},
		{name: "open unknown", msg: msg(opOpen, 99, openIn(0)), errno: syscall.ENOENT},
		{name: "open short", msg: msg(opOpen, idMasked, u32(0)), errno: syscall.EIO},
		{name: "opendir", msg: msg(opOpendir, idTests, openIn(syscall.O_DIRECTORY)), payload: openOutLen, rec: r("opendir", "/tests", "")},
		{name: "opendir root", msg: msg(opOpendir, rootID, openIn(0)), payload: openOutLen},
		{name: "opendir file", msg: msg(opOpendir, idMasked, openIn(0)), errno: syscall.ENOTDIR},
		{name: "read file", msg: msg(opRead, idMasked, readIn(0, 4096)), payload: 0},
		{name: "read file far", msg: msg(opRead, idMasked, readIn(1<<40, 1<<20)), payload: 0},
		{name: "read dir", msg: msg(opRead, idTests, readIn(0, 4096)), errno: syscall.EISDIR},
		{name: "readdir dir", msg: msg(opReaddir, idTests, readIn(0, 4096)), payload: 64},
		{name: "readdir short", msg: msg(opReaddir, idTests, u64(0)), errno: syscall.EIO},
		{name: "readdirplus", msg: msg(opReaddirplus, idTests, readIn(0, 4096)), errno: syscall.ENOSYS},
		{name: "release", msg: msg(opRelease, idMasked, zeros(24))},
		{name: "releasedir", msg: msg(opReleasedir, idTests, zeros(24))},
		{name: "flush", msg: msg(opFlush, idMasked, zeros(24))},
		{name: "fsync", msg: msg(opFsync, idMasked, zeros(16))},
		{name: "fsyncdir", msg: msg(opFsyncdir, idTests, zeros(16))},
		{name: "readlink", msg: msg(opReadlink, idMasked), errno: syscall.EINVAL},

		// Metadata.
		{name: "getattr", msg: msg(opGetattr, idTests, zeros(16)), payload: attrOutLen},
		{name: "statfs", msg: msg(opStatfs, idTests), payload: statfsOutLen},
		{name: "access read", msg: msg(opAccess, idTests, u32(4, 0)), rec: r("access", "/tests", "r")},
		{name: "access write", msg: msg(opAccess, idTests, u32(2, 0)), errno: syscall.EROFS, rec: r("access", "/tests", "w")},
		{name: "access exec file", msg: msg(opAccess, idMasked, u32(1, 0)), errno: syscall.EACCES, rec: r("access", "/etc/masked.conf", "x")},
		{name: "access all dir", msg: msg(opAccess, idSol, u32(7, 0)), errno: syscall.EROFS, rec: r("access", "/solution/", "rwx")},
		{name: "access root", msg: msg(opAccess, rootID, u32(5, 0))},
		{name: "access root write", msg: msg(opAccess, rootID, u32(2, 0)), errno: syscall.EROFS},
		{name: "access unknown", msg: msg(opAccess, 99, u32(4, 0)), errno: syscall.ENOENT},
		{name: "getxattr", msg: msg(opGetxattr, idMasked, u32(256, 0), cstr("user.x")), errno: syscall.ENODATA},
		{name: "getxattr size", msg: msg(opGetxattr, idTests, u32(0, 0), cstr("security.selinux")), errno: syscall.ENODATA},
		{name: "listxattr size", msg: msg(opListxattr, idTests, u32(0, 0)), payload: getxattrOutLen},
		{name: "listxattr", msg: msg(opListxattr, idTests, u32(4096, 0)), payload: 0},
		{name: "listxattr short", msg: msg(opListxattr, idTests), errno: syscall.EIO},

		// Changes: refused and recorded.
		{name: "create", msg: msg(opCreate, idTests, zeros(16), cstr("new")), errno: syscall.EROFS, rec: r("create", "/tests/new", "")},
		{name: "create in root", msg: msg(opCreate, rootID, zeros(16), cstr("new")), errno: syscall.EROFS},
		{name: "create no name", msg: msg(opCreate, idTests, zeros(16)), errno: syscall.EIO},
		{name: "tmpfile", msg: msg(opTmpfile, idTests, zeros(16), cstr("/")), errno: syscall.EROFS, rec: r("tmpfile", "/tests", "")},
		{name: "mknod", msg: msg(opMknod, idTests, zeros(16), cstr("fifo")), errno: syscall.EROFS, rec: r("mknod", "/tests/fifo", "")},
		{name: "mkdir", msg: msg(opMkdir, idSol, zeros(8), cstr("d")), errno: syscall.EROFS, rec: r("mkdir", "/solution/d", "")},
		{name: "mkdir short", msg: msg(opMkdir, idTests, zeros(4)), errno: syscall.EIO},
		{name: "symlink", msg: msg(opSymlink, idTests, cstr("l"), cstr("/etc/shadow")), errno: syscall.EROFS, rec: r("symlink", "/tests/l", "/etc/shadow")},
		{name: "symlink no target", msg: msg(opSymlink, idTests, cstr("l")), errno: syscall.EIO},
		{name: "unlink", msg: msg(opUnlink, idTests, cstr("f")), errno: syscall.EROFS, rec: r("unlink", "/tests/f", "")},
		{name: "rmdir", msg: msg(opRmdir, idTests, cstr("d")), errno: syscall.EROFS, rec: r("rmdir", "/tests/d", "")},
		{name: "rename", msg: msg(opRename, idTests, u64(idSol), cstr("a"), cstr("b")), errno: syscall.EROFS, rec: r("rename", "/tests/a", "/solution/b")},
		{name: "rename2", msg: msg(opRename2, idTests, u64(idTests), u32(1, 0), cstr("a"), cstr("b")), errno: syscall.EROFS, rec: r("rename", "/tests/a", "/tests/b")},
		{name: "rename out", msg: msg(opRename, idTests, u64(rootID), cstr("a"), cstr("b")), errno: syscall.EROFS, rec: r("rename", "/tests/a", "")},
		{name: "rename short", msg: msg(opRename, idTests, u64(idSol), cstr("a")), errno: syscall.EIO},
		{name: "link", msg: msg(opLink, idTests, u64(idMasked), cstr("h")), errno: syscall.EROFS, rec: r("link", "/tests/h", "/etc/masked.conf")},
		{name: "setattr", msg: msg(opSetattr, idMasked, setattr(fattrMode|fattrSize)), errno: syscall.EROFS, rec: r("setattr", "/etc/masked.conf", "mode,size")},
		{name: "setattr times", msg: msg(opSetattr, idTests, setattr(fattrAtimeNow|fattrMtime|fattrCtime|1<<6)), errno: syscall.EROFS, rec: r("setattr", "/tests", "atime,mtime,ctime")},
		{name: "setattr short", msg: msg(opSetattr, idTests, zeros(40)), errno: syscall.EIO},
		{name: "write", msg: msg(opWrite, idMasked, zeros(40), []byte("data")), errno: syscall.EROFS, rec: r("write", "/etc/masked.conf", "")},
		{name: "setxattr", msg: msg(opSetxattr, idTests, u32(1, 0), cstr("user.x"), []byte("v")), errno: syscall.EROFS, rec: r("setxattr", "/tests", "user.x")},
		{name: "removexattr", msg: msg(opRemovexattr, idMasked, cstr("user.x")), errno: syscall.EROFS, rec: r("removexattr", "/etc/masked.conf", "user.x")},
		{name: "fallocate", msg: msg(opFallocate, idMasked, zeros(32)), errno: syscall.EROFS, rec: r("fallocate", "/etc/masked.conf", "")},
		{name: "copy_file_range", msg: msg(opCopyFileRange, idMasked, u64(0, 0, idMasked, 0, 0, 10, 0)), errno: syscall.EROFS, rec: r("copy_file_range", "/etc/masked.conf", "/etc/masked.conf")},
		{name: "copy_file_range from outside", msg: msg(opCopyFileRange, 99, u64(0, 0, idMasked, 0, 0, 10, 0)), errno: syscall.EROFS, rec: r("copy_file_range", "/etc/masked.conf", "")},

		// No reply expected.
		{name: "forget", msg: msg(opForget, idTests, u64(1)), noReply: true},
		{name: "batch forget", msg: msg(opBatchForget, 0, u32(1, 0), u64(idTests, 1)), noReply: true},
		{name: "interrupt", msg: msg(opInterrupt, 0, u64(5)), noReply: true},
		{name: "notify reply", msg: msg(opNotifyReply, idMasked, zeros(40)), noReply: true},

		// Lifecycle and the unknown.
		{name: "init", msg: msg(opInit, 0, u32(7, 44, 0, 0)), payload: initOutLen},
		{name: "destroy", msg: msg(opDestroy, 0)},
		{name: "setlk", msg: msg(opSetlk, idMasked, zeros(48)), errno: syscall.ENOSYS},
		{name: "ioctl", msg: msg(opIoctl, idMasked, zeros(32)), errno: syscall.ENOSYS},
		{name: "poll", msg: msg(opPoll, idMasked, zeros(24)), errno: syscall.ENOSYS},
		{name: "lseek", msg: msg(opLseek, idMasked, zeros(24)), errno: syscall.ENOSYS},
		{name: "bmap", msg: msg(opBmap, idMasked, zeros(16)), errno: syscall.ENOSYS},
		{name: "opcode 0", msg: msg(0, idTests), errno: syscall.ENOSYS},
		{name: "opcode 4096", msg: msg(4096, idTests), errno: syscall.ENOSYS},
		{name: "opcode max", msg: msg(^uint32(0), idTests), errno: syscall.ENOSYS},

		// Broken framing.
		{name: "empty", msg: nil, noReply: true},
		{name: "short header", msg: msg(opLookup, idTests, cstr("x"))[:15], noReply: true},
		{name: "header only part", msg: msg(opLookup, idTests, cstr("x"))[:30], errno: syscall.EIO},
		{name: "length mismatch", msg: msg(opLookup, idTests, cstr("x"))[:41], errno: syscall.EIO},
		{name: "extensions too long", msg: func() []byte { m := msg(opLookup, idTests, cstr("x")); ne.PutUint16(m[36:], 1); return m }(), errno: syscall.EIO},
		{name: "unique 0", msg: func() []byte { m := msg(opLookup, idTests, cstr("x")); ne.PutUint64(m[8:], 0); return m }(), noReply: true},
		{name: "broken forget", msg: msg(opForget, idTests)[:20], noReply: true},
	}
}

func TestHandle(t *testing.T) {
	for _, c := range handlerCases() {
		t.Run(c.name, func(t *testing.T) {
			s := testServer()
			reply, got, recorded := s.handle(c.msg, nil)
			if c.noReply {
				if reply != nil || recorded {
					t.Fatalf("reply %x, recorded %v; want neither", reply, recorded)
				}
				return
			}
			errno, p := checkReply(t, c.msg, reply)
			if errno != c.errno {
				t.Errorf("errno %v, want %v", errno, c.errno)
			}
			if c.payload >= 0 && errno == 0 && len(p) != c.payload {
				t.Errorf("payload of %d bytes, want %d", len(p), c.payload)
			}
			switch {
			case c.rec == nil && recorded:
				t.Errorf("recorded %+v", got)
			case c.rec != nil && !recorded:
				t.Errorf("not recorded, want %v", *c.rec)
			case c.rec != nil && (got.Op != c.rec.op || got.Path != c.rec.path || got.Arg != c.rec.arg ||
				got.PID != tPID || got.UID != tUID || got.GID != tGID || got.Time.IsZero()):
				t.Errorf("recorded %+v, want %v", got, *c.rec)
			}
		})
	}
}

// TestHandleReusesBuffer: replies built into a buffer with room are
// correct, whatever the buffer held before.
func TestHandleReusesBuffer(t *testing.T) {
	s := testServer()
	buf := make([]byte, 0, 1<<16)
	for range 3 {
		for _, c := range handlerCases() {
			fresh, _, _ := testServer().handle(c.msg, nil)
			for i := range buf[:cap(buf)] {
				buf[:cap(buf)][i] = 0xa5
			}
			reused, _, _ := s.handle(c.msg, buf[:0])
			if string(fresh) != string(reused) {
				t.Fatalf("%s: reply %x with a used buffer, %x fresh", c.name, reused, fresh)
			}
		}
	}
}

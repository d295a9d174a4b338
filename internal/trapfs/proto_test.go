//go:build linux

package trapfs

import (
	"bytes"
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"
)

// Unit tests of the request handler: no kernel, no root.

const (
	tUnique = 77
	tUID    = 1000
	tGID    = 1001
	tPID    = 4242

	idTests  = firstNode     // "/tests", a directory
	idMasked = firstNode + 1 // "/etc/masked.conf", a file
	idSol    = firstNode + 2 // "/solution/", a directory (trailing slash)
)

var testNodes = []Node{{Path: "/tests", Dir: true}, {Path: "/etc/masked.conf"}, {Path: "/solution/", Dir: true}}

var testTime = time.Unix(1700000000, 123456789)

func testServer() *server { return newServer(testNodes, testTime) }

// msg builds a request from its opcode, node id and argument parts.
func msg(op uint32, node uint64, parts ...[]byte) []byte {
	r := request{Hdr: inHeader{Opcode: op, Unique: tUnique, NodeID: node, UID: tUID, GID: tGID, PID: tPID}}
	r.Body = bytes.Join(parts, nil)
	r.Hdr.Len = uint32(inHeaderLen + len(r.Body))
	return r.encode()
}

func u32(vs ...uint32) []byte {
	var b []byte
	for _, v := range vs {
		b = ne.AppendUint32(b, v)
	}
	return b
}

func u64(vs ...uint64) []byte {
	var b []byte
	for _, v := range vs {
		b = ne.AppendUint64(b, v)
	}
	return b
}

func cstr(s string) []byte { return append([]byte(s), 0) }

func zeros(n int) []byte { return make([]byte, n) }

// checkReply checks a reply's framing against its request and splits it.
func checkReply(t testing.TB, req, reply []byte) (syscall.Errno, []byte) {
	t.Helper()
	if len(reply) < outHeaderLen {
		t.Fatalf("reply of %d bytes", len(reply))
	}
	n, e, unique := ne.Uint32(reply), int32(ne.Uint32(reply[4:])), ne.Uint64(reply[8:])
	if int(n) != len(reply) {
		t.Fatalf("reply header says %d bytes, has %d", n, len(reply))
	}
	if len(req) >= 16 && unique != ne.Uint64(req[8:]) || unique == 0 {
		t.Fatalf("reply unique %d, request %x", unique, req[:min(len(req), 16)])
	}
	if e > 0 || e <= -512 {
		t.Fatalf("reply error %d out of range", e)
	}
	if e != 0 && len(reply) != outHeaderLen {
		t.Fatalf("error reply with %d bytes of payload", len(reply)-outHeaderLen)
	}
	return syscall.Errno(-e), reply[outHeaderLen:]
}

// decodeAttr reads a fuse_attr.
func decodeAttr(b []byte) attr {
	var a attr
	for i, p := range []*uint64{&a.Ino, &a.Size, &a.Blocks, &a.Atime, &a.Mtime, &a.Ctime} {
		*p = ne.Uint64(b[8*i:])
	}
	for i, p := range []*uint32{&a.AtimeNsec, &a.MtimeNsec, &a.CtimeNsec, &a.Mode, &a.Nlink, &a.UID, &a.GID, &a.Rdev, &a.Blksize, &a.Flags} {
		*p = ne.Uint32(b[48+4*i:])
	}
	return a
}

// dirent is a decoded fuse_dirent.
type dirent struct {
	ino, off uint64
	typ      uint32
	name     string
}

// decodeDirents reads a READDIR payload, failing on bad framing.
func decodeDirents(t testing.TB, b []byte) []dirent {
	t.Helper()
	var out []dirent
	for len(b) > 0 {
		if len(b) < direntHeadLen {
			t.Fatalf("%d trailing bytes", len(b))
		}
		d := dirent{ino: ne.Uint64(b), off: ne.Uint64(b[8:]), typ: ne.Uint32(b[20:])}
		n := int(ne.Uint32(b[16:]))
		size := direntLen(string(make([]byte, n)))
		if size > len(b) {
			t.Fatalf("dirent of %d bytes, %d left", size, len(b))
		}
		d.name = string(b[direntHeadLen : direntHeadLen+n])
		out = append(out, d)
		b = b[size:]
	}
	return out
}

// wantAttr checks the attributes the trap gives every object.
func wantAttr(t *testing.T, a attr, id uint64, dir bool) {
	t.Helper()
	mode, nlink := uint32(syscall.S_IFREG|0o444), uint32(1)
	if dir {
		mode, nlink = syscall.S_IFDIR|0o555, 2
	}
	want := attr{Ino: id, Atime: 1700000000, Mtime: 1700000000, Ctime: 1700000000,
		AtimeNsec: 123456789, MtimeNsec: 123456789, CtimeNsec: 123456789,
		Mode: mode, Nlink: nlink, Blksize: 4096}
	if a != want {
		t.Errorf("attr %+v, want %+v", a, want)
	}
}

func TestLookupAndGetattr(t *testing.T) {
	s := testServer()
	for _, c := range []struct {
		parent uint64
		name   string
		id     uint64 // 0: ENOENT
		dir    bool
	}{
		{rootID, "0", idTests, true},
		{rootID, "1", idMasked, false},
		{rootID, "2", idSol, true},
		{rootID, "3", 0, false},
		{rootID, "01", 0, false},
		{rootID, "+1", 0, false},
		{rootID, "-1", 0, false},
		{rootID, "tests", 0, false},
		{rootID, "99999999999999999999999", 0, false},
	} {
		m := msg(opLookup, c.parent, cstr(c.name))
		reply, _, rec := s.handle(m, nil)
		errno, p := checkReply(t, m, reply)
		if rec {
			t.Errorf("lookup %q in the root was recorded", c.name)
		}
		if c.id == 0 {
			if errno != syscall.ENOENT {
				t.Errorf("lookup %q: %v, want ENOENT", c.name, errno)
			}
			continue
		}
		if errno != 0 || len(p) != entryOutLen {
			t.Fatalf("lookup %q: %v, %d bytes", c.name, errno, len(p))
		}
		if ne.Uint64(p) != c.id || ne.Uint64(p[16:]) != validSecs || ne.Uint64(p[24:]) != validSecs {
			t.Errorf("lookup %q: nodeid %d, timeouts %d %d", c.name, ne.Uint64(p), ne.Uint64(p[16:]), ne.Uint64(p[24:]))
		}
		wantAttr(t, decodeAttr(p[40:]), c.id, c.dir)
	}
	for id, dir := range map[uint64]bool{rootID: true, idTests: true, idMasked: false, idSol: true} {
		m := msg(opGetattr, id, zeros(16))
		reply, _, rec := s.handle(m, nil)
		errno, p := checkReply(t, m, reply)
		if errno != 0 || len(p) != attrOutLen || rec || ne.Uint64(p) != validSecs {
			t.Fatalf("getattr %d: %v, %d bytes, recorded %v", id, errno, len(p), rec)
		}
		wantAttr(t, decodeAttr(p[16:]), id, dir)
	}
	for _, id := range []uint64{0, 5, 1 << 63} {
		m := msg(opGetattr, id, zeros(16))
		reply, _, _ := s.handle(m, nil)
		if errno, _ := checkReply(t, m, reply); errno != syscall.ENOENT {
			t.Errorf("getattr %d: %v, want ENOENT", id, errno)
		}
	}
}

func TestInit(t *testing.T) {
	for _, c := range []struct {
		name         string
		major, minor uint32
		body         []byte // overrides
		errno        syscall.Errno
		wantMinor    uint32
	}{
		{name: "newer kernel", major: 7, minor: 45, wantMinor: protoMinor},
		{name: "same", major: 7, minor: protoMinor, wantMinor: protoMinor},
		{name: "older kernel", major: 7, minor: 31, wantMinor: 31},
		{name: "too old", major: 7, minor: 22, errno: syscall.EPROTO},
		{name: "major 6", major: 6, minor: 99, errno: syscall.EPROTO},
		{name: "major 8", major: 8, minor: 0, wantMinor: 0},
		{name: "short", body: u32(7, 38, 0), errno: syscall.EIO},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := testServer()
			body := c.body
			if body == nil {
				// All the kernel's flags, including FUSE_INIT_EXT with
				// every flags2 bit: none may come back.
				body = append(u32(c.major, c.minor, 1<<20, ^uint32(0), ^uint32(0)), zeros(44)...)
			}
			m := msg(opInit, 0, body)
			reply, _, rec := s.handle(m, nil)
			errno, p := checkReply(t, m, reply)
			if errno != c.errno || rec {
				t.Fatalf("errno %v recorded %v, want %v", errno, rec, c.errno)
			}
			if errno != 0 {
				if s.initialized {
					t.Error("initialized after an error")
				}
				return
			}
			if len(p) != initOutLen || ne.Uint32(p) != protoMajor || ne.Uint32(p[4:]) != c.wantMinor {
				t.Fatalf("reply %x", p)
			}
			want := zeros(initOutLen)
			ne.PutUint32(want, protoMajor)
			if c.major == protoMajor {
				ne.PutUint32(want[4:], c.wantMinor)
				ne.PutUint32(want[20:], maxWrite)
				ne.PutUint32(want[24:], 1)
			}
			if !bytes.Equal(p, want) {
				t.Errorf("init_out %x, want %x (no flags, no readahead, nothing else)", p, want)
			}
			if s.initialized != (c.major == protoMajor) {
				t.Errorf("initialized %v", s.initialized)
			}
		})
	}
}

func TestReaddir(t *testing.T) {
	s := testServer()
	read := func(id, off uint64, size uint32) (syscall.Errno, []dirent) {
		m := msg(opReaddir, id, u64(0, off), u32(size, 0), u64(0), u32(0, 0))
		reply, _, rec := s.handle(m, nil)
		if rec {
			t.Errorf("readdir %d recorded", id)
		}
		errno, p := checkReply(t, m, reply)
		return errno, decodeDirents(t, p)
	}
	_, root := read(rootID, 0, 4096)
	want := []dirent{{rootID, 1, dtDir, "."}, {rootID, 2, dtDir, ".."}, {idTests, 3, dtDir, "0"}, {idMasked, 4, dtReg, "1"}, {idSol, 5, dtDir, "2"}}
	if !slices.Equal(root, want) {
		t.Errorf("root lists %v, want %v", root, want)
	}
	if _, part := read(rootID, 3, 4096); !slices.Equal(part, want[3:]) {
		t.Errorf("root from 3 lists %v", part)
	}
	if _, part := read(rootID, 0, 64); !slices.Equal(part, want[:2]) { // 32 bytes each
		t.Errorf("root in 64 bytes lists %v", part)
	}
	if _, part := read(rootID, 0, 63); !slices.Equal(part, want[:1]) {
		t.Errorf("root in 63 bytes lists %v", part)
	}
	for _, id := range []uint64{idTests, idSol} {
		if _, got := read(id, 0, 4096); !slices.Equal(got, []dirent{{id, 1, dtDir, "."}, {rootID, 2, dtDir, ".."}}) {
			t.Errorf("node %d lists %v, want only . and ..", id, got)
		}
		for _, off := range []uint64{2, 3, 1 << 62, ^uint64(0)} {
			if errno, got := read(id, off, 4096); errno != 0 || len(got) != 0 {
				t.Errorf("node %d from %d: %v %v", id, off, errno, got)
			}
		}
	}
	if errno, _ := read(idMasked, 0, 4096); errno != syscall.ENOTDIR {
		t.Errorf("readdir of a file: %v", errno)
	}
}

func TestMountValidation(t *testing.T) {
	for _, c := range []struct {
		name  string
		nodes []Node
		rec   func(Access)
		want  error
	}{
		{"no nodes", nil, func(Access) {}, ErrInvalidNode},
		{"empty path", []Node{{Path: ""}}, func(Access) {}, ErrInvalidNode},
		{"relative path", []Node{{Path: "/ok"}, {Path: "tests"}}, func(Access) {}, ErrInvalidNode},
		{"NUL in path", []Node{{Path: "/a\x00b"}}, func(Access) {}, ErrInvalidNode},
		{"nil record", []Node{{Path: "/tests", Dir: true}}, nil, ErrNoRecord},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := Mount(c.nodes, c.rec)
			if !errors.Is(err, c.want) {
				if f != nil {
					f.Close()
				}
				t.Fatalf("Mount: %v, want %v", err, c.want)
			}
		})
	}
}

func TestCloneIndex(t *testing.T) {
	f, _ := mountT(t, trapNodes)
	for _, i := range []int{-1, len(trapNodes), 1 << 40} {
		if c, err := f.Clone(i); !errors.Is(err, ErrNoSuchNode) {
			if c != nil {
				c.Close()
			}
			t.Errorf("Clone(%d): %v, want ErrNoSuchNode", i, err)
		}
	}
}

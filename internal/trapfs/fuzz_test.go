//go:build linux

package trapfs

import (
	"bytes"
	"embed"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// testdata/kernel holds requests captured from a real kernel (Linux 6.18)
// while TestTrapRecordsAccesses's operations ran, one file per opcode and
// kind of node: "<op>-<root|dir|file|none>.bin". Rewrite them with
// go test -run TestCaptureKernelVectors -trapfs.capture.
//
//go:embed testdata/kernel/*.bin
var kernelVectors embed.FS

var captureFlag = flag.Bool("trapfs.capture", false, "rewrite testdata/kernel from what this kernel sends")

// opNames names the opcodes the kernel may send.
var opNames = map[uint32]string{
	opLookup: "lookup", opForget: "forget", opGetattr: "getattr", opSetattr: "setattr",
	opReadlink: "readlink", opSymlink: "symlink", opMknod: "mknod", opMkdir: "mkdir",
	opUnlink: "unlink", opRmdir: "rmdir", opRename: "rename", opLink: "link",
	opOpen: "open", opRead: "read", opWrite: "write", opStatfs: "statfs",
	opRelease: "release", opFsync: "fsync", opSetxattr: "setxattr", opGetxattr: "getxattr",
	opListxattr: "listxattr", opRemovexattr: "removexattr", opFlush: "flush", opInit: "init",
	opOpendir: "opendir", opReaddir: "readdir", opReleasedir: "releasedir", opFsyncdir: "fsyncdir",
	opGetlk: "getlk", opSetlk: "setlk", opSetlkw: "setlkw", opAccess: "access",
	opCreate: "create", opInterrupt: "interrupt", opBmap: "bmap", opDestroy: "destroy",
	opIoctl: "ioctl", opPoll: "poll", opNotifyReply: "notify_reply", opBatchForget: "batch_forget",
	opFallocate: "fallocate", opReaddirplus: "readdirplus", opRename2: "rename2", opLseek: "lseek",
	opCopyFileRange: "copy_file_range", opTmpfile: "tmpfile",
}

// nodeKind names what a node id of trapNodes stands for.
func nodeKind(id uint64) string {
	switch {
	case id == 0:
		return "none"
	case id == rootID:
		return "root"
	case id >= firstNode && id-firstNode < uint64(len(trapNodes)):
		if trapNodes[id-firstNode].Dir {
			return "dir"
		}
		return "file"
	}
	return "unknown"
}

// kernelSeeds returns the captured requests by file name; there must be
// some.
func kernelSeeds(t testing.TB) map[string][]byte {
	t.Helper()
	names, err := fs.Glob(kernelVectors, "testdata/kernel/*.bin")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, n := range names {
		data, err := kernelVectors.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		out[strings.TrimSuffix(filepath.Base(n), ".bin")] = data
	}
	if len(out) == 0 {
		t.Fatal("the seed corpus testdata/kernel is empty")
	}
	return out
}

// FuzzDecode feeds arbitrary messages to the handler: it never panics,
// every request that parses re-encodes to the same bytes, every reply is
// well framed, and none carries content.
func FuzzDecode(f *testing.F) {
	for _, c := range handlerCases() {
		f.Add(c.msg)
	}
	for _, m := range kernelSeeds(f) {
		f.Add(m)
	}
	f.Fuzz(func(t *testing.T, m []byte) {
		checkHandled(t, newServer(trapNodes, testTime), m)
	})
}

// checkHandled handles m and checks every invariant that holds for any
// input. It returns the errno of the reply (0 for none).
func checkHandled(t *testing.T, s *server, m []byte) (syscall.Errno, bool) {
	t.Helper()
	reply, rec, recorded := s.handle(m, nil)
	if req, err := parseRequest(m); err == nil && !bytes.Equal(req.encode(), m) {
		t.Fatalf("parse → encode changed %x into %x", m, req.encode())
	}
	if recorded && (rec.Op == "" || !underNode(rec.Path)) {
		t.Fatalf("record %+v is not about a node", rec)
	}
	if reply == nil {
		return 0, recorded
	}
	errno, p := checkReply(t, m, reply)
	if errno != 0 {
		return errno, recorded
	}
	op, id := ne.Uint32(m[4:]), ne.Uint64(m[16:])
	switch op {
	case opRead, opReadlink, opGetxattr:
		if len(p) != 0 {
			t.Fatalf("%s answered with %d bytes", opNames[op], len(p))
		}
	case opListxattr:
		if len(p) != 0 && !bytes.Equal(p, zeros(getxattrOutLen)) {
			t.Fatalf("listxattr answered %x", p)
		}
	case opLookup:
		if id != rootID {
			t.Fatalf("lookup in node %d found something", id)
		}
	case opReaddir:
		for _, d := range decodeDirents(t, p) {
			i, err := strconv.Atoi(d.name)
			if d.name != "." && d.name != ".." && (id != rootID || err != nil || i >= len(s.nodes)) {
				t.Fatalf("node %d lists %q", id, d.name)
			}
		}
	case opCreate, opMknod, opMkdir, opSymlink, opUnlink, opRmdir, opRename, opRename2, opLink,
		opSetattr, opWrite, opSetxattr, opRemovexattr, opFallocate, opCopyFileRange, opTmpfile:
		t.Fatalf("%s succeeded", opNames[op])
	}
	return 0, recorded
}

// underNode reports whether a recorded path is a node of trapNodes or
// testNodes or inside one.
func underNode(p string) bool {
	for _, n := range append(append([]Node(nil), trapNodes...), testNodes...) {
		if p == n.Path || strings.HasPrefix(p, strings.TrimSuffix(n.Path, "/")+"/") {
			return true
		}
	}
	return false
}

// TestKernelVectors replays what a real kernel sent: every request decodes
// (no EIO), and gets the answer its kind calls for.
func TestKernelVectors(t *testing.T) {
	for name, m := range kernelSeeds(t) {
		t.Run(name, func(t *testing.T) {
			req, err := parseRequest(m)
			if err != nil {
				t.Fatal(err)
			}
			if want := opNames[req.Hdr.Opcode] + "-" + nodeKind(req.Hdr.NodeID); want != name {
				t.Fatalf("file %s holds %s", name, want)
			}
			s := newServer(trapNodes, testTime)
			errno, recorded := checkHandled(t, s, m)
			if errno == syscall.EIO || errno == syscall.ENOSYS {
				t.Fatalf("answered %v", errno)
			}
			kind := nodeKind(req.Hdr.NodeID)
			switch op := req.Hdr.Opcode; {
			case op == opInit:
				reply, _, _ := s.handle(m, nil)
				if got := ne.Uint32(reply[outHeaderLen+4:]); got != min(ne.Uint32(req.Body[4:]), protoMinor) {
					t.Errorf("negotiated minor %d", got)
				}
			case op == opLookup && kind == "dir", op == opOpen, op == opOpendir && kind != "root":
				if !recorded {
					t.Error("not recorded")
				}
			case op == opMkdir, op == opCreate, op == opMknod, op == opSymlink, op == opSetattr, op == opSetxattr, op == opRemovexattr:
				if !recorded || errno != syscall.EROFS {
					t.Errorf("errno %v, recorded %v; want EROFS, recorded", errno, recorded)
				}
			case kind == "root" || op == opGetattr || op == opStatfs || op == opGetxattr || op == opListxattr:
				if recorded {
					t.Error("recorded")
				}
			}
		})
	}
}

// TestCaptureKernelVectors rewrites testdata/kernel from the requests this
// kernel sends while the integration tests' operations run.
func TestCaptureKernelVectors(t *testing.T) {
	if !*captureFlag {
		t.Skip("rewrites testdata/kernel only with -trapfs.capture")
	}
	requireFUSE(t)
	seen := map[string][]byte{}
	traceRequest = func(m []byte) {
		if len(m) < inHeaderLen {
			return
		}
		name := opNames[ne.Uint32(m[4:])] + "-" + nodeKind(ne.Uint64(m[16:]))
		if _, ok := seen[name]; !ok {
			seen[name] = bytes.Clone(m)
		}
	}
	defer func() { traceRequest = nil }()
	f, _ := mountT(t, trapNodes)
	var ops []op
	for _, s := range trapSteps() {
		ops = append(ops, s.op)
	}
	for _, p := range []string{"tests", "masked.conf"} {
		ops = append(ops, op{Do: "mmap", Path: p}, op{Do: "sendfile", Path: p}, op{Do: "copyrange", Path: p})
	}
	startChild(t, f, trapDir(t), trapTargets, [][]op{ops}).results(t)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("testdata", "kernel")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, m := range seen {
		if err := os.WriteFile(filepath.Join(dir, name+".bin"), m, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("wrote %d requests to %s", len(seen), dir)
}

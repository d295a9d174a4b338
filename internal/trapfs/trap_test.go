//go:build linux

package trapfs

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The nodes of the integration tests, and where the child attaches them
// (relative to its directory, which also holds "outside/f", a plain file
// that is not part of the trap).
var (
	trapNodes = []Node{
		{Path: "/tests", Dir: true},
		{Path: "/solution", Dir: true},
		{Path: "/etc/masked.conf"},
	}
	trapTargets = map[int]string{0: "tests", 1: "solution", 2: "masked.conf"}
)

// trapDir makes the child's directory: mount points for the nodes and a
// file outside the trap.
func trapDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for i, target := range trapTargets {
		var err error
		if trapNodes[i].Dir {
			err = os.Mkdir(filepath.Join(dir, target), 0o755)
		} else {
			err = os.WriteFile(filepath.Join(dir, target), nil, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "outside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "outside/f"), []byte("outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rec is an expected record.
type rec struct{ op, path, arg string }

// step is an op, what it must give, and the records it must cause, in order.
type step struct {
	op    op
	errno syscall.Errno
	check func(outcome) string // "" when fine
	recs  []rec
}

func lookup(path string) rec { return rec{"lookup", path, ""} }

// trapSteps are ordinary and hostile operations on the nodes of trapNodes
// attached as in trapTargets, with what each must give and record.
func trapSteps() []step {
	isDir := func(o outcome) string {
		if o.Mode != syscall.S_IFDIR|0o555 || o.UID != 0 {
			return fmt.Sprintf("mode %o uid %d, want dir 0555 uid 0", o.Mode, o.UID)
		}
		return ""
	}
	emptyFile := func(o outcome) string {
		if o.Mode != syscall.S_IFREG|0o444 || o.Size != 0 || o.UID != 0 {
			return fmt.Sprintf("mode %o size %d uid %d, want file 0444 size 0 uid 0", o.Mode, o.Size, o.UID)
		}
		return ""
	}
	noData := func(o outcome) string {
		if o.Data != "" || len(o.Names) != 0 {
			return fmt.Sprintf("got data %q names %q", o.Data, o.Names)
		}
		return ""
	}
	return []step{
		// A trap directory: visible, empty, every name missing.
		{op: op{Do: "stat", Path: "tests"}, check: isDir},
		{op: op{Do: "stat", Path: "tests/test_outputs.py"}, errno: unix.ENOENT, recs: []rec{lookup("/tests/test_outputs.py")}},
		{op: op{Do: "stat", Path: "tests/test_outputs.py"}, errno: unix.ENOENT, recs: []rec{lookup("/tests/test_outputs.py")}}, // not cached
		{op: op{Do: "open", Path: "tests/a"}, errno: unix.ENOENT, recs: []rec{lookup("/tests/a")}},
		{op: op{Do: "readdir", Path: "tests"}, check: noData, recs: []rec{{"opendir", "/tests", ""}}},
		{op: op{Do: "getdents", Path: "tests"}, check: func(o outcome) string {
			if !slices.Equal(o.Names, []string{".", ".."}) {
				return fmt.Sprintf("entries %q, want . and ..", o.Names)
			}
			return ""
		}, recs: []rec{{"opendir", "/tests", ""}}},
		{op: op{Do: "stat", Path: "tests/sub/deeper"}, errno: unix.ENOENT, recs: []rec{lookup("/tests/sub")}},
		{op: op{Do: "stat", Path: "solution/solve.sh"}, errno: unix.ENOENT, recs: []rec{lookup("/solution/solve.sh")}},
		{op: op{Do: "stat", Path: "tests/we\nird\x01"}, errno: unix.ENOENT, recs: []rec{lookup("/tests/we\nird\x01")}},

		// Changes inside it: refused; the name is looked up first.
		{op: op{Do: "open", Path: "tests/new", Flags: unix.O_CREAT | unix.O_WRONLY | unix.O_TRUNC}, errno: unix.EROFS,
			recs: []rec{lookup("/tests/new"), {"create", "/tests/new", ""}}},
		{op: op{Do: "mkdir", Path: "tests/d"}, errno: unix.EROFS, recs: []rec{lookup("/tests/d"), {"mkdir", "/tests/d", ""}}},
		{op: op{Do: "mknod", Path: "tests/fifo"}, errno: unix.EROFS, recs: []rec{lookup("/tests/fifo"), {"mknod", "/tests/fifo", ""}}},
		{op: op{Do: "symlink", Path: "tests/l", Arg: "../x"}, errno: unix.EROFS, recs: []rec{lookup("/tests/l"), {"symlink", "/tests/l", "../x"}}},
		{op: op{Do: "unlink", Path: "tests/test_outputs.py"}, errno: unix.ENOENT, recs: []rec{lookup("/tests/test_outputs.py")}},
		{op: op{Do: "rmdir", Path: "tests/d"}, errno: unix.ENOENT, recs: []rec{lookup("/tests/d")}},
		{op: op{Do: "rename", Path: "tests/a", Arg: "tests/b"}, errno: unix.ENOENT, recs: []rec{lookup("/tests/a")}},
		{op: op{Do: "rename", Path: "outside/f", Arg: "tests/f"}, errno: unix.EXDEV},
		{op: op{Do: "link", Path: "outside/f", Arg: "tests/h"}, errno: unix.EXDEV, recs: []rec{lookup("/tests/h")}},

		// Changes to the directory itself.
		{op: op{Do: "chmod", Path: "tests", Flags: 0o777}, errno: unix.EROFS, recs: []rec{{"setattr", "/tests", "mode"}}},
		{op: op{Do: "chown", Path: "tests"}, errno: unix.EROFS, recs: []rec{{"setattr", "/tests", "uid,gid"}}},
		{op: op{Do: "utimes", Path: "tests"}, errno: unix.EROFS, recs: []rec{{"setattr", "/tests", "atime,mtime"}}},
		{op: op{Do: "setxattr", Path: "tests", Arg: "user.x"}, errno: unix.EROFS, recs: []rec{{"setxattr", "/tests", "user.x"}}},
		{op: op{Do: "removexattr", Path: "tests", Arg: "user.x"}, errno: unix.EROFS, recs: []rec{{"removexattr", "/tests", "user.x"}}},
		{op: op{Do: "access", Path: "tests", Flags: unix.W_OK}, errno: unix.EROFS, recs: []rec{{"access", "/tests", "w"}}},
		{op: op{Do: "access", Path: "tests", Flags: unix.R_OK | unix.X_OK}, recs: []rec{{"access", "/tests", "rx"}}},

		// Reading metadata: answered, not recorded, nothing in it.
		{op: op{Do: "getxattr", Path: "tests", Arg: "user.x"}, errno: unix.ENODATA},
		{op: op{Do: "listxattr", Path: "tests"}, check: noData},
		{op: op{Do: "statfs", Path: "tests"}},
		{op: op{Do: "readlink", Path: "tests"}, errno: unix.EINVAL},

		// A trap file: an empty read-only file.
		{op: op{Do: "stat", Path: "masked.conf"}, check: emptyFile},
		{op: op{Do: "open", Path: "masked.conf"}, check: noData, recs: []rec{{"open", "/etc/masked.conf", "read"}}},
		{op: op{Do: "open", Path: "masked.conf", Flags: unix.O_WRONLY}, errno: unix.EROFS, recs: []rec{{"open", "/etc/masked.conf", "write"}}},
		{op: op{Do: "open", Path: "masked.conf", Flags: unix.O_RDWR | unix.O_APPEND}, errno: unix.EROFS, recs: []rec{{"open", "/etc/masked.conf", "read-write"}}},
		{op: op{Do: "open", Path: "masked.conf", Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_TRUNC}, errno: unix.EROFS, recs: []rec{{"open", "/etc/masked.conf", "write"}}},
		{op: op{Do: "truncate", Path: "masked.conf"}, errno: unix.EROFS, recs: []rec{{"setattr", "/etc/masked.conf", "size"}}},
		{op: op{Do: "chmod", Path: "masked.conf", Flags: 0o4755}, errno: unix.EROFS, recs: []rec{{"setattr", "/etc/masked.conf", "mode"}}},
		{op: op{Do: "setxattr", Path: "masked.conf", Arg: "user.evil"}, errno: unix.EROFS, recs: []rec{{"setxattr", "/etc/masked.conf", "user.evil"}}},
		{op: op{Do: "access", Path: "masked.conf", Flags: unix.R_OK}, recs: []rec{{"access", "/etc/masked.conf", "r"}}},
		// Execute permission on a file is checked by the kernel from the
		// mode alone: no request, no record.
		{op: op{Do: "access", Path: "masked.conf", Flags: unix.X_OK}, errno: unix.EACCES},
		{op: op{Do: "exec", Path: "masked.conf"}, errno: unix.EACCES},
		{op: op{Do: "stat", Path: "masked.conf/x"}, errno: unix.ENOTDIR},
		{op: op{Do: "readlink", Path: "masked.conf"}, errno: unix.EINVAL},
		{op: op{Do: "getxattr", Path: "masked.conf", Arg: "security.capability"}, errno: unix.ENODATA},

		// Outside the trap: nothing recorded.
		{op: op{Do: "stat", Path: "outside/f"}},
		{op: op{Do: "open", Path: "outside/f"}, check: func(o outcome) string {
			if o.Data != "outside" {
				return fmt.Sprintf("read %q", o.Data)
			}
			return ""
		}},
		{op: op{Do: "readdir", Path: "."}},
		{op: op{Do: "stat", Path: "/proc/self/status"}},
		{op: op{Do: "stat", Path: "outside/missing"}, errno: unix.ENOENT},
	}
}

// trapCmd is a real tool run in the child, what it must exit with and the
// records it must cause, carrying its pid.
type trapCmd struct {
	argv []string
	exit int
	recs []rec
}

var trapCmds = []trapCmd{
	{[]string{"cat", "tests/test_outputs.py"}, 1, []rec{lookup("/tests/test_outputs.py")}},
	{[]string{"cat", "masked.conf"}, 0, []rec{{"open", "/etc/masked.conf", "read"}}},
	{[]string{"sh", "-c", "echo hi > tests/x"}, 2, []rec{lookup("/tests/x"), {"create", "/tests/x", ""}}},
}

// TestTrapRecordsAccesses runs trapSteps and trapCmds from another process
// against attached clones and checks what each returned and exactly which
// records it caused, with the caller's thread id or the tool's pid.
func TestTrapRecordsAccesses(t *testing.T) {
	f, r := mountT(t, trapNodes)
	dir := trapDir(t)
	steps, cmds := trapSteps(), trapCmds
	var ops []op
	for _, s := range steps {
		ops = append(ops, s.op)
	}
	for _, c := range cmds {
		ops = append(ops, op{Do: "cmd", Argv: c.argv})
	}
	ch := startChild(t, f, dir, trapTargets, [][]op{ops})
	outs := ch.results(t)
	if err := f.Close(); err != nil { // delivers every record
		t.Fatal(err)
	}
	got := r.all()

	type want struct {
		pid  int
		what string
		recs []rec
	}
	var wants []want
	for i, s := range steps {
		o := outs[i]
		what := fmt.Sprintf("%s %q", s.op.Do, s.op.Path)
		if o.Errno != int(s.errno) {
			t.Errorf("%s: errno %v, want %v", what, syscall.Errno(o.Errno), s.errno)
		}
		if s.check != nil {
			if msg := s.check(o); msg != "" {
				t.Errorf("%s: %s", what, msg)
			}
		}
		wants = append(wants, want{o.TID, what, s.recs})
	}
	for i, c := range cmds {
		o := outs[len(steps)+i]
		what := strings.Join(c.argv, " ")
		if o.Exit != c.exit || o.Errno != 0 {
			t.Errorf("%s: exit %d (errno %d), want %d; output %q", what, o.Exit, o.Errno, c.exit, o.Data)
		}
		wants = append(wants, want{o.PID, what, c.recs})
	}
	// The records, in order, are exactly the expected ones.
	for _, w := range wants {
		for _, e := range w.recs {
			if len(got) == 0 {
				t.Errorf("%s: missing record %v", w.what, e)
				continue
			}
			g := got[0]
			got = got[1:]
			if g.Op != e.op || g.Path != e.path || g.Arg != e.arg || g.PID != w.pid || g.UID != 0 || g.GID != 0 || g.Time.IsZero() {
				t.Errorf("%s: record %+v, want %v from pid %d uid 0", w.what, g, e, w.pid)
			}
		}
	}
	for _, g := range got {
		t.Errorf("unexpected record %+v", g)
	}
	if d := f.Dropped(); d != 0 {
		t.Errorf("%d records dropped", d)
	}
}

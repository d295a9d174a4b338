//go:build linux

package trapfs

import (
	"errors"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestNoContent asks every node kind for content every way there is and
// gets nothing: no bytes, no entries, no link target, no attribute.
func TestNoContent(t *testing.T) {
	f, _ := mountT(t, trapNodes)
	dir := trapDir(t)
	// Any outcome is fine, error or not, as long as nothing comes back.
	type probe struct{ op op }
	var probes []probe
	for _, p := range []string{"tests", "solution", "masked.conf"} {
		for _, o := range []op{
			{Do: "open", Path: p},
			{Do: "pread", Path: p},
			{Do: "mmap", Path: p},
			{Do: "copyrange", Path: p},
			{Do: "sendfile", Path: p},
			{Do: "readdir", Path: p},
			{Do: "getdents", Path: p},
			{Do: "readlink", Path: p},
			{Do: "listxattr", Path: p},
		} {
			probes = append(probes, probe{op: o})
		}
		for _, name := range []string{"user.x", "trusted.overlay.opaque", "security.selinux", "security.capability", "system.posix_acl_access", "system.posix_acl_default"} {
			probes = append(probes, probe{op: op{Do: "getxattr", Path: p, Arg: name}})
		}
	}
	var ops []op
	for _, p := range probes {
		ops = append(ops, p.op)
	}
	outs := startChild(t, f, dir, trapTargets, [][]op{ops}).results(t)
	for i, p := range probes {
		o := outs[i]
		what := p.op.Do + " " + p.op.Path + " " + p.op.Arg
		content := o.Data != "" || o.Size != 0
		if p.op.Do == "getdents" {
			content = len(o.Names) > 2 || (len(o.Names) > 0 && (o.Names[0] != "." || o.Names[len(o.Names)-1] != ".."))
		} else if len(o.Names) > 0 {
			content = true
		}
		if content {
			t.Errorf("%s: got content: %+v", what, o)
		}
		if p.op.Do == "mmap" && o.Errno == 0 && !o.Fault {
			t.Errorf("%s: a mapped page read without fault: %+v", what, o)
		}
		t.Logf("%s: errno %v fault %v", what, syscall.Errno(o.Errno), o.Fault)
	}
}

// TestCloseWithCloneAttached closes the trap while a clone is still mounted
// in another process and requests are in flight: Close returns promptly,
// leaves no goroutine or fd behind, and every later access through the clone
// fails with ENOTCONN instead of hanging.
func TestCloseWithCloneAttached(t *testing.T) {
	requireFUSE(t)
	fdsBefore := openFDs(t)
	r := &recorder{}
	f, err := Mount(trapNodes, r.record)
	if err != nil {
		t.Fatal(err)
	}
	dir := trapDir(t)
	ch := startChild(t, f, dir, trapTargets, [][]op{
		{{Do: "stat", Path: "tests/x"}},
		{{Do: "statloop", Path: "tests/y"}}, // runs while Close happens
		{
			{Do: "stat", Path: "tests/z"},
			{Do: "open", Path: "masked.conf"},
			{Do: "readdir", Path: "solution"},
			{Do: "mkdir", Path: "tests/d"},
		},
	})
	if outs := ch.results(t); outs[0].Errno != int(unix.ENOENT) {
		t.Fatalf("before Close: %v", syscall.Errno(outs[0].Errno))
	}
	ch.next(t)
	waitFor(t, func() bool { return len(r.all()) >= 20 }) // the loop is going
	closed := make(chan error, 1)
	start := time.Now()
	go func() { closed <- f.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("Close took %v", time.Since(start))
	case <-time.After(10 * time.Second):
		t.Fatal("Close hung")
	}
	loop := ch.results(t)[0]
	// A request the abort caught in flight fails with ECONNABORTED, the
	// next ones with ENOTCONN.
	if loop.Errno != int(unix.ENOTCONN) && loop.Errno != int(unix.ECONNABORTED) {
		t.Errorf("stat loop ended with %v after %d lookups, want ENOTCONN or ECONNABORTED", syscall.Errno(loop.Errno), loop.Count)
	}
	ch.next(t)
	for i, o := range ch.results(t) {
		if o.Errno != int(unix.ENOTCONN) {
			t.Errorf("after Close, op %d: %v, want ENOTCONN", i, syscall.Errno(o.Errno))
		}
		if o.Elapsed > 5*time.Second {
			t.Errorf("after Close, op %d took %v", i, o.Elapsed)
		}
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := f.Clone(0); !errors.Is(err, ErrClosed) {
		t.Errorf("Clone after Close: %v, want ErrClosed", err)
	}
	ch.in.Close()
	if err := ch.cmd.Wait(); err != nil {
		t.Errorf("child: %v", err)
	}
	assertNoServeGoroutines(t)
	if after := openFDs(t); after != fdsBefore {
		t.Errorf("%d fds open after Close, %d before Mount", after, fdsBefore)
	}
}

// TestCloseUnused closes a trap that was never cloned, one whose clones
// were dropped unattached, and one whose clones were attached in a mount
// namespace that is gone. None of the mounts ever shows in the host's mount
// table.
func TestCloseUnused(t *testing.T) {
	requireFUSE(t)
	fdsBefore := openFDs(t)
	for _, use := range []string{"none", "clone", "attach"} {
		f, err := Mount(trapNodes, func(Access) {})
		if err != nil {
			t.Fatal(err)
		}
		assertDetached(t, f.mnt)
		switch use {
		case "clone":
			for i := range trapNodes {
				c, err := f.Clone(i)
				if err != nil {
					t.Fatal(err)
				}
				assertDetached(t, int(c.Fd()))
				c.Close()
			}
		case "attach":
			ch := startChild(t, f, trapDir(t), trapTargets, [][]op{{{Do: "stat", Path: "tests/x"}}})
			ch.results(t)
			ch.in.Close()
			if err := ch.cmd.Wait(); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	assertNoServeGoroutines(t)
	if after := openFDs(t); after != fdsBefore {
		t.Errorf("%d fds open after Close, %d before Mount", after, fdsBefore)
	}
}

// TestSlowRecordNeverBlocksTheKernel blocks the record callback while
// another process makes far more recorded accesses than the queue holds:
// every access is still answered at once, the excess is counted as dropped,
// and nothing is lost or duplicated.
func TestSlowRecordNeverBlocksTheKernel(t *testing.T) {
	requireFUSE(t)
	release := make(chan struct{})
	r := &recorder{}
	f, err := Mount(trapNodes, func(a Access) {
		<-release
		r.record(a)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock() // before Close, even on failure
	const n = 3 * recordQueue
	dir := trapDir(t)
	ch := startChild(t, f, dir, trapTargets, [][]op{{{Do: "statmany", Path: "tests", Flags: n}}})
	o := ch.results(t)[0]
	if o.Count != n || len(o.Others) != 0 {
		t.Fatalf("%d lookups answered ENOENT of %d, others %v", o.Count, n, o.Others)
	}
	unblock()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, dropped := len(r.all()), f.Dropped()
	if dropped == 0 || uint64(got)+dropped != n {
		t.Errorf("%d delivered + %d dropped, want %d in all with some dropped", got, dropped, n)
	}
}

// TestConcurrentAccess makes lookups from many threads at once: all are
// answered and all are recorded, each once.
func TestConcurrentAccess(t *testing.T) {
	f, r := mountT(t, trapNodes)
	const n = 2000
	dir := trapDir(t)
	ch := startChild(t, f, dir, trapTargets, [][]op{{{Do: "statmany", Path: "tests", Flags: n}}})
	o := ch.results(t)[0]
	if o.Count != n || len(o.Others) != 0 {
		t.Fatalf("%d lookups answered ENOENT of %d, others %v", o.Count, n, o.Others)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, a := range r.all() {
		seen[a.Path]++
	}
	if len(seen) != n {
		t.Errorf("%d distinct paths recorded, want %d", len(seen), n)
	}
	for p, c := range seen {
		if c != 1 || !strings.HasPrefix(p, "/tests/") {
			t.Errorf("%s recorded %d times", p, c)
		}
	}
}

// assertDetached fails if the mount of fd is in the host's mount table.
func assertDetached(t *testing.T, fd int) {
	t.Helper()
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_MNT_ID, &stx); err != nil {
		t.Fatal(err)
	}
	if stx.Mask&unix.STATX_MNT_ID == 0 {
		t.Fatal("statx gave no mount id")
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		if id, _, _ := strings.Cut(line, " "); id == strconv.FormatUint(stx.Mnt_id, 10) {
			t.Errorf("mount %d is attached: %s", stx.Mnt_id, line)
		}
	}
}

// openFDs counts the process's open fds.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents) - 1 // the directory's own fd
}

// assertNoServeGoroutines fails if a goroutine of an FS is still running.
func assertNoServeGoroutines(t *testing.T) {
	t.Helper()
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, fn := range []string{"trapfs.(*FS).serve", "trapfs.(*FS).deliver"} {
		if strings.Contains(stacks, fn) {
			t.Errorf("%s still running:\n%s", fn, stacks)
		}
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("timed out")
}

package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/seccomp"
)

func init() {
	attacks["dial"] = attackDial
	attacks["cat"] = func(args []string) error {
		for _, p := range args {
			b, err := os.ReadFile(p)
			fmt.Printf("%s %q %s\n", p, b, errnoName(err))
		}
		return nil
	}
}

// attackDial: args are TCP addresses; for each, whether it connected and
// the first line the other end sent.
func attackDial(args []string) error {
	for _, addr := range args {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			fmt.Printf("%s %s\n", addr, dialResult(err))
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Close()
		fmt.Printf("%s connected %q\n", addr, strings.TrimSpace(line))
	}
	return nil
}

// The sandbox's listeners live in its own network namespace and are served
// by the host: the command reaches them at their loopback address, the
// host's own loopback does not.
func TestListenServe(t *testing.T) {
	requireRoot(t)
	var accepted atomic.Int64
	var wg sync.WaitGroup
	var served []net.Listener
	spec := attackSpec(t, "dial", "127.0.0.1:3128", "127.0.0.1:4100", "127.0.0.1:4101")
	spec.Listen = []string{"127.0.0.1:3128", "127.0.0.1:4100"}
	spec.Serve = func(ls []net.Listener) {
		served = ls
		for i, l := range ls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					accepted.Add(1)
					fmt.Fprintf(c, "served by the host on listener %d\n", i)
					c.Close()
				}
			}()
		}
	}
	// Something on the host's own 127.0.0.1:3128 must not be what answers.
	if hl, err := net.Listen("tcp", "127.0.0.1:3128"); err == nil {
		defer hl.Close()
		go func() {
			for {
				c, err := hl.Accept()
				if err != nil {
					return
				}
				fmt.Fprintln(c, "the host's loopback")
				c.Close()
			}
		}()
	}
	res, out, errOut := runSpec(t, spec)
	for _, l := range served {
		l.Close()
	}
	wg.Wait()
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s %s", res.ExitCode, out, errOut)
	}
	want := []string{
		`127.0.0.1:3128 connected "served by the host on listener 0"`,
		`127.0.0.1:4100 connected "served by the host on listener 1"`,
		`127.0.0.1:4101 refused:ECONNREFUSED`,
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if accepted.Load() != 2 || len(served) != 2 {
		t.Errorf("%d connections on %d listeners, want 2 on 2", accepted.Load(), len(served))
	}
}

// WatchNet hears every connect, wherever it goes, and changes none: the one
// to the served listener still connects, the one outward still fails.
func TestWatchNet(t *testing.T) {
	requireRoot(t)
	var mu sync.Mutex
	var seen []seccomp.Attempt
	spec := attackSpec(t, "dial", "127.0.0.1:3128", "192.0.2.1:80")
	spec.Listen = []string{"127.0.0.1:3128"}
	var served net.Listener
	spec.Serve = func(ls []net.Listener) {
		served = ls[0]
		go func() {
			for {
				c, err := served.Accept()
				if err != nil {
					return
				}
				fmt.Fprintln(c, "hi")
				c.Close()
			}
		}()
	}
	spec.WatchNet = func(a seccomp.Attempt) {
		mu.Lock()
		seen = append(seen, a)
		mu.Unlock()
	}
	res, out, errOut := runSpec(t, spec)
	if served == nil {
		t.Fatalf("Serve was never called: exit %d\n%s\n%s", res.ExitCode, out, errOut)
	}
	served.Close()
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s %s", res.ExitCode, out, errOut)
	}
	if !strings.Contains(out, `127.0.0.1:3128 connected "hi"`) || !strings.Contains(out, "192.0.2.1:80 refused:ENETUNREACH") {
		t.Errorf("the watch changed an outcome:\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	got := map[string]bool{}
	for _, a := range seen {
		got[fmt.Sprintf("%s %s %s %d", a.Syscall, a.Family, a.Addr, a.Port)] = true
		if a.PID <= 1 {
			t.Errorf("attempt with pid %d", a.PID)
		}
	}
	for _, w := range []string{"connect inet 127.0.0.1 3128", "connect inet 192.0.2.1 80"} {
		if !got[w] {
			t.Errorf("not recorded: %s (got %v)", w, got)
		}
	}
}

// A detached mount the caller made is attached where asked, read-only as
// made, and the caller's descriptor stays the caller's.
func TestTrees(t *testing.T) {
	requireRoot(t)
	dir := worldReadableDir(t)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("tree content"), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	m := os.NewFile(uintptr(fd), "tree")
	defer m.Close()
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		t.Fatal(err)
	}
	spec := attackSpec(t, "cat", "/tmp/tree/f")
	spec.Trees = []Tree{{Dst: "/tmp/tree", Mount: m}}
	_, out, _ := runSpec(t, spec)
	if strings.TrimSpace(out) != `/tmp/tree/f "tree content" ok` {
		t.Errorf("got %q", out)
	}
	// Run took a copy: the caller's descriptor is still good.
	var st unix.Stat_t
	if err := unix.Fstat(int(m.Fd()), &st); err != nil {
		t.Errorf("the caller's descriptor: %v", err)
	}
	spec.Trees = []Tree{{Dst: "/tmp/tree"}}
	if _, err := Run(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "no mount descriptor") {
		t.Errorf("a tree without a descriptor: %v", err)
	}
}

// The host checks what init hands over: a listening socket bound where the
// spec says, nothing else.
func TestCheckListener(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	addr := l.Addr().String()
	if err := checkListener(int(f.Fd()), addr); err != nil {
		t.Errorf("the right listener: %v", err)
	}
	if err := checkListener(int(f.Fd()), "127.0.0.1:1"); err == nil {
		t.Errorf("a listener on another port was taken")
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cf, _ := c.(*net.TCPConn).File()
	defer cf.Close()
	if err := checkListener(int(cf.Fd()), addr); err == nil {
		t.Errorf("a connected socket was taken for a listener")
	}
	if err := checkListener(int(os.Stdin.Fd()), addr); err == nil {
		t.Errorf("stdin was taken for a listener")
	}
}

// A command that ends at once ends the watch at once: however early that
// comes, it is the normal end, not an error of the watch.
func TestWatchNetQuickCommand(t *testing.T) {
	requireRoot(t)
	for i := 0; i < 20; i++ {
		spec := attackSpec(t, "euid")
		spec.WatchNet = func(seccomp.Attempt) {}
		if _, err := Run(t.Context(), spec); err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
	}
}

// Sandboxes started at once in one process each exec their own init: the
// descriptor init is exec'd through must stay out of the range Go's child
// shuffles descriptors into, however high the others' numbers are.
func TestConcurrentRuns(t *testing.T) {
	requireRoot(t)
	var wg sync.WaitGroup
	for g := 0; g < 6; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				spec := attackSpec(t, "euid")
				spec.WatchNet = func(seccomp.Attempt) {}
				if _, err := Run(t.Context(), spec); err != nil {
					t.Errorf("run %d: %v", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// IPv6Loopback tells the truth about a sandbox's lo: a listener on [::1]
// can be made, and reached from inside, exactly when it says so.
func TestIPv6Loopback(t *testing.T) {
	requireRoot(t)
	has := IPv6Loopback()
	spec := attackSpec(t, "dial", "[::1]:4100")
	spec.Listen = []string{"[::1]:4100"}
	var wg sync.WaitGroup
	spec.Serve = func(ls []net.Listener) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if c, err := ls[0].Accept(); err == nil {
				fmt.Fprintln(c, "hi")
				c.Close()
			}
			ls[0].Close()
		}()
	}
	var stdout bytes.Buffer
	spec.Stdout = &stdout
	res, err := Run(context.Background(), spec)
	wg.Wait()
	switch {
	case has && err != nil:
		t.Fatalf("IPv6Loopback() is true, but listening on [::1] failed: %v", err)
	case has && (res.ExitCode != 0 || strings.TrimSpace(stdout.String()) != `[::1]:4100 connected "hi"`):
		t.Fatalf("IPv6Loopback() is true, but [::1] inside gave exit %d: %s", res.ExitCode, stdout.String())
	case !has && err == nil:
		t.Fatalf("IPv6Loopback() is false, but the sandbox listened on [::1]")
	}
	t.Logf("IPv6Loopback() = %v", has)
}

// WatchFiles hears every lookup by name, found or not, every exec with its
// arguments, environment and working directory, and every listing, with
// relative names joined to the caller's directory as the sandbox sees it;
// the outcomes are unchanged.
func TestWatchFiles(t *testing.T) {
	requireRoot(t)
	var mu sync.Mutex
	var seen []seccomp.FileAccess
	spec := Spec{Rootfs: RootfsHost, Workdir: "/usr",
		Args:   []string{"/bin/sh", "-c", "cd lib && ls >/dev/null; test -e no-such-file; PROBE=1 exec /bin/true arg1"},
		Limits: Limits{Timeout: 60 * time.Second, MemoryBytes: 256 << 20, Pids: 100}}
	spec.WatchFiles = func(a seccomp.FileAccess) {
		mu.Lock()
		seen = append(seen, a)
		mu.Unlock()
	}
	res, out, errOut := runSpec(t, spec)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s %s", res.ExitCode, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	var listed, probed, execd, toList bool
	for _, a := range seen {
		switch {
		case a.Op == seccomp.OpList && a.Path == "/usr/lib":
			listed = true
		case a.Op == seccomp.OpOpen && a.Path == "/usr/lib":
			toList = a.Dir && !a.Write // ls opens the directory to list it
		case a.Op == seccomp.OpStat && a.Path == "/usr/lib/no-such-file":
			probed = true
		case a.Op == seccomp.OpExec && a.Path == "/bin/true":
			execd = slices.Equal(a.Argv, []string{"/bin/true", "arg1"}) && slices.Contains(a.Env, "PROBE=1") && a.Cwd == "/usr/lib"
			if !execd {
				t.Errorf("exec recorded as %+v", a)
			}
		}
		if a.Op != seccomp.OpNotNamed && a.Unread == "" && !strings.HasPrefix(a.Path, "/") {
			t.Errorf("relative path recorded: %+v", a)
		}
	}
	if !listed || !probed || !execd || !toList {
		t.Errorf("listed %v, probed %v, exec %v, opened to list %v; records:\n%v", listed, probed, execd, toList, seen)
	}
	bad := spec
	bad.WatchNet = func(seccomp.Attempt) {}
	if _, err := Run(context.Background(), bad); err == nil {
		t.Error("WatchNet with WatchFiles was accepted")
	}
}

// A files watch and listeners together (a traced grader behind a proxy):
// the watch is handed over before the fork, the listeners when the command
// is placed, and the command reaches what the host serves on them.
func TestWatchFilesWithListeners(t *testing.T) {
	requireRoot(t)
	var mu sync.Mutex
	execs := 0
	spec := Spec{Rootfs: RootfsHost, Listen: []string{"127.0.0.1:3128"},
		Args:   []string{"python3", "-c", "import socket; s = socket.create_connection(('127.0.0.1', 3128)); print(s.recv(5).decode())"},
		Limits: Limits{Timeout: 60 * time.Second, MemoryBytes: 256 << 20, Pids: 100}}
	spec.Serve = func(ls []net.Listener) {
		go func() {
			c, err := ls[0].Accept()
			if err == nil {
				c.Write([]byte("hello"))
				c.Close()
			}
		}()
	}
	spec.WatchFiles = func(a seccomp.FileAccess) {
		if a.Op == seccomp.OpExec {
			mu.Lock()
			execs++
			mu.Unlock()
		}
	}
	res, out, errOut := runSpec(t, spec)
	if res.ExitCode != 0 || strings.TrimSpace(out) != "hello" {
		t.Fatalf("exit %d, out %q, err %q", res.ExitCode, out, errOut)
	}
	mu.Lock()
	defer mu.Unlock()
	if execs == 0 {
		t.Errorf("the watch saw no exec")
	}
}

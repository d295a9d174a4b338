package cgroup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// helperEnv makes the test binary act as a child process instead of running
// tests; its value names what the child does.
const helperEnv = "PROCTOR_CGROUP_TEST_HELPER"

// noSkip reports whether a test that cannot run must fail rather than skip:
// under CI (CI=true) or with PROCTOR_NO_SKIP set, as in the rest of the tree.
func noSkip() bool { return os.Getenv("PROCTOR_NO_SKIP") != "" || os.Getenv("CI") == "true" }

// skipOrFail skips the test naming what is missing, or fails it under noSkip.
func skipOrFail(t *testing.T, reason string) {
	t.Helper()
	if noSkip() {
		t.Fatalf("cannot run here: %s (under CI a skipped isolation test is a failure)", reason)
	}
	t.Skip(reason)
}

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	os.Exit(m.Run())
}

// runHelper is the child side. Every mode first waits for one byte on stdin,
// so the parent can put it in a cgroup before it does anything.
func runHelper(mode string) int {
	if mode == "ignore-term" {
		signal.Ignore(syscall.SIGTERM)
	}
	var b [1]byte
	if _, err := io.ReadFull(os.Stdin, b[:]); err != nil {
		fmt.Fprintln(os.Stderr, "helper: reading go byte:", err)
		return 3
	}
	switch mode {
	case "alloc":
		// Allocate and touch 200 MiB, page by page.
		buf := make([]byte, 200<<20)
		for i := 0; i < len(buf); i += 4096 {
			buf[i] = 1
		}
		fmt.Println("survived", len(buf))
		return 0
	case "ignore-term":
		time.Sleep(time.Hour)
		return 0
	}
	fmt.Fprintln(os.Stderr, "helper: unknown mode", mode)
	return 2
}

// requireCgroups skips (or under noSkip fails) the test, naming what is
// missing, unless the machine has root and the controllers.
func requireCgroups(t *testing.T, ctrls ...string) Info {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root to create cgroups")
	}
	in, err := Detect()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ctrls {
		if !in.Controllers[c] {
			skipOrFail(t, "needs the "+c+" controller: "+in.Reasons[c])
		}
	}
	return in
}

// newTestGroup creates a group and, at cleanup, destroys it and checks that
// its directories are gone.
func newTestGroup(t *testing.T, lim Limits) *Group {
	t.Helper()
	g, err := New(UniqueName(), lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Destroy(); err != nil {
			t.Errorf("Destroy: %v", err)
		}
		for _, p := range g.Paths() {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left behind: %v", p, err)
			}
		}
	})
	return g
}

// child is a process started blocked on its stdin.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *os.File // a file, not a pipe: Wait must not wait for grandchildren holding it
	done  chan error
}

func (c *child) output() string {
	b, _ := os.ReadFile(c.out.Name())
	return string(b)
}

// startBlocked starts argv (or, with argv[0] == "", the test binary in
// helper mode argv[1]) blocked on stdin and adds it to g.
func startBlocked(t *testing.T, g *Group, argv ...string) *child {
	t.Helper()
	var cmd *exec.Cmd
	if argv[0] == "" {
		exe, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command(exe)
		cmd.Env = append(os.Environ(), helperEnv+"="+argv[1])
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	c := &child{cmd: cmd, out: out, done: make(chan error, 1)}
	cmd.Stdout = out
	cmd.Stderr = out
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdin = in
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- cmd.Wait() }()
	if err := g.AddProc(cmd.Process.Pid); err != nil {
		cmd.Process.Kill()
		<-c.done
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-c.done
	})
	return c
}

func (c *child) release(t *testing.T) {
	t.Helper()
	if _, err := c.stdin.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	c.stdin.Close()
}

// wait waits for the child to end and returns how.
func (c *child) wait(t *testing.T, d time.Duration) *os.ProcessState {
	t.Helper()
	select {
	case <-c.done:
		c.done <- nil // for the cleanup
		return c.cmd.ProcessState
	case <-time.After(d):
		t.Fatalf("child %d still running after %v; output: %s", c.cmd.Process.Pid, d, c.output())
	}
	return nil
}

func killedBy(ps *os.ProcessState, sig syscall.Signal) bool {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// adoptOrphans makes the test process the subreaper of its descendants, so
// processes orphaned by a test are reparented to it and can be reaped (init
// on the CI machine does not reap), and reaps them at cleanup.
func adoptOrphans(t *testing.T) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		reapOrphans(nil, 2*time.Second)
		_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	})
}

// reapOrphans reaps the test's dead children until every pid in pids (or, if
// pids is nil, every child) is gone or d passes. Only call it once the
// exec.Cmd children of the test have been waited for.
func reapOrphans(pids []int, d time.Duration) {
	deadline := time.Now().Add(d)
	for {
		for {
			var ws unix.WaitStatus
			p, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if err != nil || p <= 0 {
				break
			}
		}
		if pids != nil && !slices.ContainsFunc(pids, alive) {
			return
		}
		if pids == nil {
			if _, err := unix.Wait4(-1, nil, unix.WNOHANG, nil); errors.Is(err, unix.ECHILD) {
				return
			}
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive is kill(pid, 0) not failing with ESRCH: zombies count as alive.
func alive(pid int) bool {
	return !errors.Is(unix.Kill(pid, 0), unix.ESRCH)
}

func readTrim(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func readInt(t *testing.T, p string) int64 {
	t.Helper()
	v, err := strconv.ParseInt(readTrim(t, p), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

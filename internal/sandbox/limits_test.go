package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proctor-sandbox/proctor/internal/cgroup"
)

// Property 6: limits are enforced and reported.
func TestLimits(t *testing.T) {
	requireRoot(t)
	cases := []struct {
		name   string
		args   []string
		limits Limits
		want   Limit
		check  func(t *testing.T, res *Result, out string)
	}{
		{"memory", []string{"alloc", "512"}, Limits{MemoryBytes: 64 << 20}, LimitMemory, func(t *testing.T, res *Result, out string) {
			if res.Signal != int(syscall.SIGKILL) || strings.Contains(out, "allocated") {
				t.Errorf("allocating 512 MiB under a 64 MiB limit: signal %d, output %q; want an OOM kill", res.Signal, out)
			}
		}},
		{"pids", []string{"forks", "200"}, Limits{Pids: 16}, LimitPids, func(t *testing.T, res *Result, out string) {
			if !strings.Contains(out, "started") || strings.Contains(out, "started 200") {
				t.Errorf("200 forks under a 16-process limit: %q", out)
			}
		}},
		{"output", []string{"spew", "10000000"}, Limits{OutputBytes: 100000}, LimitOutput, func(t *testing.T, res *Result, out string) {
			if len(out) != 100000 || res.OutputBytes != 100000 {
				t.Errorf("kept %d bytes of output (counted %d), want exactly the 100000-byte cap", len(out), res.OutputBytes)
			}
			if res.Signal != int(syscall.SIGKILL) {
				t.Errorf("signal %d, want the tree killed", res.Signal)
			}
		}},
		{"timeout", []string{"daemon", "x", "wait"}, Limits{Timeout: 500 * time.Millisecond}, LimitTimeout, func(t *testing.T, res *Result, out string) {
			if !res.TimedOut || res.Signal != int(syscall.SIGKILL) || res.ExitCode != 137 {
				t.Errorf("result %+v, want timed out, killed", res)
			}
			if res.WallMS > 5000 {
				t.Errorf("wall %d ms for a 500 ms deadline", res.WallMS)
			}
		}},
		{"none", []string{"exit", "3"}, Limits{MemoryBytes: 64 << 20, Pids: 64, CPUs: 1}, LimitNone, func(t *testing.T, res *Result, out string) {
			if res.ExitCode != 3 || res.Signal != 0 || res.Cgroup == "" {
				t.Errorf("result %+v, want exit 3 in a cgroup", res)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := attackSpec(t, tc.args...)
			spec.Limits = tc.limits
			if spec.Limits.Timeout == 0 {
				spec.Limits.Timeout = time.Minute
			}
			res, out, _ := runSpec(t, spec)
			if res.Limit != tc.want {
				t.Errorf("limit = %q, want %q (result %+v)", res.Limit, tc.want, res)
			}
			tc.check(t, res, out)
			if len(res.Degraded) != 0 {
				t.Errorf("degraded = %v without AllowDegraded", res.Degraded)
			}
		})
	}
}

// Property 6: the CPU quota holds the tree to its share.
func TestCPULimit(t *testing.T) {
	requireRoot(t)
	spec := attackSpec(t, "spin", "2s")
	spec.Limits.CPUs = 0.25
	res, _, _ := runSpec(t, spec)
	used := res.UserMS + res.SysMS
	if used > 1000 { // 0.25 CPU over 2 s is 500 ms; unlimited would be ~2000 ms
		t.Errorf("used %d ms of CPU in %d ms under a 0.25-CPU quota", used, res.WallMS)
	}
}

// Property 8 for limits: a limit that cannot be applied fails the run unless
// AllowDegraded, which names it.
func TestMissingControllerFailsClosed(t *testing.T) {
	requireRoot(t)
	orig := newGroup
	t.Cleanup(func() { newGroup = orig })
	newGroup = func(name string, lim cgroup.Limits) (*cgroup.Group, error) {
		if lim.MemoryBytes > 0 {
			return nil, &cgroup.MissingControllersError{Controllers: []string{"memory"}}
		}
		return orig(name, lim)
	}
	spec := Spec{Rootfs: RootfsHost, Args: []string{"true"}, Limits: Limits{MemoryBytes: 64 << 20, Pids: 32}}
	_, err := Run(context.Background(), spec)
	var se *SetupError
	if !errors.As(err, &se) {
		t.Fatalf("Run without the memory controller = %v, want a *SetupError", err)
	}
	spec.AllowDegraded = true
	res, err := Run(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Degraded) != 1 || res.Degraded[0] != "memory-limit" || res.Cgroup == "" {
		t.Errorf("degraded run: %+v, want memory-limit named and pids still applied", res)
	}
}

// Property 7: when the command ends, nothing of the tree survives, even
// processes that set up their own session, double-forked and ignore SIGTERM;
// nothing is left on the host.
func TestTreeDiesWithCommand(t *testing.T) {
	requireRoot(t)
	token := randomToken(t)
	mountsBefore := countMounts(t)
	spec := attackSpec(t, "daemon", token)
	spec.Limits.Pids = 64 // a cgroup too, to check it goes away
	res, out, _ := runSpec(t, spec)
	if res.ExitCode != 0 || !strings.Contains(out, "daemon started") {
		t.Fatalf("attacker: %+v %q", res, out)
	}
	if pids := processesWith(t, token); len(pids) != 0 {
		t.Errorf("processes of the sandbox still alive after it ended: %v", pids)
	}
	if n := countMounts(t); n != mountsBefore {
		t.Errorf("host mounts went from %d to %d", mountsBefore, n)
	}
	assertNoCgroups(t, os.Getpid())
}

// Property 7: at the deadline, the whole tree dies.
func TestTreeDiesAtDeadline(t *testing.T) {
	requireRoot(t)
	token := randomToken(t)
	spec := attackSpec(t, "daemon", token, "wait")
	spec.Limits.Timeout = time.Second
	res, _, _ := runSpec(t, spec)
	if !res.TimedOut {
		t.Fatalf("result %+v: want timed out", res)
	}
	if pids := processesWith(t, token); len(pids) != 0 {
		t.Errorf("processes alive after the deadline: %v", pids)
	}
}

// supervisorCommand makes the test binary a supervisor running one sandbox,
// so a test can SIGKILL it.
const supervisorCommand = "__supervisor"

func supervisorMain(args []string) int {
	self, _ := os.Executable()
	_, err := Run(context.Background(), Spec{
		Rootfs: RootfsHost,
		Binds:  []Bind{{Src: self, Dst: attackerPath}},
		Args:   []string{attackerPath, attackCommand, "daemon", args[0], "wait"},
		Limits: Limits{Pids: 64},
		Stdout: os.Stdout,
	})
	if err != nil {
		return 1
	}
	return 0
}

// Property 7: if the supervisor is SIGKILLed, the sandbox dies with it.
func TestTreeDiesWithSupervisor(t *testing.T) {
	requireRoot(t)
	token := randomToken(t)
	self, _ := os.Executable()
	sup := exec.Command(self, supervisorCommand, token)
	stdout, err := sup.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := stdout.Read(buf)
	if !strings.Contains(string(buf[:n]), "daemon started") {
		sup.Process.Kill()
		t.Fatalf("supervisor said %q", buf[:n])
	}
	if len(processesWith(t, token)) == 0 {
		t.Fatal("control: the daemon is not visible from the host, so this test would prove nothing")
	}
	sup.Process.Kill()
	sup.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for len(processesWith(t, token)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox processes survive their supervisor: %v", processesWith(t, token))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Its cgroup is left; a later run cleans stale ones once the last
	// process in it is gone.
	deadline = time.Now().Add(5 * time.Second)
	for {
		if _, err := cgroup.CleanStale(); err != nil {
			t.Fatal(err)
		}
		if len(cgroupsOf(sup.Process.Pid)) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	assertNoCgroups(t, sup.Process.Pid)
}

func randomToken(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "tok" + hex.EncodeToString(b)
}

// processesWith lists host pids whose command line contains token.
func processesWith(t *testing.T, token string) []string {
	t.Helper()
	des, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, de := range des {
		b, err := os.ReadFile(filepath.Join("/proc", de.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(b), token) && !strings.Contains(string(b), supervisorCommand) {
			pids = append(pids, de.Name())
		}
	}
	return pids
}

// countMounts counts the host's mounts, but for those other test packages
// running at the same time make on purpose (go test runs packages in
// parallel): trial scratch space and mounts in test temp dirs. A sandbox
// leaking a mount would show elsewhere (its root is attached at /tmp, with
// /tmp/proc, /tmp/dev, … below).
func countMounts(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	tmp := filepath.Clean(os.TempDir())
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) < 5 {
			continue
		}
		mp := f[4]
		// Trial scratch space (wherever TMPDIR points: testscript moves it)
		// and mounts in other packages' test temp dirs.
		if strings.Contains(mp, "/proctor-scratch-") {
			continue
		}
		if rel, ok := strings.CutPrefix(mp, tmp+"/"); ok && strings.HasPrefix(rel, "Test") {
			continue
		}
		n++
	}
	return n
}

// cgroupsOf lists the cgroups made by supervisor pid.
func cgroupsOf(pid int) []string {
	var left []string
	prefix := fmt.Sprintf("proctor-%d-", pid)
	filepath.WalkDir("/sys/fs/cgroup", func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.HasPrefix(d.Name(), prefix) {
			left = append(left, p)
		}
		return nil
	})
	return left
}

// assertNoCgroups checks that no cgroup made by supervisor pid is left.
func assertNoCgroups(t *testing.T, pid int) {
	t.Helper()
	if left := cgroupsOf(pid); len(left) > 0 {
		t.Errorf("cgroups left on the host: %v", left)
	}
}

// The caller can stop a run at any time: the tree dies, and Run says so.
func TestContextStopsRun(t *testing.T) {
	requireRoot(t)
	token := randomToken(t)
	spec := attackSpec(t, "daemon", token, "wait")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := Run(ctx, spec)
	if !errors.Is(err, context.DeadlineExceeded) || res == nil || res.Signal != int(syscall.SIGKILL) {
		t.Fatalf("Run = %+v, %v; want a killed result and the context's error", res, err)
	}
	if pids := processesWith(t, token); len(pids) != 0 {
		t.Errorf("processes alive after the context ended: %v", pids)
	}
}

// Output held open past the end of every process (a socket loop) does not
// hold the run open, and a deadline that passes later is not the run's.
func TestHeldOutputDoesNotHoldTheRun(t *testing.T) {
	requireRoot(t)
	spec := attackSpec(t, "fdloop")
	spec.Limits.Timeout = 3 * time.Second
	start := time.Now()
	res, out, _ := runSpec(t, spec)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the run took %v: it waited for output no process could write", d)
	}
	if res.ExitCode != 0 || res.TimedOut || res.Limit != LimitNone || !strings.Contains(out, "looped") {
		t.Errorf("result %+v, output %q; want a clean exit 0", res, out)
	}
}

// A supervisor that runs many sandboxes keeps no descriptor of finished ones.
func TestNoDescriptorLeak(t *testing.T) {
	requireRoot(t)
	count := func() int {
		des, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(des)
	}
	run := func() {
		spec := Spec{Rootfs: RootfsHost, Args: []string{"true"}, Limits: Limits{Pids: 32, Timeout: time.Minute}}
		if res, err := Run(context.Background(), spec); err != nil || res.ExitCode != 0 {
			t.Fatalf("Run: %+v %v", res, err)
		}
	}
	run() // warm up: the runtime opens what it keeps open
	time.Sleep(50 * time.Millisecond)
	before := count()
	for i := 0; i < 20; i++ {
		run()
	}
	// Init's reapers finish in the background: give them time.
	deadline := time.Now().Add(3 * time.Second)
	after := count()
	for after > before+2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		after = count()
	}
	if after > before+2 {
		t.Errorf("open descriptors went from %d to %d over 20 runs", before, after)
	}
}

package seccomp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel tests re-execute the test binary as a child that runs only
// TestHelperProcess, with helperEnv naming what it should do. A filter
// cannot be removed, so it is only ever installed in such a child.
//
//	parent (TestInstall...)               child (TestHelperProcess)
//	  |--- exec, helperEnv=mode ------------->|
//	  |                                       | LockOSThread
//	  |                                       | [filter modes] prctl(NO_NEW_PRIVS), Install
//	  |                                       | run probes
//	  |<-- stdout: "probe <name> <result>" ---|
//	  |<-- exit status / signal --------------|
//	  | compare with the expected results
const helperEnv = "PROCTOR_SECCOMP_HELPER"

// Helper modes.
const (
	modeControl = "probe-control" // run the probes without a filter
	modeFilter  = "probe-filter"  // install the filter, then run the probes
	modeX32     = "x32"           // install, then make an x32 system call
	modeNoNNP   = "no-nnp"        // call Install without no_new_privs
	modeExit0   = "exit0"         // exit at once (a program for exec probes)
)

// requireSeccompFilter skips the test unless the kernel offers the
// seccomp filter actions the policy uses and the arch is supported.
func requireSeccompFilter(t *testing.T) {
	t.Helper()
	if _, err := Program(); errors.Is(err, ErrUnsupportedArch) {
		t.Skipf("seccomp filter: no syscall table for %s", runtime.GOARCH)
	}
	b, err := os.ReadFile("/proc/sys/kernel/seccomp/actions_avail")
	if err != nil {
		t.Skipf("seccomp filter: kernel has no seccomp filter support (%v)", err)
	}
	have := strings.Fields(string(b))
	for _, need := range []string{"kill_process", "errno", "allow"} {
		found := false
		for _, h := range have {
			found = found || h == need
		}
		if !found {
			t.Skipf("seccomp filter: kernel lacks the %s action", need)
		}
	}
}

// runHelper runs the test binary as a helper child in mode and returns
// its stdout and its wait error.
func runHelper(t *testing.T, mode string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if stderr.Len() > 0 {
		t.Logf("%s child stderr:\n%s", mode, stderr.String())
	}
	return stdout.String(), err
}

// probeResults parses the "probe <name> <result>" lines of a child.
func probeResults(t *testing.T, mode, out string, err error) map[string]string {
	t.Helper()
	if err != nil {
		t.Fatalf("%s child failed: %v\nstdout:\n%s", mode, err, out)
	}
	res := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 3 && f[0] == "probe" {
			res[f[1]] = strings.Join(f[2:], " ")
		}
	}
	if res["done"] != "ok" {
		t.Fatalf("%s child did not finish its probes; stdout:\n%s", mode, out)
	}
	return res
}

// How the result without the filter must relate to the result with it.
type controlRule int

const (
	differs   controlRule = iota // the filter causes the result
	same                         // the filter leaves the call alone
	anyResult                    // the kernel alone may give the same answer
)

func TestInstallEnforcesPolicy(t *testing.T) {
	requireSeccompFilter(t)

	out, err := runHelper(t, modeFilter)
	filtered := probeResults(t, modeFilter, out, err)
	out, err = runHelper(t, modeControl)
	control := probeResults(t, modeControl, out, err)
	hostFiltered := hostHasSeccomp(t)

	for _, c := range []struct {
		probe   string
		want    string
		control controlRule
	}{
		{"getpid", "ok", same},
		{"threads", "ok", same},
		{"exec", "ok", same},
		{"personality", "ok", same},
		{"socket_inet", "ok", same},
		{"socketpair_unix", "ok", same},
		{"ioctl_tcgets", "ENOTTY", same},
		{"tsync", "ok", differs},
		{"unshare_newuser", "EPERM", differs},
		{"unshare_newuts", "EPERM", differs},
		{"setns", "EPERM", differs},
		{"mount", "EPERM", differs},
		{"bpf", "EPERM", differs},
		{"perf_event_open", "EPERM", differs},
		{"io_uring_setup", "EPERM", differs},
		{"keyctl", "EPERM", differs},
		{"exec_newns", "EPERM", differs},
		{"exec_newcgroup", "EPERM", differs},
		{"exec_newuts", "EPERM", differs},
		{"exec_newipc", "EPERM", differs},
		{"exec_newuser", "EPERM", differs},
		{"exec_newpid", "EPERM", differs},
		{"exec_newnet", "EPERM", differs},
		{"clone3", "ENOSYS", differs},
		{"socket_vsock", "EPERM", differs},
		{"socket_vsock_high_word", "EPERM", differs},
		{"socket_alg", "EPERM", differs},
		{"socketpair_vsock", "EPERM", differs},
		{"ioctl_tiocsti", "EPERM", differs},
		{"ioctl_tiocsti_high_word", "EPERM", differs},
		{"ioctl_tioclinux", "EPERM", differs},
		{"nr_470", "ENOSYS", anyResult},
	} {
		t.Run(c.probe, func(t *testing.T) {
			got, ok := filtered[c.probe]
			if !ok {
				t.Fatalf("child did not report this probe")
			}
			if got != c.want {
				t.Errorf("with filter: %s, want %s", got, c.want)
			}
			ctl := control[c.probe]
			switch c.control {
			case same:
				if ctl != got {
					t.Errorf("without filter %s, with filter %s: the filter must not change this call", ctl, got)
				}
			case differs:
				if ctl == c.want {
					msg := fmt.Sprintf("without filter the result is also %s: this probe cannot tell the filter worked", ctl)
					if hostFiltered {
						// A seccomp policy around the tests (a container
						// runtime's, say) can refuse the call on its own.
						t.Logf("%s (the host already applies a seccomp filter)", msg)
					} else {
						t.Error(msg)
					}
				}
			}
			t.Logf("with filter %s, without %s", got, ctl)
		})
	}
}

func TestInstallKillsX32(t *testing.T) {
	requireSeccompFilter(t)
	if runtime.GOARCH != "amd64" {
		t.Skipf("x32 ABI: exists only on amd64, not %s", runtime.GOARCH)
	}
	out, err := runHelper(t, modeX32)
	if !strings.Contains(out, "installed") {
		t.Fatalf("child did not install the filter: %v\nstdout:\n%s", err, out)
	}
	if strings.Contains(out, "survived") {
		t.Fatalf("x32 system call returned instead of killing the process:\n%s", out)
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Fatalf("child: %v, want death by SIGSYS", err)
	}
	ws, ok := exitErr.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGSYS {
		t.Fatalf("child ended with %v, want death by SIGSYS", exitErr)
	}
}

func TestInstallRequiresNoNewPrivs(t *testing.T) {
	requireSeccompFilter(t)
	if nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || nnp == 1 {
		t.Skipf("no_new_privs unset: the test process already has it set (or cannot read it: %v)", err)
	}
	out, err := runHelper(t, modeNoNNP)
	if err != nil {
		t.Fatalf("child failed: %v\nstdout:\n%s", err, out)
	}
	if !strings.Contains(out, "refused ErrNoNewPrivs") {
		t.Fatalf("Install without no_new_privs was not refused; stdout:\n%s", out)
	}
}

func TestInstallRejectsInvalidProgram(t *testing.T) {
	// Both are refused before any system call, so this is safe to run in
	// the test process itself.
	for _, c := range []struct {
		name string
		prog []unix.SockFilter
	}{
		{"nil", nil},
		{"empty", []unix.SockFilter{}},
		{"too long", make([]unix.SockFilter, 4097)},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := Install(c.prog); !errors.Is(err, ErrInvalidProgram) {
				t.Errorf("Install: %v, want ErrInvalidProgram", err)
			}
		})
	}
}

// hostHasSeccomp reports whether this test process already runs under a
// seccomp filter.
func hostHasSeccomp(t *testing.T) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatalf("reading own status: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Seccomp:"); ok {
			return strings.TrimSpace(v) != "0"
		}
	}
	return false
}

// TestHelperProcess is not a test: it is the child the kernel tests run.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper child for the kernel tests; runs only when they start it")
	}
	runtime.LockOSThread()
	switch mode {
	case modeExit0:
		os.Exit(0)
	case modeNoNNP:
		prog, err := Program()
		if err != nil {
			fail("Program: %v", err)
		}
		if err := Install(prog); errors.Is(err, ErrNoNewPrivs) {
			fmt.Println("refused ErrNoNewPrivs")
		} else {
			fmt.Printf("not refused: %v\n", err)
		}
	case modeX32:
		installForTest()
		fmt.Println("installed")
		r, _, errno := unix.Syscall(unix.SYS_GETPID|x32SyscallBit, 0, 0, 0)
		fmt.Printf("survived r=%d errno=%v\n", r, errno)
	case modeFilter:
		installForTest()
		runProbes()
	case modeControl:
		runProbes()
	default:
		fail("unknown mode %q", mode)
	}
	os.Exit(0)
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(2)
}

func installForTest() {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail("prctl(PR_SET_NO_NEW_PRIVS): %v", err)
	}
	prog, err := Program()
	if err != nil {
		fail("Program: %v", err)
	}
	if err := Install(prog); err != nil {
		fail("Install: %v", err)
	}
}

// runProbes makes each probe's system calls and prints one line per probe:
// "ok", the errno name, or "error: ..." for anything else.
func runProbes() {
	devNull, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		fail("opening /dev/null: %v", err)
	}
	errnoOf := func(_ uintptr, _ uintptr, e unix.Errno) error {
		if e != 0 {
			return e
		}
		return nil
	}
	closing := func(fd int, err error) error {
		if err == nil {
			unix.Close(fd)
		}
		return err
	}
	rawClosing := func(r uintptr, _ uintptr, e unix.Errno) error {
		if e != 0 {
			return e
		}
		unix.Close(int(r))
		return nil
	}
	execWith := func(flags uintptr) func() error {
		return func() error {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), helperEnv+"="+modeExit0)
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
			return cmd.Run()
		}
	}
	var tiocsti byte = 'x'

	probes := []struct {
		name string
		run  func() error
	}{
		{"getpid", func() error {
			if pid := unix.Getpid(); pid != os.Getpid() {
				return fmt.Errorf("getpid %d, os.Getpid %d", pid, os.Getpid())
			}
			return nil
		}},
		{"threads", newThreads},
		{"tsync", allThreadsFiltered},
		{"exec", execWith(0)},
		{"personality", func() error { return errnoOf(unix.Syscall(unix.SYS_PERSONALITY, 0xffffffff, 0, 0)) }},
		{"socket_inet", func() error { return closing(unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)) }},
		{"socketpair_unix", func() error {
			fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
			if err == nil {
				unix.Close(fds[0])
				unix.Close(fds[1])
			}
			return err
		}},
		{"ioctl_tcgets", func() error {
			_, err := unix.IoctlGetTermios(devNull, unix.TCGETS)
			return err
		}},
		{"unshare_newuser", func() error { return unix.Unshare(unix.CLONE_NEWUSER) }},
		{"unshare_newuts", func() error { return unix.Unshare(unix.CLONE_NEWUTS) }},
		{"setns", func() error { return unix.Setns(-1, 0) }},
		{"mount", func() error {
			return unix.Mount("none", "/nonexistent-proctor-seccomp", "tmpfs", 0, "")
		}},
		{"bpf", func() error { return errnoOf(unix.Syscall(unix.SYS_BPF, 0xffff, 0, 0)) }},
		{"perf_event_open", func() error {
			return errnoOf(unix.Syscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0, 0))
		}},
		{"io_uring_setup", func() error {
			var params [120]byte // struct io_uring_params, zeroed
			return rawClosing(unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0))
		}},
		{"keyctl", func() error {
			_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
			return err
		}},
		{"exec_newns", execWith(unix.CLONE_NEWNS)},
		{"exec_newcgroup", execWith(unix.CLONE_NEWCGROUP)},
		{"exec_newuts", execWith(unix.CLONE_NEWUTS)},
		{"exec_newipc", execWith(unix.CLONE_NEWIPC)},
		{"exec_newuser", execWith(unix.CLONE_NEWUSER)},
		{"exec_newpid", execWith(unix.CLONE_NEWPID)},
		{"exec_newnet", execWith(unix.CLONE_NEWNET)},
		{"clone3", func() error {
			// A NULL, zero-sized clone_args: the kernel alone says EINVAL
			// without creating anything.
			return errnoOf(unix.Syscall(unix.SYS_CLONE3, 0, 0, 0))
		}},
		{"socket_vsock", func() error { return closing(unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM, 0)) }},
		{"socket_vsock_high_word", func() error {
			return rawClosing(unix.Syscall(unix.SYS_SOCKET, 1<<32|unix.AF_VSOCK, unix.SOCK_STREAM, 0))
		}},
		{"socket_alg", func() error { return closing(unix.Socket(unix.AF_ALG, unix.SOCK_SEQPACKET, 0)) }},
		{"socketpair_vsock", func() error {
			fds, err := unix.Socketpair(unix.AF_VSOCK, unix.SOCK_STREAM, 0)
			if err == nil {
				unix.Close(fds[0])
				unix.Close(fds[1])
			}
			return err
		}},
		{"ioctl_tiocsti", func() error {
			return errnoOf(unix.Syscall(unix.SYS_IOCTL, uintptr(devNull), unix.TIOCSTI, uintptr(unsafe.Pointer(&tiocsti))))
		}},
		{"ioctl_tiocsti_high_word", func() error {
			return errnoOf(unix.Syscall(unix.SYS_IOCTL, uintptr(devNull), 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&tiocsti))))
		}},
		{"ioctl_tioclinux", func() error {
			return errnoOf(unix.Syscall(unix.SYS_IOCTL, uintptr(devNull), unix.TIOCLINUX, uintptr(unsafe.Pointer(&tiocsti))))
		}},
		{"nr_470", func() error { return errnoOf(unix.Syscall(470, 0, 0, 0)) }},
	}
	for _, p := range probes {
		fmt.Printf("probe %s %s\n", p.name, describe(p.run()))
	}
	fmt.Println("probe done ok")
}

func describe(err error) string {
	if err == nil {
		return "ok"
	}
	var errno unix.Errno
	if errors.As(err, &errno) {
		if name := unix.ErrnoName(errno); name != "" {
			return name
		}
		return fmt.Sprintf("errno-%d", int(errno))
	}
	return "error: " + err.Error()
}

// newThreads makes the runtime start fresh OS threads (clone with
// CLONE_THREAD) by locking several goroutines to threads at once.
func newThreads() error {
	const n = 8
	tids := make([]int, n)
	var started, release sync.WaitGroup
	started.Add(n)
	release.Add(1)
	var done sync.WaitGroup
	for i := range n {
		done.Add(1)
		go func() {
			defer done.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tids[i] = unix.Gettid()
			started.Done()
			release.Wait()
		}()
	}
	started.Wait()
	release.Done()
	done.Wait()
	seen := map[int]bool{}
	for _, tid := range tids {
		seen[tid] = true
	}
	if len(seen) != n {
		return fmt.Errorf("%d goroutines locked to %d threads", n, len(seen))
	}
	return nil
}

// allThreadsFiltered checks that every thread of the process runs in
// seccomp filter mode (2), which TSYNC guarantees.
func allThreadsFiltered() error {
	status, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(status) == 0 {
		return fmt.Errorf("listing threads: %v", err)
	}
	for _, s := range status {
		b, err := os.ReadFile(s)
		if err != nil {
			return err
		}
		if !bytes.Contains(b, []byte("\nSeccomp:\t2\n")) {
			return fmt.Errorf("%s: not in seccomp filter mode", filepath.Base(filepath.Dir(s)))
		}
	}
	return nil
}

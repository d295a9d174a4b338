package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/seccomp"
)

// RunInit is the sandbox's init: pid 1 of the new pid namespace. args are the
// arguments after InitCommand. It returns the process exit code: 0 when it
// reported the command's end, 125 when setup failed (after reporting why).
func RunInit(args []string) int {
	// Credentials, no_new_privs and the filter are set on this thread and the
	// command is forked from it: never unlock.
	runtime.LockOSThread()
	if len(args) == 1 && args[0] == holdArg {
		return runHold()
	}

	specFD, statusFD, err := parseInitArgs(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "proctor: error: %s: %v\n", InitCommand, err)
		return 125
	}
	// Whatever the caller's caller left inheritable must not reach the
	// command: mark every descriptor above stderr close-on-exec.
	if err := unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC); err != nil {
		fmt.Fprintf(os.Stderr, "proctor: error: %s: close_range: %v\n", InitCommand, err)
		return 125
	}
	out := json.NewEncoder(os.NewFile(uintptr(statusFD), "status"))
	// The same file modes in every run, whatever the caller's umask.
	unix.Umask(0o022)

	fail := func(err error) int {
		st := status{Phase: "error", Error: err.Error()}
		var se *SetupError
		if errors.As(err, &se) {
			st.Step, st.Error, st.Hint = se.Step, se.Err.Error(), se.Hint
		}
		_ = out.Encode(st)
		return 125
	}

	var spec initSpec
	specFile := os.NewFile(uintptr(specFD), "spec")
	dec := json.NewDecoder(specFile)
	if err := dec.Decode(&spec); err != nil {
		return fail(&SetupError{Step: "reading the sandbox spec", Err: err})
	}
	// What follows the spec on its pipe: the go-ahead after placement.
	fromHost := io.MultiReader(dec.Buffered(), specFile)

	path, code, h, err := setupInit(&spec)
	if err != nil {
		return fail(err)
	}
	if code != 0 {
		// The command could not be found or run: report it like a shell.
		_ = out.Encode(status{Phase: "exited", ExitCode: code})
		return 0
	}
	if spec.WatchFiles {
		// The files filter notifies the command's own exec: the host must
		// hold the listener before the fork, or the exec waits for ever.
		if err := out.Encode(status{Phase: "watching", NotifyFD: h.notify}); err != nil {
			return fail(&SetupError{Step: "handing over the files watch", Err: err})
		}
		var b [2]byte // the newline ending the spec, then the go-ahead
		if _, err := io.ReadFull(fromHost, b[:]); err != nil || b[1] != goAhead {
			return fail(&SetupError{Step: "waiting for the host", Err: fmt.Errorf("no go-ahead from the host (%v)", err)})
		}
		// The host holds the watch now; the listeners, if any, are handed
		// over when the command is placed.
		if h.notifyFile != nil {
			h.notifyFile.Close()
		}
		h.notify, h.notifyFile, h.spent = -1, nil, true
	}

	// The command stops at its first instruction (a ptrace stop at exec)
	// until init is deaf to its signals and, with limits, until the host has
	// put it in its cgroup: the limits then cover the command's whole tree
	// and nothing of init.
	sys := &syscall.SysProcAttr{Setsid: true, Ptrace: true}
	if u := spec.User; u != nil {
		// Changing from uid 0 clears the command's capabilities.
		// Init's own supplementary groups are none: kept when none are asked for.
		sys.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups, NoSetGroups: len(u.Groups) == 0}
	}
	pid, err := syscall.ForkExec(path, spec.Args, &syscall.ProcAttr{
		Env:   spec.Env,
		Files: []uintptr{0, 1, 2},
		Sys:   sys,
	})
	if err != nil {
		code := 126
		if errors.Is(err, unix.ENOENT) {
			code = 127
		}
		fmt.Fprintf(os.Stderr, "proctor: error: cannot run %s: %v\n", spec.Args[0], err)
		_ = out.Encode(status{Phase: "exited", ExitCode: code})
		return 0
	}
	if err := release(pid, spec.PlaceCommand, &h, out, fromHost); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return fail(err)
	}
	st := reap(pid)
	// Everything else is dead and reaped: let the host's copiers see the end
	// of output now, without waiting for this process to be torn down.
	for fd := 0; fd <= 2; fd++ {
		unix.Close(fd)
	}
	_ = out.Encode(st)
	return 0
}

// release waits for the command's exec stop, makes init deaf to signals,
// waits for the host if it has something to do first (place the command in
// its cgroup, take the listeners), reports the start and lets the command
// run.
func release(pid int, place bool, h *handoff, out *json.Encoder, fromHost io.Reader) error {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, syscall.WALL, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return &SetupError{Step: "waiting for the command to start", Err: err}
		}
		break
	}
	if !ws.Stopped() || ws.StopSignal() != syscall.SIGTRAP {
		return &SetupError{Step: "waiting for the command to start", Err: fmt.Errorf("unexpected wait status %#x", ws)}
	}
	ignoreSignals()
	if place || h.any() {
		msg := status{Phase: "placing", ListenFDs: h.listen, NotifyFD: h.notify}
		if err := out.Encode(msg); err != nil {
			return &SetupError{Step: "asking the host to place the command", Err: err}
		}
		var b [2]byte // the newline ending the spec (unless spent), then the go-ahead
		want := b[:]
		if h.spent {
			want = b[1:]
		}
		if _, err := io.ReadFull(fromHost, want); err != nil || b[1] != goAhead {
			return &SetupError{Step: "waiting for the host", Err: fmt.Errorf("no go-ahead from the host (%v)", err)}
		}
		// The host holds its copies now. Init's must go: the seccomp
		// listener fails closed (notified calls get ENOSYS) only once
		// every copy of it is closed.
		h.close()
	}
	if err := out.Encode(status{Phase: "started"}); err != nil {
		return &SetupError{Step: "reporting the start", Err: err}
	}
	if err := syscall.PtraceDetach(pid); err != nil {
		return &SetupError{Step: "releasing the command", Err: err}
	}
	return nil
}

// ignoreSignals makes init deaf to every signal the command could send it
// (pid 1 gets only signals it does not ignore; for the synchronous ones Go
// cannot ignore in the kernel, its handler drops those sent by a process).
// It runs while the command is stopped at exec: SIG_IGN is inherited across
// fork and exec, so it must come after the fork, and init forks nothing more.
// SIGCHLD stays (ignoring it would reap children behind init's back), and so
// does SIGURG, the runtime's own preemption signal.
func ignoreSignals() {
	var sigs []os.Signal
	for s := syscall.Signal(1); s <= 64; s++ {
		switch s {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG:
			continue
		}
		sigs = append(sigs, s)
	}
	signal.Ignore(sigs...)
	// The Go runtime leaves some signals it does not manage (32 and 34 on
	// linux/amd64) at SIG_DFL. For a namespace's init that is not enough:
	// the kernel drops a default-action signal sent from inside only when
	// the thread it checks does not block it; while one of init's threads
	// runs a Go signal handler (every signal blocked), a second signal is
	// queued instead, delivered to another thread, and kills init. Every
	// signal left at SIG_DFL is therefore set to SIG_IGN here, by hand.
	for s := 1; s <= 64; s++ {
		switch syscall.Signal(s) {
		case syscall.SIGKILL, syscall.SIGSTOP, syscall.SIGCHLD, syscall.SIGURG:
			continue
		}
		ignoreIfDefault(s)
	}
}

// kernelSigaction is the start of the kernel's struct sigaction, the same on
// amd64 and arm64 (handler, then flags); the rest is left zero, which the
// layouts' differing tails (restorer, mask) read alike. It is sized for the
// larger of them.
type kernelSigaction struct {
	handler uintptr
	flags   uint64
	rest    [2]uint64
}

// ignoreIfDefault sets signal s to SIG_IGN if its disposition is SIG_DFL;
// a handler the runtime installed is left alone.
func ignoreIfDefault(s int) {
	var old kernelSigaction
	if _, _, e := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(s), 0, uintptr(unsafe.Pointer(&old)), 8, 0, 0); e != 0 {
		return // not a signal this kernel knows
	}
	if old.handler != 0 { // SIG_DFL is 0
		return
	}
	act := kernelSigaction{handler: 1} // SIG_IGN
	unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(s), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
}

func parseInitArgs(args []string) (specFD, statusFD int, err error) {
	specFD, statusFD = -1, -1
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		n, convErr := strconv.Atoi(v)
		if !ok || convErr != nil || n < 3 {
			return -1, -1, fmt.Errorf("bad argument %q", a)
		}
		switch k {
		case specFDFlag:
			specFD = n
		case statusFDFlag:
			statusFD = n
		default:
			return -1, -1, fmt.Errorf("unknown argument %q", a)
		}
	}
	if specFD < 0 || statusFD < 0 {
		return -1, -1, fmt.Errorf("need %s and %s", specFDFlag, statusFDFlag)
	}
	return specFD, statusFD, nil
}

// handoff is what init hands the host by descriptor number: listeners and
// the seccomp listener (-1 when none).
type handoff struct {
	listen     []int
	notify     int
	notifyFile *os.File // kept referenced: its finalizer would close notify
	spent      bool     // the spec's newline was read by the files watch's handover
}

func (h *handoff) any() bool { return len(h.listen) > 0 || h.notify >= 0 }

// close closes init's copies once the host has taken its own.
func (h *handoff) close() {
	for _, fd := range h.listen {
		unix.Close(fd)
	}
	if h.notifyFile != nil {
		h.notifyFile.Close()
	}
}

// setupInit applies every isolation step in order. It returns the resolved
// command path, or a non-zero shell-style exit code (127 not found, 126 not
// executable) when the command cannot run, and what to hand the host.
func setupInit(spec *initSpec) (string, int, handoff, error) {
	h := handoff{notify: -1}
	path, code, err := setupInitInner(spec, &h)
	return path, code, h, err
}

func setupInitInner(spec *initSpec, h *handoff) (string, int, error) {
	b := &rootBuilder{spec: spec}
	if err := b.build(); err != nil {
		return "", 0, err
	}
	if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
		return "", 0, &SetupError{Step: "setting the hostname", Err: err}
	}
	if err := loopbackUp(); err != nil {
		return "", 0, &SetupError{Step: "bringing up lo", Err: err}
	}
	fds, err := listenInside(spec.Listen)
	if err != nil {
		return "", 0, err
	}
	h.listen = fds
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return "", 0, &SetupError{Step: "setting RLIMIT_CORE", Err: err}
	}
	if err := unix.Chdir(spec.Workdir); err != nil {
		return "", 0, &SetupError{Step: "entering workdir " + spec.Workdir, Err: err}
	}
	// Not dumpable: the command cannot open /proc/1/{exe,mem,fd} of init.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return "", 0, &SetupError{Step: "making init non-dumpable", Err: err}
	}
	path, code := lookPath(spec.Args[0], envValue(spec.Env, "PATH"))
	if spec.TestHooks == nil || !spec.TestHooks.KeepCaps {
		if err := limitCaps(capMask(commandCaps)); err != nil {
			return "", 0, &SetupError{Step: "reducing capabilities", Err: err}
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return "", 0, &SetupError{Step: "setting no_new_privs", Err: err}
	}
	prog, err := seccomp.Program()
	if err != nil {
		return "", 0, &SetupError{Step: "building the seccomp filter", Err: err}
	}
	if err := seccomp.Install(prog); err != nil {
		return "", 0, &SetupError{Step: "installing the seccomp filter", Err: err}
	}
	if spec.NoAttach {
		prog, err := seccomp.NoAttachProgram()
		if err != nil {
			return "", 0, &SetupError{Step: "building the no-attach filter", Err: err}
		}
		if err := seccomp.Install(prog); err != nil {
			return "", 0, &SetupError{Step: "installing the no-attach filter", Err: err}
		}
	}
	if spec.WatchNet || spec.WatchFiles {
		// Last, so the filters that refuse run first; this one only
		// records (seccomp takes the strictest answer of all filters).
		build := seccomp.NotifyProgram
		if spec.WatchFiles {
			build = seccomp.FilesProgram
		}
		prog, err := build()
		if err != nil {
			return "", 0, &SetupError{Step: "building the network-watch filter", Err: err}
		}
		f, err := seccomp.InstallNotify(prog)
		if err != nil {
			return "", 0, &SetupError{Step: "installing the network-watch filter", Err: err}
		}
		// The number without f.Fd(), which would make the open file (shared
		// with the host's copy) blocking, and so unpollable for the watch.
		rc, err := f.SyscallConn()
		if err == nil {
			err = rc.Control(func(fd uintptr) { h.notify = int(fd) })
		}
		if err != nil {
			f.Close()
			return "", 0, &SetupError{Step: "installing the network-watch filter", Err: err}
		}
		h.notifyFile = f // closed once the host holds its copy
	}
	switch code {
	case 127:
		fmt.Fprintf(os.Stderr, "proctor: error: %s: command not found in the sandbox\n", spec.Args[0])
	case 126:
		fmt.Fprintf(os.Stderr, "proctor: error: %s: not executable in the sandbox\n", spec.Args[0])
	}
	return path, code, nil
}

// lookPath finds name in pathEnv inside the sandbox, returning a shell-style
// code when it cannot (127 not found, 126 found but not executable).
func lookPath(name, pathEnv string) (string, int) {
	if strings.Contains(name, "/") {
		return name, 0
	}
	code := 127
	for _, dir := range filepath.SplitList(pathEnv) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		fi, err := os.Stat(p)
		if err != nil || fi.IsDir() {
			continue
		}
		if unix.Access(p, unix.X_OK) == nil {
			return p, 0
		}
		code = 126
	}
	return "", code
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// loopbackUp brings lo up in the new network namespace: the only interface.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// reap waits for every process init inherits until the command ends, then
// kills all that is left in the pid namespace and reaps it too. Resource use is
// summed (CPU) or maxed (RSS) over everything reaped.
func reap(cmd int) status {
	st := status{Phase: "exited"}
	done := false
	for {
		if done {
			// Again on every round: a process caught mid-fork by the first
			// kill can leave a child behind.
			_ = syscall.Kill(-1, syscall.SIGKILL)
		}
		var ws syscall.WaitStatus
		var ru syscall.Rusage
		pid, err := syscall.Wait4(-1, &ws, 0, &ru)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil { // ECHILD: nothing is left
			break
		}
		if ws.Stopped() {
			// A child that made init its tracer again (PTRACE_TRACEME) and
			// got a signal: not an end. Let it go with its signal.
			_, _, _ = unix.Syscall6(unix.SYS_PTRACE, unix.PTRACE_DETACH, uintptr(pid), 0, uintptr(ws.StopSignal()), 0, 0)
			continue
		}
		st.UserUS += ru.Utime.Sec*1e6 + ru.Utime.Usec
		st.SysUS += ru.Stime.Sec*1e6 + ru.Stime.Usec
		st.MaxRSSKB = max(st.MaxRSSKB, ru.Maxrss)
		if pid != cmd {
			continue
		}
		switch {
		case ws.Exited():
			st.ExitCode = ws.ExitStatus()
		case ws.Signaled():
			st.Signal = int(ws.Signal())
			st.ExitCode = 128 + st.Signal
		}
		// The command is done: nothing else may outlive it.
		done = true
	}
	return st
}

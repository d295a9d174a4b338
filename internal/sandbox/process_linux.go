package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// initProcess is a started init, owned by Run. kill is safe from any
// goroutine at any time, also after init was reaped.
type initProcess struct {
	pid   int
	pidfd int // -1 when the kernel has no pidfd_open

	killed atomic.Bool // kill signalled init before it was reaped: its death is the host's doing

	mu     sync.Mutex // guards reaped and pidfd after the start
	reaped bool

	done    chan struct{} // closed once init is reaped; then the fields below are set
	ws      syscall.WaitStatus
	rusage  syscall.Rusage
	waitErr error
}

// startInit starts init in new namespaces with files as its descriptors 0,
// 1, 2, … and returns once it runs. It is started, waited for and reaped on one
// locked OS thread: the parent-death signal fires when the thread that
// started a child exits. With timeNS, that thread first makes a time
// namespace for its children (see newTimeNS); if it cannot, res.Unpinned
// says why and init starts in the host's.
func startInit(exe string, files []*os.File, timeNS bool, res *Result) (*initProcess, error) {
	fds := make([]uintptr, len(files))
	for i, f := range files {
		fds[i] = f.Fd()
	}
	uidMap, gidMap, setgroups := idMaps()
	attr := &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{"GOGC=off"}, // init allocates little and lives briefly
		Files: fds,
		Sys: &syscall.SysProcAttr{
			// Every namespace at once, so that all of init's threads (and
			// so everything /proc/1/task/* shows) are inside them too. The
			// cgroup namespace's root is the supervisor's cgroup; with limits
			// the command is placed in its own cgroup, which the command sees
			// relative to that root.
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
				syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP,
			UidMappings:                uidMap,
			GidMappings:                gidMap,
			GidMappingsEnableSetgroups: setgroups,
			Credential:                 &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: !setgroups},
			Setsid:                     true,
			Pdeathsig:                  syscall.SIGKILL,
		},
	}
	args := []string{"proctor", InitCommand, fmt.Sprintf("%s=3", specFDFlag), fmt.Sprintf("%s=4", statusFDFlag)}

	p := &initProcess{pidfd: -1, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine, after the reap
		if timeNS {
			if err := newTimeNS(); err != nil {
				res.Unpinned = append(res.Unpinned, "time namespace: "+err.Error())
			}
		}
		pid, err := syscall.ForkExec(exe, args, attr)
		if err != nil {
			started <- err
			return
		}
		p.pid = pid
		// Not yet reaped, so the pid is still ours: a pidfd makes every
		// later kill race-free.
		if fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK); err == nil {
			p.pidfd = fd
		}
		started <- nil
		for {
			_, err := syscall.Wait4(pid, &p.ws, 0, &p.rusage)
			if !errors.Is(err, syscall.EINTR) {
				p.waitErr = err
				break
			}
		}
		p.mu.Lock()
		p.reaped = true
		if p.pidfd >= 0 {
			unix.Close(p.pidfd)
			p.pidfd = -1
		}
		p.mu.Unlock()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// kill sends SIGKILL to init; the kernel then kills every process of its pid
// namespace.
func (p *initProcess) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return // gone already; its pid may belong to someone else now
	}
	p.killed.Store(true)
	if p.pidfd >= 0 {
		_ = unix.PidfdSendSignal(p.pidfd, unix.SIGKILL, nil, 0)
	} else {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
	}
}

// stdio holds init's standard descriptors: the child's ends, handed over at
// start, and the copiers on the host's ends.
type stdio struct {
	in, out, err *os.File   // the child's ends
	readers      []*os.File // the host's ends of out and err
	copiers      sync.WaitGroup
	closeOnce    sync.Once
}

// newStdio makes init's stdin (empty, or a pipe fed from spec.Stdin, never the
// caller's own descriptor) and its stdout and stderr pipes, copied to
// spec.Stdout and spec.Stderr under out's cap.
func newStdio(spec *Spec, out *cappedOutput) (*stdio, error) {
	s := &stdio{}
	fail := func(err error) (*stdio, error) {
		s.closeChildEnds()
		return nil, &SetupError{Step: "creating the sandbox's standard streams", Err: err}
	}
	if spec.Stdin == nil {
		f, err := os.Open(os.DevNull)
		if err != nil {
			return fail(err)
		}
		s.in = f
	} else {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		s.in = r
		// The copier may outlive the run if Stdin never ends.
		go func() {
			_, _ = io.Copy(w, spec.Stdin)
			w.Close()
		}()
	}
	for _, st := range []struct {
		child *(*os.File)
		dst   io.Writer
	}{{&s.out, spec.Stdout}, {&s.err, spec.Stderr}} {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		*st.child = w
		s.readers = append(s.readers, r)
		dst := out.writer(st.dst)
		s.copiers.Add(1)
		go func() {
			defer s.copiers.Done()
			defer r.Close()
			_, _ = io.Copy(dst, r)
		}()
	}
	return s, nil
}

// closeChildEnds closes the host's copies of the child's ends, so the
// copiers see end-of-file when the sandbox is gone.
func (s *stdio) closeChildEnds() {
	s.closeOnce.Do(func() {
		for _, f := range []*os.File{s.in, s.out, s.err} {
			if f != nil {
				f.Close()
			}
		}
	})
}

// wait returns when both output streams are drained. Call it only once no
// process of the sandbox is left: what is still in the pipes is copied, but
// a read that would wait for more ends after drainGrace. A write end can
// outlive every process (passed through a unix socket that sits in its own
// queue until the kernel collects it), and must not hold the run open.
func (s *stdio) wait() {
	deadline := time.Now().Add(drainGrace)
	for _, r := range s.readers {
		_ = r.SetReadDeadline(deadline)
	}
	s.copiers.Wait()
}

// drainGrace bounds how long output is awaited once the sandbox is gone.
const drainGrace = 200 * time.Millisecond

// childrenOf lists the host pids of pid's children: from
// /proc/PID/task/*/children where the kernel has it, else by scanning /proc.
func childrenOf(pid int) ([]int, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return nil, err
	}
	var kids []int
	found := false
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		if err != nil {
			continue
		}
		found = true
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				kids = append(kids, n)
			}
		}
	}
	if found {
		return kids, nil
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, d := range procs {
		n, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		rest := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(rest) > 1 && rest[1] == strconv.Itoa(pid) {
			kids = append(kids, n)
		}
	}
	return kids, nil
}

// newTimeNS gives the calling thread's future children a new time
// namespace in which CLOCK_MONOTONIC and CLOCK_BOOTTIME (uptime) start at
// zero: the offsets are the negated whole seconds of the host's clocks now.
// The offsets can be written only before any process is in the namespace,
// so this runs on the locked thread that then forks init, which enters it
// (a clone with CLONE_NEWUSER and without CLONE_VM, as Go's ForkExec makes
// it, moves the child into the thread's namespace for children). The
// thread must never run another goroutine's fork after this: it ends with
// init's reap.
func newTimeNS() error {
	if err := unix.Unshare(unix.CLONE_NEWTIME); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	var mono, boot unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono); err != nil {
		return err
	}
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot); err != nil {
		return err
	}
	offsets := fmt.Sprintf("monotonic %d 0\nboottime %d 0\n", -mono.Sec, -boot.Sec)
	// /proc/TID, not /proc/self: the namespace for children is this
	// thread's, not the main thread's (the file is only in a pid's
	// directory, not under task/ or thread-self).
	if err := os.WriteFile("/proc/"+strconv.Itoa(unix.Gettid())+"/timens_offsets", []byte(offsets), 0); err != nil {
		return fmt.Errorf("writing the clock offsets: %w", err)
	}
	return nil
}

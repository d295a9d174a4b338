package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/cgroup"
	"github.com/proctor-sandbox/proctor/internal/seccomp"
)

// Host id range that root inside the sandbox maps to when Proctor runs as root:
// ids IDMapBase … IDMapBase+IDMapSize-1 on the host own nothing, so no host file
// is reachable through ownership.
const (
	IDMapBase = 1 << 30
	IDMapSize = 65536
)

// Run runs spec's command in a new sandbox and waits for the whole tree to end:
// when it returns, every process the command started is dead and reaped, and
// its cgroup is gone. (Init, which reaped them, may still be exiting; it is
// reaped in the background.) A *SpecError or *SetupError with a nil Result
// means the command never ran and nothing is left behind. A Result with a
// nil error describes the command's end; a Result with an error describes
// it too, but the run was stopped by ctx or its cgroup could not be removed.
func Run(ctx context.Context, spec Spec) (*Result, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	is, err := spec.initSpec()
	if err != nil {
		return nil, err
	}
	return run(ctx, &spec, is)
}

// initSpec turns a validated Spec into what init needs.
func (s *Spec) initSpec() (*initSpec, error) {
	is := &initSpec{
		Tmpfs:      s.Tmpfs,
		Masks:      slices.Clone(s.Masks),
		Workdir:    s.Workdir,
		Hostname:   s.Hostname,
		Args:       s.Args,
		NoAttach:   s.NoAttach,
		User:       s.User,
		KeepTmp:    s.KeepTmp,
		Listen:     slices.Clone(s.Listen),
		WatchNet:   s.WatchNet != nil,
		WatchFiles: s.WatchFiles != nil,
		Env:        append([]string{"PATH=" + DefaultPath, "HOME=/root"}, s.Env...),
	}
	if is.Workdir == "" {
		is.Workdir = "/"
	}
	if is.Hostname == "" {
		is.Hostname = "proctor"
	}
	if s.Rootfs == RootfsHost {
		is.Masks = append(is.Masks, HostMaskPaths()...)
	}
	return is, nil
}

// HostMaskPaths expands HostMasks on this host: the paths a view of the
// host's system directories must hide.
func HostMaskPaths() []string {
	var ps []string
	for _, m := range HostMasks {
		matches, _ := filepath.Glob(m) // the patterns are constants, known to be valid
		ps = append(ps, matches...)
	}
	return ps
}

// idMaps returns the user and group id maps for the new user namespace: a
// 65,536-id unprivileged range as root, the caller's own id otherwise.
func idMaps() (uid, gid []syscall.SysProcIDMap, setgroups bool) {
	if os.Geteuid() == 0 {
		m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: IDMapBase, Size: IDMapSize}}
		return m, m, true
	}
	return []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}},
		[]syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}, false
}

func run(ctx context.Context, spec *Spec, is *initSpec) (res *Result, err error) {
	res = &Result{Degraded: []string{}, LimitsHit: []Limit{}}

	var cg *cgroup.Group
	if l := spec.Limits; l.MemoryBytes > 0 || l.Pids > 0 || l.CPUs > 0 || spec.Pin.CPUSet != "" {
		cg, err = newCgroup(spec, res)
		if err != nil {
			return nil, err
		}
		if cg != nil {
			defer func() {
				if derr := cg.Destroy(); derr != nil && err == nil {
					err = &SetupError{Step: "removing the cgroup", Err: derr}
				}
			}()
			res.Cgroup = cg.Version().String()
		}
	}
	is.PlaceCommand = cg != nil
	if spec.WatchNet != nil || spec.WatchFiles != nil {
		if err := seccomp.CheckNotify(); err != nil {
			return nil, &SetupError{Step: "checking seccomp notification", Err: err}
		}
	}

	mounts, err := collectSources(spec, is)
	if err != nil {
		return nil, err
	}
	defer closeAll(mounts)

	// The spec goes into its pipe before init starts.
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, &SetupError{Step: "creating the spec pipe", Err: err}
	}
	defer specR.Close()
	defer specW.Close()
	specBytes, err := json.Marshal(is)
	if err != nil {
		return nil, &SetupError{Step: "encoding the spec", Err: err}
	}
	specBytes = append(specBytes, '\n')
	specSent := make(chan error, 1)
	go func() {
		_, err := specW.Write(specBytes)
		specSent <- err
	}()

	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, &SetupError{Step: "creating the status pipe", Err: err}
	}
	defer statusR.Close()
	defer statusW.Close()

	out := &cappedOutput{limit: spec.Limits.OutputBytes, over: make(chan struct{})}
	stdio, err := newStdio(spec, out)
	if err != nil {
		return nil, err
	}
	defer stdio.closeChildEnds()

	// Init gets 5+len(mounts) descriptors (stdio, two pipes, the mounts).
	files := append([]*os.File{stdio.in, stdio.out, stdio.err, specR, statusW}, mounts...)
	exe, closeExe, err := initBinary(files)
	if err != nil {
		return nil, err
	}
	defer closeExe()
	begin := time.Now()
	p, err := startInit(exe, files, spec.Pin.TimeNS, res)
	if err != nil {
		return nil, &SetupError{Step: "starting the sandbox", Err: err,
			Hint: "run `proctor probe` to see which kernel features are missing"}
	}
	go func() { // the output cap kills the tree
		select {
		case <-out.over:
			p.kill()
		case <-p.done:
		}
	}()
	stdio.closeChildEnds()
	specR.Close()
	statusW.Close()
	closeAll(mounts)

	setupDone := false
	defer func() {
		if !setupDone {
			p.kill()
			<-p.done
			stdio.wait()
		}
	}()

	// The deadline and the caller's context cover the setup too: a setup
	// that hangs is killed like a command that does.
	var timedOut atomic.Bool
	if d := spec.Limits.Timeout; d > 0 {
		t := time.AfterFunc(d, func() { timedOut.Store(true); p.kill() })
		defer t.Stop()
	}
	stopCtx := context.AfterFunc(ctx, p.kill)
	defer stopCtx()

	msgs := bufio.NewScanner(statusR)
	msgs.Buffer(make([]byte, 64<<10), 1<<20)
	// setupErr explains why init's word did not come.
	setupErr := func(err error) error {
		switch {
		case timedOut.Load():
			err = fmt.Errorf("the %v deadline passed before the command started", spec.Limits.Timeout)
		case ctx.Err() != nil:
			err = ctx.Err()
		default:
			if serr := <-specSent; serr != nil {
				err = serr
			}
		}
		return &SetupError{Step: "setting up the sandbox", Err: err}
	}
	first, err := readStatus(msgs)
	if err != nil {
		return nil, setupErr(err)
	}
	if first.Phase == "watching" {
		if spec.WatchFiles == nil {
			return nil, &SetupError{Step: "setting up the sandbox", Err: fmt.Errorf("%w: init hands over a files watch nobody asked for", ErrInitProtocol)}
		}
		stop, werr := takeWatch(p, spec, first.NotifyFD, p.kill)
		if werr != nil {
			return nil, werr
		}
		defer func() {
			if werr := stop(); werr != nil && err == nil {
				res, err = nil, &SetupError{Step: "watching files", Err: werr}
			}
		}()
		if _, err := specW.Write([]byte{goAhead}); err != nil {
			return nil, &SetupError{Step: "starting the files watch", Err: err}
		}
		if first, err = readStatus(msgs); err != nil {
			return nil, setupErr(err)
		}
	} else if spec.WatchFiles != nil && first.Phase != "error" && first.Phase != "exited" {
		return nil, &SetupError{Step: "setting up the sandbox", Err: fmt.Errorf("%w: init did not hand over the files watch", ErrInitProtocol)}
	}
	switch first.Phase {
	case "error":
		return nil, &SetupError{Step: first.Step, Err: errors.New(first.Error), Hint: first.Hint}
	case "started":
		if len(spec.Listen) > 0 || spec.WatchNet != nil {
			return nil, &SetupError{Step: "setting up the sandbox", Err: fmt.Errorf("%w: init started the command without handing over its listeners", ErrInitProtocol)}
		}
	case "exited":
	case "placing":
		if cg == nil && len(spec.Listen) == 0 && spec.WatchNet == nil {
			return nil, &SetupError{Step: "setting up the sandbox", Err: fmt.Errorf("%w: init waits for the host with nothing to do", ErrInitProtocol)}
		}
	default:
		return nil, &SetupError{Step: "setting up the sandbox", Err: fmt.Errorf("%w: unexpected phase %q", ErrInitProtocol, first.Phase)}
	}
	if first.Phase == "placing" && (len(spec.Listen) > 0 || spec.WatchNet != nil) {
		stop, herr := takeHandoff(p, spec, first, p.kill)
		if herr != nil {
			return nil, herr
		}
		defer func() {
			if werr := stop(); werr != nil && err == nil {
				res, err = nil, &SetupError{Step: "watching the network", Err: werr}
			}
		}()
	}
	if first.Phase == "placing" {
		if cg != nil {
			if err := placeCommand(p.pid, cg); err != nil {
				return nil, err
			}
		}
		if _, err := specW.Write([]byte{goAhead}); err != nil {
			return nil, &SetupError{Step: "releasing the command", Err: err}
		}
		if first, err = readStatus(msgs); err != nil {
			return nil, setupErr(err)
		}
		switch first.Phase {
		case "error":
			return nil, &SetupError{Step: first.Step, Err: errors.New(first.Error), Hint: first.Hint}
		case "started", "exited":
		default:
			return nil, &SetupError{Step: "setting up the sandbox", Err: fmt.Errorf("%w: unexpected phase %q after placing", ErrInitProtocol, first.Phase)}
		}
	}
	setupDone = true

	final := first
	if first.Phase == "started" {
		final, err = readStatus(msgs)
		if err != nil {
			final = nil // init was killed: timeout, output cap, or the caller
		}
	}
	// A deadline that passes after the command ended is not the run's.
	timeout := timedOut.Load()
	if final == nil {
		<-p.done // the tree died with init: wait until all of it is gone
	}
	// Otherwise init reported every other process dead and reaped; its own
	// teardown goes on in the background (startInit's goroutine reaps it).
	stdio.wait()
	res.WallMS = time.Since(begin).Milliseconds()
	// Nothing of the sandbox runs any more: take back any set-id program it
	// left in a writable bind.
	if os.Geteuid() == 0 {
		for _, b := range spec.Binds {
			if !b.Writable {
				continue
			}
			if err := scrubSetID(b.Src); err != nil {
				return nil, &SetupError{Step: "clearing set-id bits in " + b.Src, Err: err}
			}
		}
	}
	res.OutputBytes = out.total.Load()
	if out.limit > 0 {
		res.OutputBytes = min(res.OutputBytes, out.limit)
	}

	if final != nil {
		res.ExitCode, res.Signal = final.ExitCode, final.Signal
		res.UserMS, res.SysMS = final.UserUS/1000, final.SysUS/1000
		res.MaxRSSBytes = final.MaxRSSKB * 1024
	} else {
		if p.waitErr != nil {
			return nil, fmt.Errorf("waiting for the sandbox: %w", p.waitErr)
		}
		if !p.killed.Load() {
			// Nothing of ours killed init: it crashed, or something got
			// past the guards. The command's end is unknown.
			return nil, fmt.Errorf("%w: the sandbox's init died on its own (wait status %#x) before reporting the command's end; the run is void", ErrInitProtocol, uint32(p.ws))
		}
		// The host killed init and the whole tree died with it.
		res.Signal = int(syscall.SIGKILL)
		res.ExitCode = 128 + res.Signal
		ru := &p.rusage
		res.UserMS = (ru.Utime.Sec*1e6 + ru.Utime.Usec) / 1000
		res.SysMS = (ru.Stime.Sec*1e6 + ru.Stime.Usec) / 1000
		res.MaxRSSBytes = ru.Maxrss * 1024
	}

	var stats cgroup.Stats
	if cg != nil {
		stats, err = cg.Stats()
		if err != nil {
			return nil, &SetupError{Step: "reading cgroup statistics", Err: err}
		}
		res.MemoryPeakBytes = stats.MemoryPeakBytes
	}
	for _, hit := range []struct {
		yes   bool
		limit Limit
	}{
		{timeout, LimitTimeout},
		{out.exceeded.Load(), LimitOutput},
		{stats.OOMKills > 0, LimitMemory},
		{stats.PidsLimitHits > 0, LimitPids},
	} {
		if hit.yes {
			res.LimitsHit = append(res.LimitsHit, hit.limit)
		}
	}
	if len(res.LimitsHit) > 0 {
		res.Limit = res.LimitsHit[0]
	}
	res.TimedOut = timeout
	if err := ctx.Err(); err != nil && res.Limit == LimitNone {
		return res, err // the caller stopped the run: res says how it ended
	}
	return res, nil
}

// readStatus reads init's next message.
func readStatus(sc *bufio.Scanner) (*status, error) {
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: init ended without a word", ErrInitProtocol)
	}
	var st status
	if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInitProtocol, err)
	}
	return &st, nil
}

// newCgroup creates the run's cgroup. A missing controller fails the run
// unless the spec allows degrading, in which case the limits that cannot be
// applied are dropped and named in res.Degraded.
func newCgroup(spec *Spec, res *Result) (*cgroup.Group, error) {
	if _, err := cgroup.CleanStale(); err != nil {
		return nil, &SetupError{Step: "removing stale cgroups", Err: err}
	}
	lim := cgroup.Limits{MemoryBytes: spec.Limits.MemoryBytes, Pids: spec.Limits.Pids, CPUs: spec.Limits.CPUs, CPUSet: spec.Pin.CPUSet}
	name := cgroup.UniqueName()
	g, err := newGroup(name, lim)
	var missing *cgroup.MissingControllersError
	if errors.As(err, &missing) && lim.CPUSet != "" && slices.Contains(missing.Controllers, "cpuset") {
		// A pin, not a limit: the run goes on unpinned, and says so.
		res.Unpinned = append(res.Unpinned, "cpuset: "+missing.Reasons["cpuset"])
		lim.CPUSet = ""
		if lim == (cgroup.Limits{}) {
			return nil, nil
		}
		g, err = newGroup(name, lim)
		missing = nil
	}
	if errors.As(err, &missing) && spec.AllowDegraded {
		for _, c := range missing.Controllers {
			switch c {
			case "memory":
				lim.MemoryBytes = 0
			case "pids":
				lim.Pids = 0
			case "cpu":
				lim.CPUs = 0
			}
			res.Degraded = append(res.Degraded, c+"-limit")
		}
		if lim == (cgroup.Limits{}) {
			return nil, nil
		}
		g, err = newGroup(name, lim)
	}
	if err != nil {
		se := &SetupError{Step: "applying resource limits", Err: err}
		if missing != nil {
			se.Hint = "run `proctor probe` to see the cgroup controllers here, or pass --allow-degraded to run without these limits (recorded in the result)"
		}
		return nil, se
	}
	return g, nil
}

// newGroup creates cgroups; tests replace it to simulate missing controllers.
var newGroup = cgroup.New

// placeCommand puts init's only child, stopped at exec, into the cgroup.
func placeCommand(initPID int, cg *cgroup.Group) error {
	kids, err := childrenOf(initPID)
	if err != nil {
		return &SetupError{Step: "finding the command", Err: err}
	}
	if len(kids) != 1 {
		return &SetupError{Step: "finding the command", Err: fmt.Errorf("%w: init has %d children, want 1", ErrInitProtocol, len(kids))}
	}
	if err := cg.AddProc(kids[0]); err != nil {
		return &SetupError{Step: "placing the command in its cgroup", Err: err}
	}
	return nil
}

// initBinary returns the path to execute as init. As root it is this binary
// seen through a private read-only bind mount, so nothing in the sandbox can
// open it for writing through /proc/1/exe (the runc CVE-2019-5736 class); init
// is also non-dumpable, which guards the unprivileged case.
//
// The path is /proc/self/fd/N, resolved in the child after its descriptors
// 0…len(files)-1 are in place. Before that, Go's child moves descriptors to
// numbers from max(len(files), the highest of files)+1 up, one for each it
// must move out of the way, and would clobber N there: N is chosen above all
// of that. (The files' numbers, not just their count, matter: with other
// sandboxes starting at once in this process they can be high.)
func initBinary(files []*os.File) (string, func(), error) {
	top := len(files)
	for _, f := range files {
		top = max(top, int(f.Fd()))
	}
	minFD := top + len(files) + 16
	self, err := os.Executable()
	if err != nil {
		return "", nil, &SetupError{Step: "finding the proctor binary", Err: err}
	}
	if os.Geteuid() != 0 {
		return self, func() {}, nil
	}
	m, err := cloneTree(self, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return "", nil, &SetupError{Step: "protecting the proctor binary", Err: err}
	}
	fd, err := unix.FcntlInt(uintptr(m), unix.F_DUPFD_CLOEXEC, minFD)
	unix.Close(m)
	if err != nil {
		return "", nil, &SetupError{Step: "protecting the proctor binary", Err: err}
	}
	return fmt.Sprintf("/proc/self/fd/%d", fd), func() { unix.Close(fd) }, nil
}

// cappedOutput copies the sandbox's stdout and stderr to the caller's writers,
// at most limit bytes together, and closes over once when more arrives.
type cappedOutput struct {
	limit    int64
	total    atomic.Int64
	exceeded atomic.Bool
	over     chan struct{}
}

// writer returns the io.Writer handed to exec.Cmd for one stream. It is never
// an *os.File, so exec.Cmd always creates a pipe and copies.
func (c *cappedOutput) writer(dst io.Writer) io.Writer {
	if dst == nil {
		dst = io.Discard
	}
	return &cappedWriter{c: c, dst: dst}
}

type cappedWriter struct {
	c   *cappedOutput
	dst io.Writer
}

func (w *cappedWriter) Write(p []byte) (int, error) {
	c := w.c
	n := int64(len(p))
	if c.limit > 0 {
		after := c.total.Add(n)
		if after > c.limit {
			keep := c.limit - (after - n)
			if keep > 0 {
				_, _ = w.dst.Write(p[:keep])
			}
			if !c.exceeded.Swap(true) {
				close(c.over)
			}
			return len(p), nil // swallow the rest; the tree is being killed
		}
	} else {
		c.total.Add(n)
	}
	if _, err := w.dst.Write(p); err != nil {
		return len(p), nil // a closed caller stream must not stall the sandbox
	}
	return len(p), nil
}

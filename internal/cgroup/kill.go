package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Timeouts of Kill and Destroy. Variables so tests can shorten them.
var (
	killTimeout  = 2 * time.Second
	rmdirTimeout = 2 * time.Second
)

const maxBackoff = 50 * time.Millisecond

// Kill sends SIGKILL to every process in the group, including processes in
// cgroups below it, and waits until none is left. On v2 it writes
// cgroup.kill, which the kernel applies to the whole subtree at once; on v1,
// which has no such file, it repeatedly reads cgroup.procs and kills each
// process until the group stays empty, so processes forked meanwhile are
// caught in the next round. It fails with ErrKillTimeout if processes remain
// after about two seconds. Killing an empty or destroyed group does nothing.
//
// Processes are pinned with a pidfd and their membership re-read before the
// signal, so a pid reused by a process outside the group is never signalled.
func (g *Group) Kill() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.destroyed {
		return nil
	}
	return g.kill()
}

func (g *Group) kill() error {
	deadline := time.Now().Add(killTimeout)
	delay := time.Millisecond
	var sigErr error // the last signalling failure, reported on timeout
	for {
		pids, err := g.procs()
		if err != nil {
			return fmt.Errorf("killing cgroup %s: %w", g.name, err)
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if sigErr != nil {
				return fmt.Errorf("%w: cgroup %s: pids %v: %w", ErrKillTimeout, g.name, firstFew(pids), sigErr)
			}
			return fmt.Errorf("%w: cgroup %s: pids %v", ErrKillTimeout, g.name, firstFew(pids))
		}
		for _, m := range g.members {
			if m.version != V2 {
				continue
			}
			// On failure (a kernel before 5.14 has no cgroup.kill) the
			// signals below still do the work.
			_ = g.fs.write(filepath.Join(m.dir, "cgroup.kill"), "1")
		}
		// A failure here is retried: cgroup.kill may still do the work.
		sigErr = g.signal(pids)
		time.Sleep(delay)
		delay = min(2*delay, maxBackoff)
	}
}

func firstFew(pids []int) []int {
	if len(pids) > 10 {
		return pids[:10]
	}
	return pids
}

// procs lists the processes in the group and in cgroups below it.
func (g *Group) procs() ([]int, error) {
	var out []int
	for _, m := range g.members {
		if err := collectProcs(m.dir, &out); err != nil {
			return nil, err
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func collectProcs(dir string, out *[]int) error {
	data, found, err := readOptional(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return err
	}
	if !found {
		return nil // already removed
	}
	pids, err := parsePids(data)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	for _, p := range pids {
		// 0 is a process outside this pid namespace: it cannot be
		// signalled from here.
		if p > 0 {
			*out = append(*out, p)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := collectProcs(filepath.Join(dir, e.Name()), out); err != nil {
				return err
			}
		}
	}
	return nil
}

// signal SIGKILLs those of pids that are still in the group once pinned.
func (g *Group) signal(pids []int) error {
	self := os.Getpid()
	fds := make(map[int]int, len(pids))
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	noPidfd := false
	for _, p := range pids {
		if p == self {
			continue
		}
		fd, err := unix.PidfdOpen(p, 0)
		switch {
		case err == nil:
			fds[p] = fd
		case errors.Is(err, syscall.ESRCH):
			// Already gone.
		case errors.Is(err, syscall.ENOSYS):
			noPidfd = true
		default:
			return fmt.Errorf("pidfd_open %d: %w", p, err)
		}
	}
	again, err := g.procs()
	if err != nil {
		return err
	}
	for _, p := range again {
		if p == self {
			continue
		}
		if fd, ok := fds[p]; ok {
			err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
			if err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("signalling pid %d: %w", p, err)
			}
		} else if noPidfd && slices.Contains(pids, p) {
			// Kernels before 5.3: no way to pin, the re-read above
			// is the best check there is.
			err := unix.Kill(p, unix.SIGKILL)
			if err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("signalling pid %d: %w", p, err)
			}
		}
	}
	return nil
}

// Destroy kills every process in the group and removes every directory it
// created, retrying for a while when the kernel still reports them busy. It
// can be called again after a failure; once it has succeeded, further calls
// do nothing and return nil.
func (g *Group) Destroy() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.destroyed {
		return nil
	}
	if err := g.kill(); err != nil {
		return fmt.Errorf("destroying cgroup %s: %w", g.name, err)
	}
	var errs []error
	for i := len(g.members) - 1; i >= 0; i-- {
		if err := g.fs.removeTree(g.members[i].dir, true); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("destroying cgroup %s: %w", g.name, errors.Join(errs...))
	}
	g.destroyed = true
	return nil
}

// removeTree removes dir and any cgroups below it, deepest first. With retry
// it keeps trying EBUSY for up to rmdirTimeout, as the kernel may take a
// moment to release dying processes. A missing directory is not an error.
func (s *sysfs) removeTree(dir string, retry bool) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := s.removeTree(filepath.Join(dir, e.Name()), retry); err != nil {
				return err
			}
		}
	}
	deadline := time.Now().Add(rmdirTimeout)
	delay := time.Millisecond
	for {
		err := s.rmdir(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if !retry || !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(delay)
		delay = min(2*delay, maxBackoff)
	}
}

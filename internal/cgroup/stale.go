package cgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// CleanStale removes empty leftover groups named "proctor-<pid>-*" from the
// places New creates groups in (the caller's cgroups and, on v2,
// <cgroup2 root>/proctor), when no process <pid> is running: the supervisor
// that made them died without calling Destroy. It likewise removes the
// empty "proctor-supervisor-<pid>" leaves New moves a caller into, once
// that caller is dead. It never kills anything, so a leftover that still
// holds processes stays. It is best effort: it returns how many directories
// it removed and the errors other than "busy" it met on the way.
func CleanStale() (int, error) { return hostFS().cleanStale() }

func (s *sysfs) cleanStale() (int, error) {
	l, err := s.detect()
	if err != nil {
		return 0, fmt.Errorf("detecting cgroups: %w", err)
	}
	var parents []string
	if u := l.unified; u != nil {
		if u.canCreate {
			parents = append(parents, u.parent)
		}
		if p := filepath.Join(u.mount, rootParentName); isDir(p) && s.writable(p) {
			parents = append(parents, p)
		}
	}
	for _, c := range append(slices.Clone(trackingOrder), "cpuset") {
		if h := l.v1[c]; h != nil && h.canCreate {
			parents = append(parents, h.parent)
		}
	}
	removed := 0
	var errs []error
	seen := map[string]bool{}
	for _, p := range parents {
		if seen[p] {
			continue
		}
		seen[p] = true
		entries, err := os.ReadDir(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			dir := filepath.Join(p, e.Name())
			var remove func() error
			if pid, ok := staleOwner(e.Name()); ok && !processExists(pid) {
				remove = func() error { return s.removeTree(dir, false) }
			} else if pid, ok := supervisorOwner(e.Name()); ok && !processExists(pid) {
				// Only an empty leaf: nothing below it is ours to remove.
				remove = func() error { return s.rmdir(dir) }
			}
			if remove == nil || !e.IsDir() {
				continue
			}
			err := remove()
			switch {
			case err == nil:
				removed++
			case errors.Is(err, syscall.EBUSY), errors.Is(err, fs.ErrNotExist):
				// Still holds processes, or removed by someone else.
			default:
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("cleaning stale cgroups: %w", errors.Join(errs...))
	}
	return removed, nil
}

// staleOwner parses the pid out of a "proctor-<pid>-<anything>" name.
func staleOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "proctor-")
	if !ok {
		return 0, false
	}
	digits, suffix, ok := strings.Cut(rest, "-")
	if !ok || suffix == "" || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	pid, err := strconv.ParseInt(digits, 10, 32) // pid_t
	if err != nil || pid <= 0 {
		return 0, false
	}
	return int(pid), true
}

// processExists reports whether pid is a live process: a zombie (dead,
// waiting to be reaped) holds nothing any more and counts as gone.
func processExists(pid int) bool {
	err := unix.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	return !Zombie(pid)
}

// Zombie reports whether pid is a process that has exited and waits to be
// reaped (state Z in /proc/PID/stat).
func Zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

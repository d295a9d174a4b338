package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// This file decides where a cgroup v2 group goes when the caller's own
// cgroup cannot give its children controllers (see New for the order).

// supervisorPrefix starts the name of the leaf New moves the caller into
// when it is alone in a cgroup with processes: "proctor-supervisor-<pid>".
const supervisorPrefix = "proctor-supervisor-"

// rootParentName is the cgroup below the cgroup2 root that holds groups
// when the caller, as root, cannot use its own cgroup. It never holds a
// process, so controllers can always be enabled for its children.
const rootParentName = "proctor"

func supervisorName(pid int) string { return supervisorPrefix + strconv.Itoa(pid) }

// supervisorOwner parses the pid out of a "proctor-supervisor-<pid>" name.
func supervisorOwner(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, supervisorPrefix)
	if !ok || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	pid, err := strconv.ParseInt(digits, 10, 32) // pid_t
	if err != nil || pid <= 0 {
		return 0, false
	}
	return int(pid), true
}

// placeMu serialises placeV2 within the process: the supervisor leaf, the
// caller's own membership and <root>/proctor are shared by all its groups.
var placeMu sync.Mutex

// placeV2 makes the controllers of t available to a new child of t.parent,
// moving the caller to a leaf or choosing another parent when the caller's
// cgroup holds processes (steps 1 to 4 of New). On success t.parent is where
// the group goes and t.enable is empty.
func (s *sysfs) placeV2(t *target) error {
	placeMu.Lock()
	defer placeMu.Unlock()
	own := t.parent

	// 1. The caller's own cgroup.
	err := s.enable(own, t.enable)
	if !errors.Is(err, ErrInternalProcesses) {
		if err == nil {
			t.enable = nil
		}
		return err
	}

	// 2. A cgroup holding nothing but the caller: a delegated scope.
	alone, rerr := onlyCaller(own)
	if rerr != nil {
		return fmt.Errorf("%w (and reading %s: %w)", err, filepath.Join(own, "cgroup.procs"), rerr)
	}
	if alone {
		stuck, serr := s.useSupervisor(own, t.enable)
		if serr == nil {
			t.enable = nil
			return nil
		}
		if stuck {
			return serr
		}
		err = fmt.Errorf("%w (moving this process to a leaf of its own did not help: %w)", err, serr)
	}

	// 3. As root, a parent of proctor's own below the cgroup2 root.
	if s.euid() == 0 && t.v2root != "" && t.v2root != own && s.writable(t.v2root) {
		dir, rerr := s.useRootParent(t.v2root, t.controllers)
		if rerr != nil {
			return rerr
		}
		t.parent, t.enable = dir, nil
		return nil
	}

	// 4. Explain.
	return err
}

// onlyCaller reports whether the cgroup dir holds the calling process and no
// other. cgroup.procs lists processes, not threads, and may list one twice.
func onlyCaller(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return false, err
	}
	pids, err := parsePids(string(b))
	if err != nil {
		return false, err
	}
	self := os.Getpid()
	for _, p := range pids {
		if p != self {
			return false, nil
		}
	}
	return len(pids) > 0, nil
}

// useSupervisor moves the calling process from own into the leaf
// own/proctor-supervisor-<pid> and enables ctrls in own. If enabling still
// fails it moves the caller back and removes the leaf it made; stuck reports
// that moving back failed too, so the caller stays in the leaf.
func (s *sysfs) useSupervisor(own string, ctrls []string) (stuck bool, err error) {
	pid := strconv.Itoa(os.Getpid())
	leaf := filepath.Join(own, supervisorName(os.Getpid()))
	made := true
	if err := s.mkdir(leaf); errors.Is(err, fs.ErrExist) {
		// Left by an earlier process with our pid, or made concurrently by
		// another goroutine: a leaf named for us is ours to use.
		made = false
	} else if err != nil {
		return false, fmt.Errorf("creating supervisor cgroup %s: %w", leaf, err)
	}
	if err := s.write(filepath.Join(leaf, "cgroup.procs"), pid); err != nil {
		if made {
			_ = s.rmdir(leaf)
		}
		return false, fmt.Errorf("moving this process to %s: %w", leaf, err)
	}
	err = s.enable(own, ctrls)
	if err == nil {
		return false, nil
	}
	// Another process joined own meanwhile, or own cannot have children
	// with controllers for another reason: undo the move.
	if merr := s.write(filepath.Join(own, "cgroup.procs"), pid); merr != nil {
		return true, fmt.Errorf("%w; moving this process back from %s: %w", err, leaf, merr)
	}
	if made {
		_ = s.rmdir(leaf)
	}
	return false, err
}

// useRootParent prepares root/proctor to hold groups with ctrls, enabling
// them in root and in root/proctor, and returns root/proctor. It removes
// root/proctor again only if it made it and enabling failed.
func (s *sysfs) useRootParent(root string, ctrls []string) (string, error) {
	dir := filepath.Join(root, rootParentName)
	if err := s.enableMissing(root, ctrls); err != nil {
		return "", fmt.Errorf("placing the group below %s: %w", dir, err)
	}
	made := true
	if err := s.mkdir(dir); errors.Is(err, fs.ErrExist) {
		made = false
	} else if err != nil {
		return "", fmt.Errorf("placing the group below %s: creating it: %w", dir, err)
	}
	if err := s.enableMissing(dir, ctrls); err != nil {
		if made {
			_ = s.rmdir(dir)
		}
		return "", fmt.Errorf("placing the group below %s: %w", dir, err)
	}
	return dir, nil
}

// enableMissing enables those of ctrls that dir's cgroup.subtree_control
// lacks, writing nothing when none is missing.
func (s *sysfs) enableMissing(dir string, ctrls []string) error {
	data, _, err := readOptional(filepath.Join(dir, "cgroup.subtree_control"))
	if err != nil {
		return err
	}
	have := parseSet(data)
	var need []string
	for _, c := range ctrls {
		if !have[c] {
			need = append(need, c)
		}
	}
	if len(need) == 0 {
		return nil
	}
	return s.enable(dir, need)
}

package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// fakeKernel is a temporary directory tree standing in for /proc/self and
// the cgroup filesystems, with hooks that behave like the kernel where the
// package depends on it: mkdir populates interface files, writes to
// cgroup.subtree_control obey the v2 rules (EBUSY while the cgroup holds
// processes, children's cgroup.controllers follow), writing a pid to
// cgroup.procs moves it out of every other cgroup of the hierarchy (and, for
// this process on v2, updates /proc/self/cgroup), cgroup.kill empties
// cgroup.procs, rmdir refuses populated cgroups.
type fakeKernel struct {
	t    *testing.T
	root string

	mu        sync.Mutex
	v1        map[string][]string       // mount directory (absolute) → controllers
	v2        string                    // cgroup2 mount directory, or ""
	readOnly  map[string]bool           // absolute paths the caller may not write
	failWrite map[string]error          // interface file name → error its writes return
	writes    []string                  // "path=data" of every write, in order
	euid      int                       // what sysfs.euid reports; not root unless a test says so
	absent    map[string]bool           // interface file names this kernel lacks
	afterMove func(dir string, pid int) // called after a pid is moved into dir, if set
}

func newFakeKernel(t *testing.T, mountinfo, procCgroup string) *fakeKernel {
	t.Helper()
	k := &fakeKernel{
		t:         t,
		root:      t.TempDir(),
		v1:        map[string][]string{},
		readOnly:  map[string]bool{},
		failWrite: map[string]error{},
		euid:      1000,
		absent:    map[string]bool{},
	}
	k.file("/proc/self/mountinfo", mountinfo)
	k.file("/proc/self/cgroup", procCgroup)
	mounts, err := parseMountinfo(strings.NewReader(mountinfo))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		switch m.fsType {
		case "cgroup":
			k.v1[k.abs(m.mountPoint)] = v1Controllers(m.superOpts)
		case "cgroup2":
			k.v2 = k.abs(m.mountPoint)
		}
	}
	return k
}

func (k *fakeKernel) sysfs() *sysfs {
	return &sysfs{root: k.root, mkdir: k.mkdir, rmdir: k.rmdir, write: k.write, writable: k.writable,
		euid: func() int { return k.euid }}
}

func (k *fakeKernel) abs(p string) string { return filepath.Join(k.root, p) }

// file creates a file (and its directories) at a kernel path.
func (k *fakeKernel) file(p, data string) {
	k.t.Helper()
	full := k.abs(p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		k.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
		k.t.Fatal(err)
	}
}

// cgroupDir creates an existing cgroup (such as the caller's) at a kernel
// path, with the interface files mkdir would give it.
func (k *fakeKernel) cgroupDir(p string) {
	k.t.Helper()
	full := k.abs(p)
	if err := os.MkdirAll(full, 0o755); err != nil {
		k.t.Fatal(err)
	}
	if err := k.populate(full); err != nil {
		k.t.Fatal(err)
	}
}

func (k *fakeKernel) read(p string) string {
	k.t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		k.t.Fatal(err)
	}
	return string(b)
}

// mountOf returns the fake mount holding dir.
func (k *fakeKernel) mountOf(dir string) (mount string, v2 bool, ctrls []string) {
	if k.v2 != "" && (dir == k.v2 || strings.HasPrefix(dir, k.v2+"/")) {
		return k.v2, true, nil
	}
	for m, c := range k.v1 {
		if dir == m || strings.HasPrefix(dir, m+"/") {
			return m, false, c
		}
	}
	return "", false, nil
}

func (k *fakeKernel) mkdir(p string) error {
	if err := os.Mkdir(p, 0o755); err != nil {
		return err
	}
	return k.populate(p)
}

// populate writes the interface files a new cgroup at dir would have.
func (k *fakeKernel) populate(dir string) error {
	files := map[string]string{"cgroup.procs": ""}
	mount, v2, ctrls := k.mountOf(dir)
	switch {
	case mount == "":
		return errors.New("fake kernel: not under a cgroup mount: " + dir)
	case v2:
		var have map[string]bool
		if dir == mount {
			have = parseSet(readOr(filepath.Join(dir, "cgroup.controllers"), "cpu memory pids"))
		} else {
			have = parseSet(readOr(filepath.Join(filepath.Dir(dir), "cgroup.subtree_control"), ""))
		}
		files["cgroup.controllers"] = joinSet(have)
		files["cgroup.subtree_control"] = ""
		files["cgroup.kill"] = ""
		files["cpu.stat"] = "usage_usec 0\nuser_usec 0\nsystem_usec 0\n"
		if have["memory"] {
			files["memory.max"] = "max\n"
			files["memory.swap.max"] = "max\n"
			files["memory.peak"] = "0\n"
			files["memory.events"] = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n"
		}
		if have["pids"] {
			files["pids.max"] = "max\n"
			files["pids.events"] = "max 0\n"
		}
		if have["cpu"] {
			files["cpu.max"] = "max 100000\n"
		}
	default:
		files["tasks"] = ""
		for _, c := range ctrls {
			switch c {
			case "memory":
				files["memory.limit_in_bytes"] = "9223372036854771712\n"
				files["memory.memsw.limit_in_bytes"] = "9223372036854771712\n"
				files["memory.swappiness"] = "60\n"
				files["memory.oom_control"] = "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n"
				files["memory.max_usage_in_bytes"] = "0\n"
			case "pids":
				files["pids.max"] = "max\n"
				files["pids.events"] = "max 0\n"
			case "cpu":
				files["cpu.cfs_period_us"] = "100000\n"
				files["cpu.cfs_quota_us"] = "-1\n"
			case "cpuacct":
				files["cpuacct.usage"] = "0\n"
			}
		}
	}
	for name, data := range files {
		if k.absent[name] {
			continue
		}
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			continue // set up by the test
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func readOr(p, def string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return def
	}
	return string(b)
}

func joinSet(m map[string]bool) string {
	var s []string
	for c, ok := range m {
		if ok {
			s = append(s, c)
		}
	}
	slices.Sort(s)
	return strings.Join(s, " ")
}

func (k *fakeKernel) write(p, data string) error {
	k.mu.Lock()
	k.writes = append(k.writes, p+"="+data)
	k.mu.Unlock()
	if err := k.failWrite[filepath.Base(p)]; err != nil {
		return &os.PathError{Op: "write", Path: p, Err: err}
	}
	if k.readOnly[p] {
		return &os.PathError{Op: "open", Path: p, Err: syscall.EACCES}
	}
	if _, err := os.Stat(p); err != nil {
		return err
	}
	dir := filepath.Dir(p)
	switch filepath.Base(p) {
	case "cgroup.subtree_control":
		mount, _, _ := k.mountOf(dir)
		if dir != mount && strings.TrimSpace(readOr(filepath.Join(dir, "cgroup.procs"), "")) != "" {
			return &os.PathError{Op: "write", Path: p, Err: syscall.EBUSY}
		}
		avail := parseSet(readOr(filepath.Join(dir, "cgroup.controllers"), ""))
		set := parseSet(readOr(p, ""))
		for _, tok := range strings.Fields(data) {
			c := tok[1:]
			if !avail[c] {
				return &os.PathError{Op: "write", Path: p, Err: syscall.EINVAL}
			}
			set[c] = tok[0] == '+'
		}
		data = joinSet(set)
		if err := k.setChildControllers(dir, data); err != nil {
			return err
		}
	case "cgroup.procs":
		return k.move(dir, data)
	case "cgroup.kill":
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), nil, 0o644); err != nil {
			return err
		}
	}
	return writeFile(p, data)
}

// setChildControllers makes the children of the v2 cgroup dir offer the
// controllers its subtree_control now enables, as the kernel does.
func (k *fakeKernel) setChildControllers(dir, enabled string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := os.WriteFile(filepath.Join(dir, e.Name(), "cgroup.controllers"), []byte(enabled+"\n"), 0o644); err != nil {
				return err
			}
		}
	}
	return nil
}

// move puts the process named by data (0: this one) into the cgroup dir and
// takes it out of every other cgroup of the same hierarchy. As on the kernel
// it refuses, with EBUSY, a v2 cgroup other than the root that has
// controllers enabled for its children.
func (k *fakeKernel) move(dir, data string) error {
	file := filepath.Join(dir, "cgroup.procs")
	pid, err := strconv.Atoi(strings.TrimSpace(data))
	if err != nil || pid < 0 {
		return &os.PathError{Op: "write", Path: file, Err: syscall.EINVAL}
	}
	if pid == 0 {
		pid = os.Getpid()
	}
	mount, v2, _ := k.mountOf(dir)
	if v2 && dir != mount && strings.TrimSpace(readOr(filepath.Join(dir, "cgroup.subtree_control"), "")) != "" {
		return &os.PathError{Op: "write", Path: file, Err: syscall.EBUSY}
	}
	if err := k.movePid(mount, dir, pid); err != nil {
		return err
	}
	if k.afterMove != nil {
		k.afterMove(dir, pid)
	}
	return nil
}

func (k *fakeKernel) movePid(mount, dir string, pid int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	file := filepath.Join(dir, "cgroup.procs")
	err := filepath.WalkDir(mount, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return err
		}
		pids, err := parsePids(readOr(p, ""))
		if err != nil {
			return err
		}
		kept := slices.DeleteFunc(slices.Clone(pids), func(q int) bool { return q == pid })
		if len(kept) == len(pids) {
			return nil
		}
		return os.WriteFile(p, []byte(pidLines(kept)), 0o644)
	})
	if err != nil {
		return err
	}
	pids, err := parsePids(readOr(file, ""))
	if err != nil {
		return err
	}
	if err := os.WriteFile(file, []byte(pidLines(append(pids, pid))), 0o644); err != nil {
		return err
	}
	if mount == k.v2 && pid == os.Getpid() {
		// The fake's cgroup2 mounts expose the whole hierarchy (root "/").
		rel, err := filepath.Rel(mount, dir)
		if err != nil {
			return err
		}
		own := readOr(k.abs("/proc/self/cgroup"), "")
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(own), "\n") {
			if strings.HasPrefix(l, "0::") {
				l = "0::" + filepath.Join("/", rel)
			}
			lines = append(lines, l)
		}
		if err := os.WriteFile(k.abs("/proc/self/cgroup"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func pidLines(pids []int) string {
	var b strings.Builder
	for _, p := range pids {
		b.WriteString(strconv.Itoa(p) + "\n")
	}
	return b.String()
}

func (k *fakeKernel) writable(p string) bool {
	if k.readOnly[p] {
		return false
	}
	_, err := os.Stat(p)
	return err == nil
}

func (k *fakeKernel) rmdir(p string) error {
	entries, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			return &os.PathError{Op: "rmdir", Path: p, Err: syscall.EBUSY}
		}
	}
	if strings.TrimSpace(readOr(filepath.Join(p, "cgroup.procs"), "")) != "" {
		return &os.PathError{Op: "rmdir", Path: p, Err: syscall.EBUSY}
	}
	return os.RemoveAll(p)
}

// snapshot records every path and file content under the fake root, to
// show that a failed call changed nothing.
func (k *fakeKernel) snapshot() map[string]string {
	k.t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(k.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			out[p] = "<dir>"
			return nil
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		k.t.Fatal(err)
	}
	return out
}

// sameTree fails the test if the tree differs from before, ignoring paths
// in except.
func (k *fakeKernel) sameTree(before map[string]string, except ...string) {
	k.t.Helper()
	after := k.snapshot()
	for p, v := range after {
		if slices.Contains(except, p) {
			continue
		}
		if w, ok := before[p]; !ok {
			k.t.Errorf("created %s", p)
		} else if w != v {
			k.t.Errorf("changed %s: %q → %q", p, w, v)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			k.t.Errorf("removed %s", p)
		}
	}
}

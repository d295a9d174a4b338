package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// These tests run New's cgroup v2 placement (see New) on the fake kernel,
// which refuses controllers to the children of a cgroup holding processes.

const fakeV2RootParent = "/sys/fs/cgroup/proctor"

// fakeV2Leaf is the supervisor leaf New would move this process into.
func fakeV2Leaf() string { return fakeV2Parent + "/" + supervisorName(os.Getpid()) }

// ownLine returns the unified line of the fake /proc/self/cgroup.
func ownLine(k *fakeKernel) string {
	k.t.Helper()
	for l := range strings.SplitSeq(k.read(k.abs("/proc/self/cgroup")), "\n") {
		if strings.HasPrefix(l, "0::") {
			return l
		}
	}
	k.t.Fatal("no 0:: line in /proc/self/cgroup")
	return ""
}

func TestFakeV2Placement(t *testing.T) {
	self := strconv.Itoa(os.Getpid()) + "\n"
	lim := Limits{MemoryBytes: 32 << 20, Pids: 8}
	tests := []struct {
		name     string
		enabled  string // the caller's cgroup.subtree_control
		procs    string // the caller's cgroup.procs
		euid     int
		rootRO   bool   // the cgroup2 root is not writable
		wantIn   string // where groups go; "" for ErrInternalProcesses
		wantLeaf bool   // the caller was moved to its supervisor leaf
	}{
		{name: "1: controllers already enabled", enabled: "memory pids", euid: 1000, wantIn: fakeV2Parent},
		{name: "1: own cgroup empty, root: enabling works, nothing moved", euid: 0, wantIn: fakeV2Parent},
		{name: "2: only us: supervisor leaf", procs: self, euid: 1000, wantIn: fakeV2Parent, wantLeaf: true},
		{name: "2: only us, root: leaf before root parent", procs: self, euid: 0, wantIn: fakeV2Parent, wantLeaf: true},
		{name: "3: shared, root: below the cgroup2 root", procs: self + "4242\n", euid: 0, wantIn: fakeV2RootParent},
		{name: "3: only another process, root", procs: "4242\n", euid: 0, wantIn: fakeV2RootParent},
		{name: "4: shared, not root", procs: self + "4242\n", euid: 1000},
		{name: "4: shared, root, cgroup2 root not writable", procs: self + "4242\n", euid: 0, rootRO: true},
		{name: "4: only another process, not root", procs: "4242\n", euid: 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeV2(t, "cpu memory pids", tt.enabled)
			k.file(fakeV2Parent+"/cgroup.procs", tt.procs)
			k.euid = tt.euid
			if tt.rootRO {
				k.readOnly[k.abs("/sys/fs/cgroup")] = true
			}
			ownBefore := ownLine(k)
			before := k.snapshot()
			s := k.sysfs()

			g, err := s.newGroup("proctor-1-a", lim)
			if tt.wantIn == "" {
				if !errors.Is(err, ErrInternalProcesses) || !errors.Is(err, syscall.EBUSY) {
					t.Fatalf("New = %v, %v; want ErrInternalProcesses wrapping EBUSY", g, err)
				}
				for _, want := range []string{"memory,pids", "systemd-run --user --scope -p Delegate=yes", "as root"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
				// Nothing created, nothing enabled, nobody moved.
				k.sameTree(before)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			dir := k.abs(tt.wantIn + "/proctor-1-a")
			if p := g.Paths(); !slices.Equal(p, []string{dir}) {
				t.Fatalf("Paths = %q, want [%s]", p, dir)
			}
			for f, want := range map[string]string{"memory.max": "33554432", "pids.max": "8", "memory.swap.max": "0"} {
				if got := k.read(filepath.Join(dir, f)); got != want {
					t.Errorf("%s = %q, want %q", f, got, want)
				}
			}

			leaf := k.abs(fakeV2Leaf())
			if tt.wantLeaf {
				if got := k.read(filepath.Join(leaf, "cgroup.procs")); got != self {
					t.Errorf("leaf cgroup.procs = %q, want only us", got)
				}
				if got := k.read(k.abs(fakeV2Parent + "/cgroup.procs")); got != "" {
					t.Errorf("own cgroup.procs = %q after the move, want empty", got)
				}
				if got := ownLine(k); got != "0::"+fakeV2Own+"/"+supervisorName(os.Getpid()) {
					t.Errorf("/proc/self/cgroup has %q, want the leaf", got)
				}
			} else {
				if exists(leaf) {
					t.Errorf("supervisor leaf %s made", leaf)
				}
				if got := k.read(k.abs(fakeV2Parent + "/cgroup.procs")); got != tt.procs {
					t.Errorf("own cgroup.procs = %q, want %q unchanged", got, tt.procs)
				}
				if got := ownLine(k); got != ownBefore {
					t.Errorf("/proc/self/cgroup has %q, want %q", got, ownBefore)
				}
			}
			rootParent := k.abs(fakeV2RootParent)
			if tt.wantIn == fakeV2RootParent {
				for _, d := range []string{k.abs("/sys/fs/cgroup"), rootParent} {
					if got := parseSet(k.read(filepath.Join(d, "cgroup.subtree_control"))); !got["memory"] || !got["pids"] {
						t.Errorf("%s/cgroup.subtree_control = %v, want memory and pids", d, got)
					}
				}
				if got := k.read(filepath.Join(rootParent, "cgroup.procs")); got != "" {
					t.Errorf("%s holds processes: %q", rootParent, got)
				}
				if got := k.read(k.abs(fakeV2Parent + "/cgroup.subtree_control")); got != tt.enabled+"\n" {
					t.Errorf("own cgroup.subtree_control = %q, want unchanged", got)
				}
			} else if exists(rootParent) {
				t.Errorf("%s made", rootParent)
			}

			// Detect still names the caller's cgroup, not the leaf.
			if in, err := s.info(); err != nil || in.Unified != k.abs(fakeV2Parent) {
				t.Errorf("Info.Unified = %q, %v; want %s", in.Unified, err, k.abs(fakeV2Parent))
			}
			// A second group goes beside the first: no leaf in a leaf.
			g2, err := s.newGroup("proctor-1-b", lim)
			if err != nil {
				t.Fatal(err)
			}
			if p := g2.Paths(); !slices.Equal(p, []string{k.abs(tt.wantIn + "/proctor-1-b")}) {
				t.Errorf("second group Paths = %q, want beside the first", p)
			}

			for _, g := range []*Group{g, g2} {
				if err := g.Destroy(); err != nil {
					t.Fatal(err)
				}
				if p := g.Paths()[0]; exists(p) {
					t.Errorf("%s left after Destroy", p)
				}
			}
			if tt.wantLeaf && !exists(leaf) {
				t.Errorf("Destroy removed the supervisor leaf %s", leaf)
			}
			if tt.wantIn == fakeV2RootParent && !exists(rootParent) {
				t.Errorf("Destroy removed %s", rootParent)
			}

			// CleanStale looks where groups go: a dead supervisor's group and
			// its empty leaf go; a leaf with a process or a cgroup in it, a
			// live process's leaf (our parent's, empty) and ours stay.
			in := tt.wantIn
			live := supervisorName(os.Getppid())
			k.cgroupDir(in + "/proctor-999999999-x")
			k.cgroupDir(in + "/" + supervisorName(999999999))
			k.cgroupDir(in + "/" + supervisorName(999999998))
			k.file(in+"/"+supervisorName(999999998)+"/cgroup.procs", "77\n")
			k.cgroupDir(in + "/" + supervisorName(999999997) + "/sub")
			k.cgroupDir(in + "/" + live)
			k.cgroupDir(in + "/proctor-supervisor-x")
			n, err := s.cleanStale()
			if err != nil {
				t.Fatal(err)
			}
			if n != 2 {
				t.Errorf("CleanStale removed %d, want 2", n)
			}
			for name, want := range map[string]bool{
				"proctor-999999999-x":       false,
				supervisorName(999999999):   false,
				supervisorName(999999998):   true,
				supervisorName(999999997):   true,
				live:                        true,
				"proctor-supervisor-x":      true,
				supervisorName(os.Getpid()): tt.wantLeaf,
			} {
				if got := exists(k.abs(in + "/" + name)); got != want {
					t.Errorf("after CleanStale %s exists = %v, want %v", name, got, want)
				}
			}
		})
	}
}

// TestFakeV2SupervisorUndo covers a process joining the caller's cgroup
// between the check and the move: the caller goes back where it was and the
// leaf goes, then New carries on with step 3 or fails.
func TestFakeV2SupervisorUndo(t *testing.T) {
	tests := []struct {
		name   string
		euid   int
		wantIn string // "" for ErrInternalProcesses
	}{
		{"not root: error", 1000, ""},
		{"root: below the cgroup2 root", 0, fakeV2RootParent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeV2(t, "cpu memory pids", "")
			self := strconv.Itoa(os.Getpid()) + "\n"
			k.file(fakeV2Parent+"/cgroup.procs", self)
			k.euid = tt.euid
			ownBefore := ownLine(k)
			leaf := k.abs(fakeV2Leaf())
			moves := 0
			k.afterMove = func(dir string, pid int) {
				moves++
				if dir == leaf {
					k.file(fakeV2Parent+"/cgroup.procs", "4242\n")
				}
			}
			g, err := k.sysfs().newGroup("proctor-1-a", Limits{Pids: 8})
			if tt.wantIn == "" {
				if !errors.Is(err, ErrInternalProcesses) {
					t.Fatalf("New = %v, %v; want ErrInternalProcesses", g, err)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if p := g.Paths(); !slices.Equal(p, []string{k.abs(tt.wantIn + "/proctor-1-a")}) {
				t.Errorf("Paths = %q", p)
			}
			if moves != 2 {
				t.Errorf("%d moves, want 2 (to the leaf and back)", moves)
			}
			if exists(leaf) {
				t.Errorf("leaf %s left behind", leaf)
			}
			if got := ownLine(k); got != ownBefore {
				t.Errorf("/proc/self/cgroup has %q, want %q", got, ownBefore)
			}
			if got := k.read(k.abs(fakeV2Parent + "/cgroup.procs")); got != "4242\n"+self {
				t.Errorf("own cgroup.procs = %q, want the other process and us", got)
			}
		})
	}
}

// TestFakeV1NeverMovesCaller shows v1 placement does not look at the v2
// rules: the caller alone in its unified cgroup is not moved.
func TestFakeV1NeverMovesCaller(t *testing.T) {
	k := newFakeV1(t, true)
	k.euid = 0
	self := strconv.Itoa(os.Getpid()) + "\n"
	k.file("/sys/fs/cgroup/unified/docker/abc/cgroup.procs", self)
	before := k.read(k.abs("/proc/self/cgroup"))
	g, err := k.sysfs().newGroup("proctor-1-a", Limits{MemoryBytes: 1 << 20, Pids: 8, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if g.Version() != V1 {
		t.Errorf("Version = %v", g.Version())
	}
	if got := k.read(k.abs("/proc/self/cgroup")); got != before {
		t.Errorf("/proc/self/cgroup changed: %q", got)
	}
	for _, p := range []string{"/sys/fs/cgroup/unified/docker/abc/" + supervisorName(os.Getpid()), "/sys/fs/cgroup/unified/proctor"} {
		if exists(k.abs(p)) {
			t.Errorf("%s made on v1", p)
		}
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
}

// TestFakeKernelRules checks the fake's kernel rules the placement tests
// rely on, so they cannot pass against a fake that allows everything.
func TestFakeKernelRules(t *testing.T) {
	k := newFakeV2(t, "cpu memory pids", "")
	own := k.abs(fakeV2Parent)
	sub := filepath.Join(own, "sub")
	if err := k.mkdir(sub); err != nil {
		t.Fatal(err)
	}
	k.file(fakeV2Parent+"/cgroup.procs", "4242\n")
	if err := k.write(filepath.Join(own, "cgroup.subtree_control"), "+pids"); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("enabling with a process in the cgroup: %v, want EBUSY", err)
	}
	if err := k.write(filepath.Join(sub, "cgroup.procs"), "4242"); err != nil {
		t.Fatal(err)
	}
	if got := k.read(filepath.Join(own, "cgroup.procs")); got != "" {
		t.Errorf("source cgroup.procs = %q after the move", got)
	}
	if got := k.read(filepath.Join(sub, "cgroup.procs")); got != "4242\n" {
		t.Errorf("target cgroup.procs = %q after the move", got)
	}
	if err := k.write(filepath.Join(own, "cgroup.subtree_control"), "+pids"); err != nil {
		t.Fatalf("enabling in an empty cgroup: %v", err)
	}
	if got := k.read(filepath.Join(sub, "cgroup.controllers")); got != "pids\n" {
		t.Errorf("child cgroup.controllers = %q, want pids", got)
	}
	if err := k.write(filepath.Join(own, "cgroup.procs"), "4242"); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("moving into a cgroup with controllers enabled: %v, want EBUSY", err)
	}
	if err := k.write(filepath.Join(sub, "cgroup.procs"), "0"); err != nil {
		t.Fatal(err)
	}
	if got := ownLine(k); got != "0::"+fakeV2Own+"/sub" {
		t.Errorf("/proc/self/cgroup has %q after moving ourselves", got)
	}
}

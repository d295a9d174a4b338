package cgroup

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const (
	fakeV2Mountinfo = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n" +
		"30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot\n"
	fakeV2Own    = "/user.slice/user-1000.slice/proctor.scope"
	fakeV2Parent = "/sys/fs/cgroup" + fakeV2Own
)

// newFakeV2 builds a pure cgroup v2 machine where the caller's cgroup offers
// controllers and has enabled for its children those in enabled.
func newFakeV2(t *testing.T, controllers, enabled string) *fakeKernel {
	t.Helper()
	k := newFakeKernel(t, fakeV2Mountinfo, "0::"+fakeV2Own+"\n")
	k.file("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n")
	k.cgroupDir("/sys/fs/cgroup")
	k.file(fakeV2Parent+"/cgroup.controllers", controllers+"\n")
	k.file(fakeV2Parent+"/cgroup.subtree_control", enabled+"\n")
	k.cgroupDir(fakeV2Parent)
	return k
}

func TestFakeV2Detect(t *testing.T) {
	tests := []struct {
		name        string
		controllers string
		enabled     string
		readOnly    []string
		wantVersion Version
		want        map[string]bool
	}{
		{"all offered", "cpu memory pids", "", nil, V2, map[string]bool{"cpu": true, "memory": true, "pids": true}},
		{"pids not offered", "cpu memory", "", nil, V2, map[string]bool{"cpu": true, "memory": true, "pids": false}},
		{"not delegated", "cpu memory pids", "", []string{fakeV2Parent, fakeV2Parent + "/cgroup.subtree_control"}, 0,
			map[string]bool{"cpu": false, "memory": false, "pids": false}},
		{"enabled but subtree_control read-only", "cpu memory pids", "memory", []string{fakeV2Parent + "/cgroup.subtree_control"}, V2,
			map[string]bool{"cpu": false, "memory": true, "pids": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeV2(t, tt.controllers, tt.enabled)
			for _, p := range tt.readOnly {
				k.readOnly[k.abs(p)] = true
			}
			in, err := k.sysfs().info()
			if err != nil {
				t.Fatal(err)
			}
			if in.Version != tt.wantVersion {
				t.Errorf("Version = %v, want %v", in.Version, tt.wantVersion)
			}
			if in.Unified != k.abs(fakeV2Parent) {
				t.Errorf("Unified = %q", in.Unified)
			}
			for c, want := range tt.want {
				if in.Controllers[c] != want {
					t.Errorf("Controllers[%s] = %v, want %v (reason %q)", c, in.Controllers[c], want, in.Reasons[c])
				}
				if want && in.Roots[c] != k.abs(fakeV2Parent) {
					t.Errorf("Roots[%s] = %q", c, in.Roots[c])
				}
				if !want && in.Reasons[c] == "" {
					t.Errorf("no reason for %s", c)
				}
			}
		})
	}
}

func TestFakeV2New(t *testing.T) {
	tests := []struct {
		name        string
		enabled     string
		lim         Limits
		wantSubtree string
		wantFiles   map[string]string
	}{
		{
			name: "all limits", lim: Limits{MemoryBytes: 32 << 20, Pids: 8, CPUs: 0.5},
			wantSubtree: "cpu memory pids",
			wantFiles:   map[string]string{"memory.max": "33554432", "memory.swap.max": "0", "pids.max": "8", "cpu.max": "50000 100000"},
		},
		{
			name: "only pids enables only pids", lim: Limits{Pids: 100},
			wantSubtree: "pids",
			wantFiles:   map[string]string{"pids.max": "100"},
		},
		{
			name: "already enabled", enabled: "cpu memory pids", lim: Limits{CPUs: 2},
			wantSubtree: "cpu memory pids",
			wantFiles:   map[string]string{"cpu.max": "200000 100000", "memory.max": "max\n", "pids.max": "max\n"},
		},
		{
			name: "no limits: tracking only", lim: Limits{},
			wantSubtree: "",
			wantFiles:   map[string]string{"cgroup.procs": ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeV2(t, "cpu memory pids", tt.enabled)
			if tt.enabled != "" {
				// Nothing needs writing, so a read-only file must not matter.
				k.readOnly[k.abs(fakeV2Parent+"/cgroup.subtree_control")] = true
			}
			g, err := k.sysfs().newGroup("proctor-1-a", tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			dir := k.abs(fakeV2Parent + "/proctor-1-a")
			if p := g.Paths(); !slices.Equal(p, []string{dir}) {
				t.Fatalf("Paths = %q, want [%s]", p, dir)
			}
			if g.Version() != V2 {
				t.Errorf("Version = %v", g.Version())
			}
			if got := strings.TrimSpace(k.read(k.abs(fakeV2Parent + "/cgroup.subtree_control"))); got != tt.wantSubtree {
				t.Errorf("subtree_control = %q, want %q", got, tt.wantSubtree)
			}
			for f, want := range tt.wantFiles {
				if got := k.read(filepath.Join(dir, f)); got != want {
					t.Errorf("%s = %q, want %q", f, got, want)
				}
			}
			if err := g.Destroy(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("%s still exists after Destroy: %v", dir, err)
			}
		})
	}
}

// TestFakeV2OptionalFiles covers kernels without swap accounting
// (no memory.swap.max) or before 5.19 (no memory.peak): New and Stats work,
// and New never creates an interface file.
func TestFakeV2OptionalFiles(t *testing.T) {
	tests := []struct {
		name      string
		absent    string
		wantFiles map[string]string
		wantStats Stats
	}{
		{"all present", "", map[string]string{"memory.max": "33554432", "memory.swap.max": "0"},
			Stats{OOMKills: 2, PidsLimitHits: 5, MemoryPeakBytes: 1234567}},
		{"no swap accounting", "memory.swap.max", map[string]string{"memory.max": "33554432"},
			Stats{OOMKills: 2, PidsLimitHits: 5, MemoryPeakBytes: 1234567}},
		{"no memory.peak", "memory.peak", map[string]string{"memory.max": "33554432", "memory.swap.max": "0"},
			Stats{OOMKills: 2, PidsLimitHits: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeV2(t, "cpu memory pids", "")
			if tt.absent != "" {
				k.absent[tt.absent] = true
			}
			g, err := k.sysfs().newGroup("proctor-1-a", Limits{MemoryBytes: 32 << 20, Pids: 8})
			if err != nil {
				t.Fatal(err)
			}
			dir := g.Paths()[0]
			for f, want := range tt.wantFiles {
				if got := k.read(filepath.Join(dir, f)); got != want {
					t.Errorf("%s = %q, want %q", f, got, want)
				}
			}
			if tt.absent != "" && exists(filepath.Join(dir, tt.absent)) {
				t.Errorf("%s created", tt.absent)
			}
			rel := strings.TrimPrefix(dir, k.root)
			k.file(rel+"/memory.events", "low 0\nhigh 0\nmax 9\noom 3\noom_kill 2\n")
			k.file(rel+"/pids.events", "max 5\n")
			if tt.absent != "memory.peak" {
				k.file(rel+"/memory.peak", "1234567\n")
			}
			st, err := g.Stats()
			if err != nil || st != tt.wantStats {
				t.Errorf("Stats = %+v, %v; want %+v", st, err, tt.wantStats)
			}
			if err := g.Destroy(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestFakeV2MissingCreatesNothing(t *testing.T) {
	tests := []struct {
		name        string
		controllers string
		readOnly    []string
		lim         Limits
		want        []string
	}{
		{"pids not offered", "cpu memory", nil, Limits{MemoryBytes: 1 << 20, Pids: 8}, []string{"pids"}},
		{"all missing listed", "hugetlb", nil, Limits{MemoryBytes: 1 << 20, Pids: 8, CPUs: 1}, []string{"cpu", "memory", "pids"}},
		{"no write permission on cgroup", "cpu memory pids", []string{fakeV2Parent}, Limits{Pids: 8}, []string{"pids"}},
		{"no write permission on subtree_control", "cpu memory pids", []string{fakeV2Parent + "/cgroup.subtree_control"}, Limits{Pids: 8, CPUs: 1}, []string{"cpu", "pids"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeV2(t, tt.controllers, "")
			for _, p := range tt.readOnly {
				k.readOnly[k.abs(p)] = true
			}
			before := k.snapshot()
			g, err := k.sysfs().newGroup("proctor-1-a", tt.lim)
			var mc *MissingControllersError
			if !errors.As(err, &mc) {
				t.Fatalf("New = %v, %v; want *MissingControllersError", g, err)
			}
			if !slices.Equal(mc.Controllers, tt.want) {
				t.Errorf("Controllers = %q, want %q", mc.Controllers, tt.want)
			}
			k.sameTree(before)
		})
	}
}

func TestFakeV2EnableDenied(t *testing.T) {
	// Access checks said yes but the kernel said no: still "missing".
	k := newFakeV2(t, "cpu memory pids", "")
	k.failWrite["cgroup.subtree_control"] = syscall.EACCES
	before := k.snapshot()
	_, err := k.sysfs().newGroup("proctor-1-a", Limits{MemoryBytes: 1 << 20})
	var mc *MissingControllersError
	if !errors.As(err, &mc) || !slices.Equal(mc.Controllers, []string{"memory"}) {
		t.Fatalf("err = %v, want missing memory", err)
	}
	k.sameTree(before)
}

func TestFakeV2FailureRemovesDirectory(t *testing.T) {
	k := newFakeV2(t, "cpu memory pids", "")
	k.failWrite["cpu.max"] = syscall.EINVAL
	before := k.snapshot()
	_, err := k.sysfs().newGroup("proctor-1-a", Limits{MemoryBytes: 1 << 20, CPUs: 1})
	if !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("err = %v, want EINVAL", err)
	}
	// Enabling controllers in the parent is not undone (other groups may
	// rely on it); everything else is as before.
	k.sameTree(before, k.abs(fakeV2Parent+"/cgroup.subtree_control"))
}

func TestFakeV2GroupOps(t *testing.T) {
	k := newFakeV2(t, "cpu memory pids", "")
	g, err := k.sysfs().newGroup("proctor-1-a", Limits{MemoryBytes: 1 << 20, Pids: 8})
	if err != nil {
		t.Fatal(err)
	}
	dir := g.Paths()[0]

	t.Run("AddProc", func(t *testing.T) {
		if err := g.AddProc(4242); err != nil {
			t.Fatal(err)
		}
		if got := k.read(filepath.Join(dir, "cgroup.procs")); got != "4242\n" {
			t.Fatalf("cgroup.procs = %q", got)
		}
		for _, bad := range []int{0, -1, os.Getpid()} {
			if err := g.AddProc(bad); !errors.Is(err, ErrInvalidPid) {
				t.Errorf("AddProc(%d) = %v, want ErrInvalidPid", bad, err)
			}
		}
	})
	t.Run("Stats", func(t *testing.T) {
		k.file(strings.TrimPrefix(dir, k.root)+"/memory.events", "low 0\nhigh 0\nmax 9\noom 3\noom_kill 2\n")
		k.file(strings.TrimPrefix(dir, k.root)+"/pids.events", "max 5\n")
		k.file(strings.TrimPrefix(dir, k.root)+"/memory.peak", "1234567\n")
		k.file(strings.TrimPrefix(dir, k.root)+"/cpu.stat", "usage_usec 42\nuser_usec 40\nsystem_usec 2\n")
		st, err := g.Stats()
		if err != nil {
			t.Fatal(err)
		}
		want := Stats{OOMKills: 2, PidsLimitHits: 5, MemoryPeakBytes: 1234567, CPUUsageNs: 42000}
		if st != want {
			t.Fatalf("Stats = %+v, want %+v", st, want)
		}
	})
	t.Run("Kill writes cgroup.kill", func(t *testing.T) {
		// A pid that cannot exist: only cgroup.kill can empty the group.
		k.file(strings.TrimPrefix(dir, k.root)+"/cgroup.procs", "999999999\n")
		if err := g.Kill(); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(k.writes, filepath.Join(dir, "cgroup.kill")+"=1") {
			t.Fatalf("cgroup.kill not written; writes %q", k.writes)
		}
	})
	t.Run("Destroy removes sub-cgroups and is idempotent", func(t *testing.T) {
		if err := k.mkdir(filepath.Join(dir, "child")); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := g.Destroy(); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("%s still exists: %v", dir, err)
		}
		if _, err := g.Stats(); !errors.Is(err, ErrDestroyed) {
			t.Errorf("Stats after Destroy: %v", err)
		}
		if err := g.AddProc(4242); !errors.Is(err, ErrDestroyed) {
			t.Errorf("AddProc after Destroy: %v", err)
		}
		if err := g.Kill(); err != nil {
			t.Errorf("Kill after Destroy: %v", err)
		}
	})
}

func TestFakeKillTimeout(t *testing.T) {
	old := killTimeout
	killTimeout = 100 * time.Millisecond
	t.Cleanup(func() { killTimeout = old })

	k := newFakeV2(t, "cpu memory pids", "")
	k.failWrite["cgroup.kill"] = syscall.ENOENT // as on kernels before 5.14
	g, err := k.sysfs().newGroup("proctor-1-a", Limits{Pids: 8})
	if err != nil {
		t.Fatal(err)
	}
	dir := g.Paths()[0]
	k.file(strings.TrimPrefix(dir, k.root)+"/cgroup.procs", "999999999\n")
	if err := g.Destroy(); !errors.Is(err, ErrKillTimeout) {
		t.Fatalf("Destroy = %v, want ErrKillTimeout", err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("directory removed although processes remain: %v", err)
	}
	// Once the group is empty, Destroy can be retried.
	k.file(strings.TrimPrefix(dir, k.root)+"/cgroup.procs", "")
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
}

func TestFakeV2CleanStale(t *testing.T) {
	k := newFakeV2(t, "cpu memory pids", "")
	self := strconv.Itoa(os.Getpid())
	for _, n := range []string{"proctor-999999999-x", "proctor-" + self + "-y", "proctor-abc-z", "other"} {
		k.cgroupDir(fakeV2Parent + "/" + n)
	}
	k.cgroupDir(fakeV2Parent + "/proctor-999999998-busy")
	k.file(fakeV2Parent+"/proctor-999999998-busy/cgroup.procs", "77\n")

	n, err := k.sysfs().cleanStale()
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("removed %d, want 1", n)
	}
	for name, want := range map[string]bool{
		"proctor-999999999-x": false, "proctor-" + self + "-y": true, "proctor-abc-z": true,
		"other": true, "proctor-999999998-busy": true,
	} {
		_, err := os.Stat(k.abs(fakeV2Parent + "/" + name))
		if got := err == nil; got != want {
			t.Errorf("%s exists = %v, want %v", name, got, want)
		}
	}
}

func TestInvalidArguments(t *testing.T) {
	k := newFakeV2(t, "cpu memory pids", "")
	tests := []struct {
		name    string
		group   string
		lim     Limits
		wantErr error
	}{
		{"slash in name", "a/b", Limits{}, ErrInvalidName},
		{"dot-dot", "..", Limits{}, ErrInvalidName},
		{"negative memory", "ok", Limits{MemoryBytes: -5}, ErrInvalidLimits},
		{"tiny cpu", "ok", Limits{CPUs: 0.0001}, ErrInvalidLimits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := k.snapshot()
			if _, err := k.sysfs().newGroup(tt.group, tt.lim); !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			k.sameTree(before)
		})
	}
}

// TestSignalOnlyMembers shows that a pid listed once but no longer in the
// group (a reused pid, say) is not signalled.
func TestSignalOnlyMembers(t *testing.T) {
	k := newFakeV2(t, "cpu memory pids", "")
	g, err := k.sysfs().newGroup("proctor-1-a", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	outsider := exec.Command("/bin/sleep", "60")
	if err := outsider.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { outsider.Process.Kill(); outsider.Wait() })

	// cgroup.procs (empty) no longer lists the pid when signal re-reads it.
	if err := g.signal([]int{outsider.Process.Pid}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	var ws unix.WaitStatus
	if p, err := unix.Wait4(outsider.Process.Pid, &ws, unix.WNOHANG, nil); p != 0 || err != nil {
		t.Fatalf("process outside the group ended (%v, %v)", ws, err)
	}
	// Listed: it is killed.
	k.file(strings.TrimPrefix(g.Paths()[0], k.root)+"/cgroup.procs", strconv.Itoa(outsider.Process.Pid)+"\n")
	if err := g.signal([]int{outsider.Process.Pid}); err != nil {
		t.Fatal(err)
	}
	if err := outsider.Wait(); !killedBy(outsider.ProcessState, syscall.SIGKILL) {
		t.Fatalf("listed process not killed: %v", err)
	}
}

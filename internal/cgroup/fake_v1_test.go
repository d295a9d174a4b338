package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A hybrid machine as containers see it: v1 controllers, cpu and cpuacct
// co-mounted, the memory hierarchy bind-mounted from the container's own
// cgroup (mount root /docker/abc), and a cgroup2 mount offering only hugetlb.
const (
	fakeV1MountinfoBase = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n" +
		"25 23 0:22 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n" +
		"26 25 0:23 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:7 - cgroup cgroup rw,cpu,cpuacct\n" +
		"27 25 0:24 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n" +
		"29 25 0:26 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n" +
		"30 25 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
	fakeV1PidsMount = "28 25 0:25 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n"
	fakeV1Own       = "12:pids:/docker/abc\n5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n0::/docker/abc\n"
)

func newFakeV1(t *testing.T, withPids bool) *fakeKernel {
	t.Helper()
	mi := fakeV1MountinfoBase
	if withPids {
		mi += fakeV1PidsMount
	}
	k := newFakeKernel(t, mi, fakeV1Own)
	k.cgroupDir("/sys/fs/cgroup/cpu,cpuacct/docker/abc")
	k.cgroupDir("/sys/fs/cgroup/memory")
	if withPids {
		k.cgroupDir("/sys/fs/cgroup/pids/docker/abc")
	}
	k.file("/sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n")
	k.cgroupDir("/sys/fs/cgroup/unified")
	k.file("/sys/fs/cgroup/unified/docker/abc/cgroup.controllers", "hugetlb\n")
	k.cgroupDir("/sys/fs/cgroup/unified/docker/abc")
	return k
}

func TestFakeV1Detect(t *testing.T) {
	k := newFakeV1(t, true)
	in, err := k.sysfs().info()
	if err != nil {
		t.Fatal(err)
	}
	if in.Version != V1 {
		t.Errorf("Version = %v, want v1 (the cgroup2 mount offers only hugetlb)", in.Version)
	}
	wantRoots := map[string]string{
		"cpu":     k.abs("/sys/fs/cgroup/cpu,cpuacct/docker/abc"),
		"cpuacct": k.abs("/sys/fs/cgroup/cpu,cpuacct/docker/abc"),
		"memory":  k.abs("/sys/fs/cgroup/memory"),
		"pids":    k.abs("/sys/fs/cgroup/pids/docker/abc"),
	}
	for c, want := range wantRoots {
		if in.Roots[c] != want {
			t.Errorf("Roots[%s] = %q, want %q", c, in.Roots[c], want)
		}
	}
	for _, c := range limitControllers {
		if !in.Controllers[c] {
			t.Errorf("Controllers[%s] = false: %s", c, in.Reasons[c])
		}
	}
	if in.Unified != k.abs("/sys/fs/cgroup/unified/docker/abc") {
		t.Errorf("Unified = %q", in.Unified)
	}
}

func TestFakeV1New(t *testing.T) {
	cpuDir := "/sys/fs/cgroup/cpu,cpuacct/docker/abc/proctor-1-a"
	memDir := "/sys/fs/cgroup/memory/proctor-1-a"
	pidsDir := "/sys/fs/cgroup/pids/docker/abc/proctor-1-a"
	tests := []struct {
		name      string
		lim       Limits
		wantPaths []string
		wantFiles map[string]string
	}{
		{
			name:      "all limits",
			lim:       Limits{MemoryBytes: 32 << 20, Pids: 8, CPUs: 0.5},
			wantPaths: []string{cpuDir, memDir, pidsDir},
			wantFiles: map[string]string{
				memDir + "/memory.limit_in_bytes":       "33554432",
				memDir + "/memory.memsw.limit_in_bytes": "33554432",
				memDir + "/memory.swappiness":           "0",
				pidsDir + "/pids.max":                   "8",
				cpuDir + "/cpu.cfs_period_us":           "100000",
				cpuDir + "/cpu.cfs_quota_us":            "50000",
			},
		},
		{
			name:      "memory only gets cpuacct for usage",
			lim:       Limits{MemoryBytes: 1 << 30},
			wantPaths: []string{memDir, cpuDir},
			wantFiles: map[string]string{memDir + "/memory.limit_in_bytes": "1073741824", cpuDir + "/cpu.cfs_quota_us": "-1\n"},
		},
		{
			name:      "no limits tracks in pids",
			lim:       Limits{},
			wantPaths: []string{pidsDir, cpuDir},
			wantFiles: map[string]string{pidsDir + "/pids.max": "max\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeV1(t, true)
			g, err := k.sysfs().newGroup("proctor-1-a", tt.lim)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, p := range tt.wantPaths {
				want = append(want, k.abs(p))
			}
			if got := g.Paths(); !slices.Equal(got, want) {
				t.Fatalf("Paths = %q, want %q", got, want)
			}
			if g.Version() != V1 {
				t.Errorf("Version = %v", g.Version())
			}
			for p, want := range tt.wantFiles {
				if got := k.read(k.abs(p)); got != want {
					t.Errorf("%s = %q, want %q", p, got, want)
				}
			}
			if err := g.AddProc(4242); err != nil {
				t.Fatal(err)
			}
			for _, p := range g.Paths() {
				if got := k.read(filepath.Join(p, "cgroup.procs")); got != "4242\n" {
					t.Errorf("%s/cgroup.procs = %q", p, got)
				}
				// Let Destroy succeed: the fake has no real process.
				k.file(filepath.Join(p, "cgroup.procs")[len(k.root):], "")
			}
			st, err := g.Stats()
			if err != nil || st != (Stats{}) {
				t.Errorf("Stats = %+v, %v", st, err)
			}
			if err := g.Destroy(); err != nil {
				t.Fatal(err)
			}
			for _, p := range g.Paths() {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("%s still exists: %v", p, err)
				}
			}
		})
	}
}

func TestFakeV1Stats(t *testing.T) {
	k := newFakeV1(t, true)
	g, err := k.sysfs().newGroup("proctor-1-a", Limits{MemoryBytes: 1 << 20, Pids: 8})
	if err != nil {
		t.Fatal(err)
	}
	k.file("/sys/fs/cgroup/memory/proctor-1-a/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n")
	k.file("/sys/fs/cgroup/memory/proctor-1-a/memory.max_usage_in_bytes", "1048576\n")
	k.file("/sys/fs/cgroup/pids/docker/abc/proctor-1-a/pids.events", "max 3\n")
	k.file("/sys/fs/cgroup/cpu,cpuacct/docker/abc/proctor-1-a/cpuacct.usage", "987654321\n")
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{OOMKills: 4, PidsLimitHits: 3, MemoryPeakBytes: 1 << 20, CPUUsageNs: 987654321}
	if st != want {
		t.Fatalf("Stats = %+v, want %+v", st, want)
	}
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
}

func TestFakeV1MissingCreatesNothing(t *testing.T) {
	tests := []struct {
		name string
		lim  Limits
		want []string
	}{
		{"pids", Limits{Pids: 8}, []string{"pids"}},
		{"pids with others available", Limits{MemoryBytes: 1 << 20, Pids: 8, CPUs: 1}, []string{"pids"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := newFakeV1(t, false)
			before := k.snapshot()
			_, err := k.sysfs().newGroup("proctor-1-a", tt.lim)
			var mc *MissingControllersError
			if !errors.As(err, &mc) || !slices.Equal(mc.Controllers, tt.want) {
				t.Fatalf("err = %v, want missing %q", err, tt.want)
			}
			k.sameTree(before)
		})
	}
}

func TestFakeV1NoWritePermission(t *testing.T) {
	k := newFakeV1(t, true)
	k.readOnly[k.abs("/sys/fs/cgroup/memory")] = true
	before := k.snapshot()
	_, err := k.sysfs().newGroup("proctor-1-a", Limits{MemoryBytes: 1 << 20, Pids: 8})
	var mc *MissingControllersError
	if !errors.As(err, &mc) || !slices.Equal(mc.Controllers, []string{"memory"}) {
		t.Fatalf("err = %v, want missing memory", err)
	}
	k.sameTree(before)
}

func TestFakeV1FailureRemovesDirectories(t *testing.T) {
	k := newFakeV1(t, true)
	k.failWrite["cpu.cfs_quota_us"] = os.ErrInvalid
	before := k.snapshot()
	if _, err := k.sysfs().newGroup("proctor-1-a", Limits{MemoryBytes: 1 << 20, Pids: 8, CPUs: 1}); !errors.Is(err, os.ErrInvalid) {
		t.Fatalf("err = %v", err)
	}
	k.sameTree(before)
}

// TestFakeV1NameTaken shows that New never adopts or removes a directory it
// did not create.
func TestFakeV1NameTaken(t *testing.T) {
	k := newFakeV1(t, true)
	k.cgroupDir("/sys/fs/cgroup/pids/docker/abc/proctor-1-a")
	k.file("/sys/fs/cgroup/pids/docker/abc/proctor-1-a/cgroup.procs", "77\n")
	before := k.snapshot()
	_, err := k.sysfs().newGroup("proctor-1-a", Limits{MemoryBytes: 1 << 20, Pids: 8, CPUs: 1})
	if !errors.Is(err, os.ErrExist) {
		t.Fatalf("err = %v, want ErrExist", err)
	}
	k.sameTree(before)
}

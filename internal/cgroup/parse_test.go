package cgroup

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestParseMountinfoLine(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		want    mountEntry
		wantErr bool
	}{
		{
			name: "v1 co-mounted cpu,cpuacct",
			line: "26 25 0:23 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:7 - cgroup cgroup rw,cpu,cpuacct",
			want: mountEntry{root: "/", mountPoint: "/sys/fs/cgroup/cpu,cpuacct", fsType: "cgroup", superOpts: []string{"rw", "cpu", "cpuacct"}},
		},
		{
			name: "v1 single controller, no optional fields",
			line: "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory",
			want: mountEntry{root: "/", mountPoint: "/sys/fs/cgroup/memory", fsType: "cgroup", superOpts: []string{"rw", "memory"}},
		},
		{
			name: "v1 named hierarchy with several optional fields",
			line: "29 25 0:26 / /sys/fs/cgroup/systemd rw,nosuid shared:9 master:2 - cgroup cgroup rw,xattr,name=systemd",
			want: mountEntry{root: "/", mountPoint: "/sys/fs/cgroup/systemd", fsType: "cgroup", superOpts: []string{"rw", "xattr", "name=systemd"}},
		},
		{
			name: "cgroup2",
			line: "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot",
			want: mountEntry{root: "/", mountPoint: "/sys/fs/cgroup", fsType: "cgroup2", superOpts: []string{"rw", "nsdelegate", "memory_recursiveprot"}},
		},
		{
			name: "bind mount of a sub-tree with escaped space",
			line: `40 30 0:26 /docker/abc /my\040cgroup rw - cgroup2 cgroup2 rw`,
			want: mountEntry{root: "/docker/abc", mountPoint: "/my cgroup", fsType: "cgroup2", superOpts: []string{"rw"}},
		},
		{name: "no separator", line: "26 25 0:23 / /sys/fs/cgroup rw shared:7 cgroup cgroup rw", wantErr: true},
		{name: "truncated after separator", line: "26 25 0:23 / /sys/fs/cgroup rw - cgroup cgroup", wantErr: true},
		{name: "bad escape", line: `26 25 0:23 / /a\04 rw - cgroup cgroup rw`, wantErr: true},
		{name: "non-octal escape", line: `26 25 0:23 / /a\09x rw - cgroup cgroup rw`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMountinfoLine(tt.line)
			if tt.wantErr {
				if !errors.Is(err, errMalformed) {
					t.Fatalf("err = %v, want errMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.root != tt.want.root || got.mountPoint != tt.want.mountPoint || got.fsType != tt.want.fsType || !slices.Equal(got.superOpts, tt.want.superOpts) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseMountinfo(t *testing.T) {
	in := "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\n" +
		"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
	got, err := parseMountinfo(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].mountPoint != "/sys/fs/cgroup/memory" {
		t.Fatalf("got %+v", got)
	}
	if _, err := parseMountinfo(strings.NewReader("garbage\n")); !errors.Is(err, errMalformed) {
		t.Fatalf("garbage: err = %v, want errMalformed", err)
	}
}

func TestV1Controllers(t *testing.T) {
	tests := []struct {
		name string
		opts string
		want []string
	}{
		{"single", "rw,memory", []string{"memory"}},
		{"co-mounted", "rw,cpu,cpuacct", []string{"cpu", "cpuacct"}},
		{"co-mounted with flags", "ro,cpuacct,cpu,clone_children,noprefix", []string{"cpuacct", "cpu"}},
		{"named only", "rw,xattr,name=systemd", nil},
		{"release agent", "rw,pids,release_agent=/x", []string{"pids"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := v1Controllers(strings.Split(tt.opts, ","))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseProcCgroup(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []procCgroupEntry
		wantErr bool
	}{
		{
			name: "pure v2",
			in:   "0::/user.slice/user-1000.slice/session-2.scope\n",
			want: []procCgroupEntry{{id: 0, path: "/user.slice/user-1000.slice/session-2.scope"}},
		},
		{
			name: "v1 hybrid",
			in:   "9:name=systemd:/\n4:memory:/process_api/eca9\n2:cpu,cpuacct:/\n0::/\n",
			want: []procCgroupEntry{
				{id: 9, controllers: []string{"name=systemd"}, path: "/"},
				{id: 4, controllers: []string{"memory"}, path: "/process_api/eca9"},
				{id: 2, controllers: []string{"cpu", "cpuacct"}, path: "/"},
				{id: 0, path: "/"},
			},
		},
		{
			name: "colon in path",
			in:   "0::/a:b/c\n",
			want: []procCgroupEntry{{id: 0, path: "/a:b/c"}},
		},
		{name: "missing field", in: "4:memory\n", wantErr: true},
		{name: "bad id", in: "x:memory:/\n", wantErr: true},
		{name: "relative path", in: "0::foo\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseProcCgroup(strings.NewReader(tt.in))
			if tt.wantErr {
				if !errors.Is(err, errMalformed) {
					t.Fatalf("err = %v, want errMalformed", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i].id != tt.want[i].id || got[i].path != tt.want[i].path || !slices.Equal(got[i].controllers, tt.want[i].controllers) {
					t.Fatalf("entry %d: got %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestKeyedValue(t *testing.T) {
	tests := []struct {
		name      string
		data, key string
		want      int64
		found     bool
		wantErr   bool
	}{
		{"v1 oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n", "oom_kill", 3, true, false},
		{"v1 oom_control before 4.13", "oom_kill_disable 0\nunder_oom 1\n", "oom_kill", 0, false, false},
		{"prefix of another key", "oom_kill_disable 1\n", "oom_kill", 0, false, false},
		{"v2 memory.events", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n", "oom_kill", 2, true, false},
		{"pids.events", "max 17\n", "max", 17, true, false},
		{"pids.events with local counter", "max 4\nmax.imposed 9\n", "max", 4, true, false},
		{"cpu.stat", "usage_usec 1234\nuser_usec 1000\n", "usage_usec", 1234, true, false},
		{"empty", "", "max", 0, false, false},
		{"not a number", "max lots\n", "max", 0, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found, err := keyedValue(tt.data, tt.key)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want || found != tt.found {
				t.Fatalf("got %d,%v, want %d,%v", got, found, tt.want, tt.found)
			}
		})
	}
}

func TestParsePids(t *testing.T) {
	got, err := parsePids("12\n345\n")
	if err != nil || !slices.Equal(got, []int{12, 345}) {
		t.Fatalf("got %v, %v", got, err)
	}
	if _, err := parsePids("12\nx\n"); !errors.Is(err, errMalformed) {
		t.Fatalf("err = %v, want errMalformed", err)
	}
}

func TestStaleOwner(t *testing.T) {
	tests := []struct {
		name string
		want int
		ok   bool
	}{
		{"proctor-123-abc", 123, true},
		{"proctor-123-a-b", 123, true},
		{"proctor-123-", 0, false},
		{"proctor-123", 0, false},
		{"proctor--x", 0, false},
		{"proctor-12a-x", 0, false},
		{"proctor-0-x", 0, false},
		{"proctor-99999999999-x", 0, false}, // not a pid_t
		{"other-123-x", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := staleOwner(tt.name)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("got %d,%v, want %d,%v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"proctor-1-ab", true},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"a\x00b", false},
		{strings.Repeat("a", 201), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validName(tt.name)
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidName)) {
				t.Fatalf("validName(%q) = %v", tt.name, err)
			}
		})
	}
}

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		name string
		lim  Limits
		ok   bool
		ctrl []string
		quot int64
	}{
		{"none", Limits{}, true, nil, 0},
		{"all", Limits{MemoryBytes: 1 << 20, Pids: 8, CPUs: 0.5}, true, []string{"cpu", "memory", "pids"}, 50000},
		{"two cpus", Limits{CPUs: 2}, true, []string{"cpu"}, 200000},
		{"smallest cpu", Limits{CPUs: 0.01}, true, []string{"cpu"}, 1000},
		{"cpu below kernel minimum", Limits{CPUs: 0.001}, false, nil, 0},
		{"negative memory", Limits{MemoryBytes: -1}, false, nil, 0},
		{"negative pids", Limits{Pids: -1}, false, nil, 0},
		{"negative cpus", Limits{CPUs: -1}, false, nil, 0},
		{"NaN cpus", Limits{CPUs: math.NaN()}, false, nil, 0},
		{"infinite cpus", Limits{CPUs: math.Inf(1)}, false, nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.lim.validate()
			if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrInvalidLimits)) {
				t.Fatalf("validate = %v", err)
			}
			if !tt.ok {
				return
			}
			if got := tt.lim.controllers(); !slices.Equal(got, tt.ctrl) {
				t.Fatalf("controllers = %q, want %q", got, tt.ctrl)
			}
			if tt.lim.CPUs > 0 && tt.lim.cpuQuota() != tt.quot {
				t.Fatalf("quota = %d, want %d", tt.lim.cpuQuota(), tt.quot)
			}
		})
	}
}

func TestMissingControllersError(t *testing.T) {
	err := error(newMissing(map[string]string{"pids": "not mounted", "cpu": ""}))
	if got, want := err.Error(), "cgroup: controllers unavailable: cpu, pids (not mounted)"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrMissingControllers) {
		t.Fatal("errors.Is(ErrMissingControllers) = false")
	}
	var mc *MissingControllersError
	if !errors.As(err, &mc) || !slices.Equal(mc.Controllers, []string{"cpu", "pids"}) {
		t.Fatalf("errors.As: %+v", mc)
	}
}

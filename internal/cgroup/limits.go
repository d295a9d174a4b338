package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cpuPeriod is the CFS period used for CPU limits, in microseconds.
const cpuPeriod = 100000

// minCPUQuota is the smallest quota the kernel accepts, in microseconds.
const minCPUQuota = 1000

// maxCPUs bounds Limits.CPUs so the quota cannot overflow.
const maxCPUs = 1 << 20

// Limits are the resource limits of one group. The zero value of each field
// means no limit. A Limits is a plain value, safe to copy.
type Limits struct {
	// MemoryBytes caps memory use; swap cannot be used to exceed it where
	// the kernel accounts swap (v1 memory.memsw.limit_in_bytes, v2
	// memory.swap.max=0).
	MemoryBytes int64
	// Pids caps the number of tasks (threads included) in the group.
	Pids int64
	// CPUs caps CPU time, in CPUs' worth: 0.5 is half of one CPU.
	CPUs float64
	// CPUSet confines the group to these CPUs (the cpuset controller), a
	// list such as "1" or "0-1,4", each CPU below maxCPUSet. On v1 the
	// group's memory nodes are its parent's.
	CPUSet string
}

// maxCPUSet bounds the CPU numbers of a CPUSet.
const maxCPUSet = 4096

// ParseCPUSet reads a CPU list ("0-1,4") into the CPUs it names, sorted.
func ParseCPUSet(s string) ([]int, error) {
	if s == "" {
		return nil, fmt.Errorf("%w: empty cpu list", ErrInvalidLimits)
	}
	seen := map[int]bool{}
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		if err1 != nil || err2 != nil || a < 0 || b < a || b >= maxCPUSet || lo != strconv.Itoa(a) || (isRange && hi != strconv.Itoa(b)) {
			return nil, fmt.Errorf("%w: cpu list %q: want numbers and ranges such as \"0-1,4\"", ErrInvalidLimits, s)
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	out := make([]int, 0, len(seen))
	for c := range seen {
		out = append(out, c)
	}
	slices.Sort(out)
	return out, nil
}

func (l Limits) validate() error {
	if l.MemoryBytes < 0 {
		return fmt.Errorf("%w: memory %d bytes", ErrInvalidLimits, l.MemoryBytes)
	}
	if l.Pids < 0 {
		return fmt.Errorf("%w: pids %d", ErrInvalidLimits, l.Pids)
	}
	if math.IsNaN(l.CPUs) || l.CPUs < 0 || l.CPUs > maxCPUs {
		return fmt.Errorf("%w: cpus %v", ErrInvalidLimits, l.CPUs)
	}
	if l.CPUs > 0 && l.cpuQuota() < minCPUQuota {
		return fmt.Errorf("%w: cpus %v is below the kernel's minimum of %v", ErrInvalidLimits, l.CPUs, float64(minCPUQuota)/cpuPeriod)
	}
	if l.CPUSet != "" {
		if _, err := ParseCPUSet(l.CPUSet); err != nil {
			return err
		}
	}
	return nil
}

func (l Limits) cpuQuota() int64 { return int64(math.Round(l.CPUs * cpuPeriod)) }

// controllers returns the controllers the limits need, sorted.
func (l Limits) controllers() []string {
	var out []string
	if l.CPUs > 0 {
		out = append(out, "cpu")
	}
	if l.CPUSet != "" {
		out = append(out, "cpuset")
	}
	if l.MemoryBytes > 0 {
		out = append(out, "memory")
	}
	if l.Pids > 0 {
		out = append(out, "pids")
	}
	return out
}

// apply writes the limits into the group's directories. The caller removes
// the group if it fails.
func (g *Group) apply(lim Limits) error {
	if lim.MemoryBytes > 0 {
		if err := g.applyMemory(lim.MemoryBytes); err != nil {
			return fmt.Errorf("setting memory limit: %w", err)
		}
	}
	if lim.Pids > 0 {
		m, ok := g.memberFor("pids")
		if !ok {
			return fmt.Errorf("setting pids limit: %w", errNoMember)
		}
		if err := g.fs.write(filepath.Join(m.dir, "pids.max"), strconv.FormatInt(lim.Pids, 10)); err != nil {
			return fmt.Errorf("setting pids limit: %w", err)
		}
	}
	if lim.CPUs > 0 {
		if err := g.applyCPU(lim.cpuQuota()); err != nil {
			return fmt.Errorf("setting cpu limit: %w", err)
		}
	}
	if lim.CPUSet != "" {
		if err := g.applyCPUSet(lim.CPUSet); err != nil {
			return fmt.Errorf("setting cpuset %s: %w", lim.CPUSet, err)
		}
	}
	return nil
}

// applyCPUSet confines the group to cpus. A v1 cpuset starts with no CPU
// and no memory node, and takes no process until both are set: the nodes
// are copied from the parent.
func (g *Group) applyCPUSet(cpus string) error {
	m, ok := g.memberFor("cpuset")
	if !ok {
		return errNoMember
	}
	if m.version == V1 {
		mems, found, err := readOptional(filepath.Join(filepath.Dir(m.dir), "cpuset.mems"))
		if err == nil && !found {
			err = fs.ErrNotExist
		}
		if err != nil {
			return fmt.Errorf("reading the parent's memory nodes: %w", err)
		}
		if err := g.fs.write(filepath.Join(m.dir, "cpuset.mems"), strings.TrimSpace(mems)); err != nil {
			return err
		}
	}
	return g.fs.write(filepath.Join(m.dir, "cpuset.cpus"), cpus)
}

var errNoMember = errors.New("no directory holds the controller")

func (g *Group) applyMemory(n int64) error {
	m, ok := g.memberFor("memory")
	if !ok {
		return errNoMember
	}
	v := strconv.FormatInt(n, 10)
	if m.version == V2 {
		if err := g.fs.write(filepath.Join(m.dir, "memory.max"), v); err != nil {
			return err
		}
		// Without swap accounting the file is absent and there is no swap
		// limit to set.
		return g.writeIfExists(filepath.Join(m.dir, "memory.swap.max"), "0")
	}
	// memory.memsw.limit_in_bytes may never be below limit_in_bytes, so the
	// plain limit goes first.
	if err := g.fs.write(filepath.Join(m.dir, "memory.limit_in_bytes"), v); err != nil {
		return err
	}
	if err := g.writeIfExists(filepath.Join(m.dir, "memory.memsw.limit_in_bytes"), v); err != nil {
		return err
	}
	// Swappiness only tunes reclaim; failing to set it weakens nothing.
	_ = g.writeIfExists(filepath.Join(m.dir, "memory.swappiness"), "0")
	return nil
}

func (g *Group) applyCPU(quota int64) error {
	m, ok := g.memberFor("cpu")
	if !ok {
		return errNoMember
	}
	q := strconv.FormatInt(quota, 10)
	p := strconv.Itoa(cpuPeriod)
	if m.version == V2 {
		return g.fs.write(filepath.Join(m.dir, "cpu.max"), q+" "+p)
	}
	if err := g.fs.write(filepath.Join(m.dir, "cpu.cfs_period_us"), p); err != nil {
		return err
	}
	return g.fs.write(filepath.Join(m.dir, "cpu.cfs_quota_us"), q)
}

// writeIfExists writes data to path unless path does not exist.
func (g *Group) writeIfExists(path, data string) error {
	err := g.fs.write(path, data)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

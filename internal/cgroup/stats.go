package cgroup

import (
	"fmt"
	"path/filepath"
	"slices"
)

// Stats is what the group's controllers counted. Counters the kernel does not
// provide here are 0. A Stats is a plain value.
type Stats struct {
	OOMKills        int64 // processes killed by the OOM killer for the memory limit
	PidsLimitHits   int64 // forks refused because of the pids limit
	MemoryPeakBytes int64 // highest memory use seen
	CPUUsageNs      int64 // CPU time used; 0 on v1 without cpuacct
}

// Stats reads the group's counters: on v1 memory.oom_control (oom_kill),
// memory.max_usage_in_bytes, pids.events (max) and cpuacct.usage; on v2
// memory.events (oom_kill), memory.peak, pids.events (max) and cpu.stat
// (usage_usec).
func (g *Group) Stats() (Stats, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.destroyed {
		return Stats{}, ErrDestroyed
	}
	var st Stats
	for _, m := range g.members {
		var err error
		if m.version == V2 {
			err = m.statsV2(&st)
		} else {
			err = m.statsV1(&st)
		}
		if err != nil {
			return Stats{}, fmt.Errorf("reading stats of cgroup %s: %w", m.dir, err)
		}
	}
	return st, nil
}

// statsV2 reads every counter whose file exists: a controller enabled by
// someone else still counts.
func (m member) statsV2(st *Stats) error {
	if err := keyedFile(m.dir, "memory.events", "oom_kill", &st.OOMKills); err != nil {
		return err
	}
	if err := keyedFile(m.dir, "pids.events", "max", &st.PidsLimitHits); err != nil {
		return err
	}
	if err := intFile(m.dir, "memory.peak", &st.MemoryPeakBytes); err != nil {
		return err
	}
	var usec int64
	if err := keyedFile(m.dir, "cpu.stat", "usage_usec", &usec); err != nil {
		return err
	}
	if usec > 0 {
		st.CPUUsageNs = usec * 1000
	}
	return nil
}

func (m member) statsV1(st *Stats) error {
	if slices.Contains(m.controllers, "memory") {
		if err := keyedFile(m.dir, "memory.oom_control", "oom_kill", &st.OOMKills); err != nil {
			return err
		}
		if err := intFile(m.dir, "memory.max_usage_in_bytes", &st.MemoryPeakBytes); err != nil {
			return err
		}
	}
	if slices.Contains(m.controllers, "pids") {
		if err := keyedFile(m.dir, "pids.events", "max", &st.PidsLimitHits); err != nil {
			return err
		}
	}
	if slices.Contains(m.controllers, "cpuacct") {
		if err := intFile(m.dir, "cpuacct.usage", &st.CPUUsageNs); err != nil {
			return err
		}
	}
	return nil
}

// keyedFile sets *dst from key in a flat-keyed file, if both exist.
func keyedFile(dir, file, key string, dst *int64) error {
	data, found, err := readOptional(filepath.Join(dir, file))
	if err != nil || !found {
		return err
	}
	v, ok, err := keyedValue(data, key)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if ok {
		*dst = v
	}
	return nil
}

// intFile sets *dst from a single-value file, if it exists.
func intFile(dir, file string, dst *int64) error {
	data, found, err := readOptional(filepath.Join(dir, file))
	if err != nil || !found {
		return err
	}
	v, err := parseInt(data)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	*dst = v
	return nil
}

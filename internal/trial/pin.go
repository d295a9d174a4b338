package trial

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/proctor-sandbox/proctor/internal/cgroup"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

// PinnedDefaults are the variables every phase of every trial gets unless
// the environment, the task or its pinned_env says otherwise: the same time
// zone and locale wherever the harness runs.
var PinnedDefaults = map[string]string{"TZ": "UTC", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}

// PinnedRef is what the trial pinned, so that a run under the same inputs
// sees the same machine: the variables of the pinned names as the phases
// got them, the fixed identity and file mode mask every sandbox has, the
// task's CPU and memory limits, the CPUs of its own (a cpuset, when the
// runner gave one) and a time namespace whose clocks start at zero.
// Unpinned names what this host could not give, and why; such a trial is
// still run and graded.
type PinnedRef struct {
	Env           map[string]string `json:"env"`
	Hostname      string            `json:"hostname"`
	UID           int               `json:"uid"`
	GID           int               `json:"gid"`
	Umask         string            `json:"umask"`
	CPUs          float64           `json:"cpus"`
	MemoryBytes   int64             `json:"memory_bytes"`
	CPUSet        string            `json:"cpuset"`
	TimeNamespace bool              `json:"time_namespace"`
	Unpinned      []string          `json:"unpinned"`
}

// pinned returns the verdict's record of what the trial pins, before any
// phase ran (phases add to Unpinned).
func (r *runner) pinned() *PinnedRef {
	env := r.envMap(nil)
	p := &PinnedRef{Env: map[string]string{}, Hostname: "proctor", Umask: "0022",
		CPUs: r.o.Task.Environment.CPUs, MemoryBytes: r.o.Task.Environment.MemoryMB << 20,
		CPUSet: r.o.CPUSet, TimeNamespace: true, Unpinned: []string{}}
	for k := range maps.Keys(PinnedDefaults) {
		p.Env[k] = env[k]
	}
	for k := range r.o.Task.Proctor.PinnedEnv {
		p.Env[k] = env[k]
	}
	p.Env["HOME"] = "/root"
	if h, ok := env["HOME"]; ok {
		p.Env["HOME"] = h
	}
	if r.o.CPUSet == "" {
		p.Unpinned = append(p.Unpinned, "cpuset: no CPUs of its own were given (proctor bench gives each concurrent trial its own when --jobs is at most the number of CPUs; proctor run --cpuset)")
	}
	return p
}

// pin is the sandbox's part of the pinning, for every phase.
func (r *runner) pin() sandbox.Pin {
	return sandbox.Pin{TimeNS: true, CPUSet: r.o.CPUSet}
}

// notePinned adds what a phase's sandbox could not pin to the verdict.
func (r *runner) notePinned(phase string, res *sandbox.Result) {
	if res == nil || r.v.Pinned == nil {
		return
	}
	for _, u := range res.Unpinned {
		if !slices.Contains(r.v.Pinned.Unpinned, u) {
			r.v.Pinned.Unpinned = append(r.v.Pinned.Unpinned, u)
			r.say("%s: not pinned: %s", phase, u)
		}
		switch {
		case strings.HasPrefix(u, "time namespace:"):
			r.v.Pinned.TimeNamespace = false
		case strings.HasPrefix(u, "cpuset:"):
			r.v.Pinned.CPUSet = ""
		}
	}
}

// checkCPUSet checks a cpuset option before anything runs.
func checkCPUSet(s string) error {
	if s == "" {
		return nil
	}
	if _, err := cgroup.ParseCPUSet(s); err != nil {
		return fmt.Errorf("cpuset: %w", err)
	}
	return nil
}

package suite

import (
	"slices"
	"testing"
)

func TestJobsFor(t *testing.T) {
	for _, c := range []struct {
		ncpu    int
		availMB int64
		cpus    float64
		memMB   int64
		want    int
	}{
		{2, 24000, 1, 2048, 2},   // CPUs bound
		{2, 24000, 0.5, 2048, 2}, // half-CPU tasks: still one per CPU (the harness works too)
		{16, 4000, 1, 2048, 1},   // memory bound: 3600/2048
		{2, 24000, 4, 2048, 1},   // a task wants more CPUs than there are
		{8, 0, 1, 2048, 8},       // memory unknown
		{8, 100000, 0, 0, 8},     // no limits: one per CPU
	} {
		if got := jobsFor(c.ncpu, c.availMB, c.cpus, c.memMB); got != c.want {
			t.Errorf("jobsFor(%d CPUs, %d MB, %g, %d MB) = %d, want %d", c.ncpu, c.availMB, c.cpus, c.memMB, got, c.want)
		}
	}
}

func TestSplitCPUs(t *testing.T) {
	for _, c := range []struct {
		cpus []int
		jobs int
		want []string
	}{
		{[]int{0, 1}, 2, []string{"0", "1"}},
		{[]int{0, 1}, 1, []string{"0,1"}},
		{[]int{0, 1}, 3, []string{"", "", ""}},
		{[]int{0, 1, 2, 3, 4}, 2, []string{"0,1", "2,3,4"}},
		{[]int{2, 5, 7}, 3, []string{"2", "5", "7"}},
	} {
		if got := splitCPUs(c.cpus, c.jobs); !slices.Equal(got, c.want) {
			t.Errorf("splitCPUs(%v, %d) = %q, want %q", c.cpus, c.jobs, got, c.want)
		}
	}
}

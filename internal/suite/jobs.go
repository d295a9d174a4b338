package suite

import (
	"bufio"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// DefaultJobs is how many trials may run at once on this machine: no more
// than one per CPU (the harness works too), as many as the CPUs hold at
// the largest task's CPU limit, and as the memory
// available holds at the largest task's memory limit (each trial's agent
// and grader run one after the other, so one trial holds one limit at a
// time), at least one.
func DefaultJobs(maxCPUs float64, maxMemoryMB int64) int {
	return jobsFor(runtime.NumCPU(), memAvailableMB(), maxCPUs, maxMemoryMB)
}

func jobsFor(ncpu int, availMB int64, maxCPUs float64, maxMemoryMB int64) int {
	j := ncpu
	if maxCPUs > 0 {
		j = min(j, int(math.Floor(float64(ncpu)/maxCPUs)))
	}
	if maxMemoryMB > 0 && availMB > 0 {
		// Keep a tenth of the memory for the host and the harness.
		j = min(j, int(availMB*9/10/maxMemoryMB))
	}
	return max(j, 1)
}

// memAvailableMB reads MemAvailable from /proc/meminfo (0 if unknown).
func memAvailableMB() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}

// slotCPUSets gives each of jobs slots CPUs of its own, as cpuset lists,
// when there are at least as many CPUs this process may run on as jobs: the
// CPUs in order, split as evenly as they go. With more jobs than CPUs every
// slot shares them all (""), and each trial's verdict says it was not
// pinned to CPUs of its own.
func slotCPUSets(jobs int) []string {
	out := make([]string, jobs)
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return out
	}
	var cpus []int
	for c := 0; c < len(set)*64 && len(cpus) < set.Count(); c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return splitCPUs(cpus, jobs)
}

// splitCPUs splits cpus among jobs slots, "" for each when there are fewer
// CPUs than slots.
func splitCPUs(cpus []int, jobs int) []string {
	out := make([]string, jobs)
	if len(cpus) < jobs || jobs == 0 {
		return out
	}
	for i := range jobs {
		var b strings.Builder
		for j, c := range cpus[i*len(cpus)/jobs : (i+1)*len(cpus)/jobs] {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(c))
		}
		out[i] = b.String()
	}
	return out
}

package cgroup

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests create real cgroups. They run on cgroup v1 (CI) and v2 alike.

func TestIntegrationDetect(t *testing.T) {
	in := requireCgroups(t)
	if in.Version == 0 {
		t.Fatal("Version = 0 on a machine with cgroups")
	}
	self := strconv.Itoa(os.Getpid())
	for c, root := range in.Roots {
		// The root must be the caller's own cgroup: it lists us.
		procs := strings.Fields(readTrim(t, filepath.Join(root, "cgroup.procs")))
		if !slices.Contains(procs, self) {
			t.Errorf("Roots[%s] = %s does not hold this process", c, root)
		}
	}
	t.Logf("detected %s: controllers %v roots %v unified %q", in.Version, in.Controllers, in.Roots, in.Unified)
}

func TestIntegrationMemoryOOM(t *testing.T) {
	requireCgroups(t, "memory")
	const limit = 32 << 20
	g := newTestGroup(t, Limits{MemoryBytes: limit})
	dir := memoryDir(t, g)
	if g.Version() == V1 {
		if got := readInt(t, filepath.Join(dir, "memory.limit_in_bytes")); got != limit {
			t.Errorf("memory.limit_in_bytes = %d", got)
		}
		if p := filepath.Join(dir, "memory.memsw.limit_in_bytes"); exists(p) {
			if got := readInt(t, p); got != limit {
				t.Errorf("memory.memsw.limit_in_bytes = %d", got)
			}
		}
	} else if got := readInt(t, filepath.Join(dir, "memory.max")); got != limit {
		t.Errorf("memory.max = %d", got)
	}

	c := startBlocked(t, g, "", "alloc")
	c.release(t)
	ps := c.wait(t, 60*time.Second)
	if !killedBy(ps, syscall.SIGKILL) {
		t.Fatalf("child ended with %v, want SIGKILL; output: %s", ps, c.output())
	}
	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.OOMKills < 1 {
		t.Errorf("Stats().OOMKills = %d, want > 0 (%+v)", st.OOMKills, st)
	}
	// The kernel may overshoot by a charge batch before reclaiming; the
	// peak must still be nowhere near the 200 MiB the child touched.
	if st.MemoryPeakBytes <= 0 || st.MemoryPeakBytes > limit+limit/8 {
		t.Errorf("Stats().MemoryPeakBytes = %d, want in (0, %d]", st.MemoryPeakBytes, limit+limit/8)
	}
	t.Logf("stats: %+v", st)
}

func memoryDir(t *testing.T, g *Group) string {
	t.Helper()
	m, ok := g.memberFor("memory")
	if !ok {
		t.Fatal("group has no memory directory")
	}
	return m.dir
}

func TestIntegrationPids(t *testing.T) {
	requireCgroups(t, "pids")
	adoptOrphans(t)
	const limit = 8
	g := newTestGroup(t, Limits{Pids: limit})
	// A single-threaded shell: a Go child's own threads would count too.
	c := startBlocked(t, g, "/bin/sh", "-c",
		`read x; i=0; while [ $i -lt 20 ]; do sleep 30 & i=$((i+1)); done; echo all started`)
	c.release(t)
	c.wait(t, 30*time.Second) // the shell ends (fork failure is fatal to it, or the loop ends)

	st, err := g.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.PidsLimitHits < 1 {
		t.Errorf("Stats().PidsLimitHits = %d, want > 0; output: %s", st.PidsLimitHits, c.output())
	}
	g.mu.Lock()
	pids, err := g.procs()
	g.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	// The shell took one slot and has exited: its sleeps filled the rest.
	if len(pids) > limit || len(pids) < limit-1 {
		t.Errorf("%d processes in the group, want %d or %d: %v", len(pids), limit-1, limit, pids)
	}
	m, _ := g.memberFor("pids")
	if p := filepath.Join(m.dir, "pids.peak"); exists(p) {
		if peak := readInt(t, p); peak > limit {
			t.Errorf("pids.peak = %d, over the limit %d", peak, limit)
		}
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	reapOrphans(pids, 5*time.Second)
	for _, p := range pids {
		if alive(p) {
			t.Errorf("pid %d alive after Kill", p)
		}
	}
}

func TestIntegrationCPU(t *testing.T) {
	requireCgroups(t, "cpu")
	g := newTestGroup(t, Limits{CPUs: 0.5})
	m, ok := g.memberFor("cpu")
	if !ok {
		t.Fatal("group has no cpu directory")
	}
	if m.version == V1 {
		if got := readTrim(t, filepath.Join(m.dir, "cpu.cfs_quota_us")); got != "50000" {
			t.Errorf("cpu.cfs_quota_us = %q, want 50000", got)
		}
		if got := readTrim(t, filepath.Join(m.dir, "cpu.cfs_period_us")); got != "100000" {
			t.Errorf("cpu.cfs_period_us = %q, want 100000", got)
		}
	} else if got := readTrim(t, filepath.Join(m.dir, "cpu.max")); got != "50000 100000" {
		t.Errorf("cpu.max = %q, want \"50000 100000\"", got)
	}
}

// killScenario puts stubborn process trees in g, kills and destroys it, and
// checks nothing survives and nothing is left behind.
func killScenario(t *testing.T, g *Group) {
	t.Helper()
	children := []*child{
		// Ignores SIGTERM (the Go runtime, multithreaded).
		startBlocked(t, g, "", "ignore-term"),
		// Ignores SIGTERM, and so does its sleep (SIG_IGN survives exec).
		startBlocked(t, g, "/bin/sh", "-c", `trap "" TERM; read x; sleep 60`),
		// Double fork: the sleep is orphaned and leaves our process tree.
		startBlocked(t, g, "/bin/sh", "-c", `read x; (sleep 60 &); (setsid sleep 60 &); exit 0`),
		// Keeps forking orphans while Kill runs.
		startBlocked(t, g, "/bin/sh", "-c", `read x; while :; do (sleep 60 &); done`),
	}
	for _, c := range children {
		c.release(t)
	}
	var pids []int
	deadline := time.Now().Add(10 * time.Second)
	for {
		g.mu.Lock()
		p, err := g.procs()
		g.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		pids = p
		// 2 + 2 (sh and its sleep) + 2 orphans + the loop and its orphans.
		if len(pids) >= 10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(pids) < 10 {
		t.Fatalf("only %d processes in the group: %v", len(pids), pids)
	}
	if err := g.Kill(); err != nil {
		t.Fatal(err)
	}
	for i, c := range children {
		if ps := c.wait(t, 10*time.Second); i != 2 && !killedBy(ps, syscall.SIGKILL) {
			t.Errorf("child %d ended with %v, want SIGKILL", i, ps)
		}
	}
	paths := g.Paths()
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	reapOrphans(pids, 5*time.Second)
	for _, p := range pids {
		if alive(p) {
			t.Errorf("pid %d survived Kill", p)
		}
	}
	for _, p := range paths {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", p, err)
		}
	}
	if err := g.Destroy(); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
}

func TestIntegrationKill(t *testing.T) {
	requireCgroups(t, "memory", "pids")
	adoptOrphans(t)
	// Limits make it the same kind of group a sandbox gets; the pids limit
	// keeps the forking loop bounded.
	g := newTestGroup(t, Limits{MemoryBytes: 256 << 20, Pids: 200})
	killScenario(t, g)
}

// TestIntegrationUnifiedKill runs the v2 code paths (cgroup.kill, rmdir,
// cpu.stat) on a real cgroup2 hierarchy, even where, as on hybrid CI
// machines, that hierarchy has no controller to limit anything with.
func TestIntegrationUnifiedKill(t *testing.T) {
	in := requireCgroups(t)
	if in.Unified == "" || !canWrite(in.Unified) {
		skipOrFail(t, "needs a writable cgroup2 hierarchy")
	}
	adoptOrphans(t)
	s := hostFS()
	g, err := s.create(UniqueName(), []target{{version: V2, parent: in.Unified}}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = g.Destroy() })
	if g.Version() != V2 {
		t.Fatalf("Version = %v", g.Version())
	}
	killScenario(t, g)
}

func TestIntegrationCleanStale(t *testing.T) {
	in := requireCgroups(t)
	parents := map[string]bool{}
	for _, r := range in.Roots {
		parents[r] = true
	}
	if len(parents) == 0 {
		t.Fatal("no roots")
	}
	// Unique suffixes: other runs of this test may share these parents.
	// 999999999 is above any pid_max, so never a running process.
	suffix := UniqueName()
	var stale, mine []string
	for p := range parents {
		s := filepath.Join(p, "proctor-999999999-"+suffix)
		m := filepath.Join(p, "proctor-"+strconv.Itoa(os.Getpid())+"-"+suffix)
		for _, d := range []string{s, m} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = rmdirPath(d) })
		}
		stale = append(stale, s)
		mine = append(mine, m)
	}
	n, err := CleanStale()
	if err != nil {
		t.Fatal(err)
	}
	// A concurrent run's CleanStale may have removed some of ours first,
	// so the count is checked exactly only in TestFakeV2CleanStale.
	t.Logf("CleanStale removed %d", n)
	for _, d := range stale {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s not removed: %v", d, err)
		}
	}
	for _, d := range mine {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s of a running process removed: %v", d, err)
		}
	}
}

// TestIntegrationKillNested checks that processes in cgroups below the group
// (which a delegated sandbox could create) are killed and those cgroups
// removed.
func TestIntegrationKillNested(t *testing.T) {
	requireCgroups(t, "pids")
	adoptOrphans(t)
	g := newTestGroup(t, Limits{Pids: 50})
	c := startBlocked(t, g, "/bin/sh", "-c", `read x; (sleep 60 &); exec sleep 60`)
	for _, p := range g.Paths() {
		sub := filepath.Join(p, "nested")
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := writeFile(filepath.Join(sub, "cgroup.procs"), strconv.Itoa(c.cmd.Process.Pid)); err != nil {
			t.Fatal(err)
		}
		if got := readTrim(t, filepath.Join(p, "cgroup.procs")); got != "" {
			t.Fatalf("%s/cgroup.procs = %q after moving the child down", p, got)
		}
	}
	c.release(t)
	var pids []int
	for start := time.Now(); len(pids) < 2 && time.Since(start) < 10*time.Second; time.Sleep(10 * time.Millisecond) {
		g.mu.Lock()
		pids, _ = g.procs()
		g.mu.Unlock()
	}
	if len(pids) < 2 {
		t.Fatalf("processes in nested cgroup not found: %v", pids)
	}
	paths := g.Paths()
	if err := g.Destroy(); err != nil {
		t.Fatal(err)
	}
	if ps := c.wait(t, 10*time.Second); !killedBy(ps, syscall.SIGKILL) {
		t.Errorf("child ended with %v", ps)
	}
	reapOrphans(pids, 5*time.Second)
	for _, p := range pids {
		if alive(p) {
			t.Errorf("pid %d survived", p)
		}
	}
	for _, p := range paths {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", p, err)
		}
	}
}

package suite_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proctor-sandbox/proctor/internal/cgroup"
	"github.com/proctor-sandbox/proctor/internal/cli"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/store"
	"github.com/proctor-sandbox/proctor/internal/suite"
)

// The test binary is proctor: the runner starts it for each trial, and the
// tests start it as `proctor bench` to kill it.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == sandbox.InitCommand || os.Args[1] == "run" || os.Args[1] == "bench" || os.Args[1] == "worker" || os.Args[1] == "report" || os.Args[1] == "cluster") {
		os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("PROCTOR_NO_SKIP") != "" || os.Getenv("CI") == "true" {
		t.Fatal("cannot run here: needs root (under CI a skipped test is a failure)")
	}
	t.Skip("needs root: proctor run does")
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func cacheDir(t *testing.T) string {
	if d := os.Getenv("PROCTOR_TEST_CACHE"); d != "" {
		return d
	}
	return t.TempDir()
}

// bench runs `proctor bench args` as a child process.
func bench(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], append([]string{"bench"}, args...)...)
	cmd.Env = append(os.Environ(), "CI=") // the child is proctor, not a test
	return cmd
}

func bundles(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	paths, _ := filepath.Glob(filepath.Join(dir, "trials", "*", "*", "*", "bundle.json"))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		m[p] = hex.EncodeToString(sum[:])
	}
	return m
}

// Killed with SIGKILL in the middle of a suite, the runner leaves no process
// and, once resumed, no mount of its own; the resume loses no finished trial
// and runs none twice to completion.
func TestKillAndResume(t *testing.T) {
	requireRoot(t)
	preexisting := deadLeftovers(t)
	dir := filepath.Join(t.TempDir(), "suite")
	tasks := filepath.Join(repoRoot(), "examples", "tasks", "py-bugfix")
	agents := filepath.Join(repoRoot(), "examples", "agents")
	args := []string{"--tasks", tasks, "--agent", "honest=sh /agent/honest.sh", "--agent", "nop=sleep 0.3",
		"--agent-dir", agents, "--trials", "4", "--jobs", "2", "--out", dir, "--cache-dir", cacheDir(t), "-q"}
	cmd := bench(args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill once some trials are done and others run.
	deadline := time.Now().Add(2 * time.Minute)
	for len(bundles(t, dir)) < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	killed := cmd.Process.Pid
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	before := bundles(t, dir)
	if len(before) < 2 {
		t.Fatalf("the suite made %d bundles before the kill\n%s", len(before), stderr.String())
	}
	// Nothing of the killed runner runs on: its trials died with it.
	time.Sleep(200 * time.Millisecond)
	if left := processesNaming(dir); len(left) > 0 {
		t.Fatalf("processes of the killed runner live on: %v", left)
	}

	// What the kill left (the trials it cut short), for the resume to clear.
	t.Logf("left by the kill: %v", newLeftovers(t, preexisting))

	resume := bench("--resume", dir, "-q")
	out, err := resume.CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	counts, _ := st.Counts()
	if counts["done"] != 8 || counts["pending"]+counts["running"]+counts["failed"] != 0 {
		t.Fatalf("after resume: %v\n%s", counts, out)
	}
	after := bundles(t, dir)
	if len(after) != 8 {
		t.Fatalf("%d bundles after resume, want 8", len(after))
	}
	for p, sum := range before {
		if after[p] != sum {
			t.Errorf("%s was run again after it had finished", p)
		}
	}
	ts, _ := st.Trials()
	for _, tr := range ts {
		if tr.Result == nil || tr.Result.BundleSHA256 != after[filepath.Join(dir, suite.TrialDir(&tr), "bundle.json")] {
			t.Errorf("trial %s × %s #%d: the store's bundle digest is not the bundle's", tr.Agent, tr.Task, tr.Index)
		}
		if tr.Agent == "honest" && !tr.Result.Passed || tr.Agent == "nop" && tr.Result.Passed {
			t.Errorf("trial %s #%d: passed=%t", tr.Agent, tr.Index, tr.Result.Passed)
		}
	}
	// The resumed trials removed what the killed ones left: scratch
	// mounts and cgroups named after processes that are gone.
	_ = killed
	if left := newLeftovers(t, preexisting); len(left) > 0 {
		t.Errorf("left behind by the killed runner: %v", left)
	}

	// A second runner on the same directory is refused while one holds it.
	st.Close()
	holder, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	second, _ := bench("--resume", dir).CombinedOutput()
	if !strings.Contains(string(second), "in use") {
		t.Errorf("a second runner: %s", second)
	}
}

// processesNaming lists live processes whose command line holds s (a
// trial's proctor run names its output directory; an orphan would have
// been reparented, so ancestry would not find it).
func processesNaming(s string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// Ctrl-C stops a suite cleanly: exit 130, nothing left running in the
// store, and a resume finishes it.
func TestInterruptAndResume(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), "suite")
	tasks := filepath.Join(repoRoot(), "examples", "tasks", "hello-state")
	cmd := bench("--tasks", tasks, "--agent", "slow=sleep 0.5", "--trials", "6", "--jobs", "2",
		"--out", dir, "--cache-dir", cacheDir(t), "-q")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for len(bundles(t, dir)) < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("after SIGINT: %v, want exit 130\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "proctor bench --resume "+dir) {
		t.Errorf("no resume hint:\n%s", stderr.String())
	}
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	counts, _ := st.Counts()
	st.Close()
	if counts["running"] != 0 || counts["pending"] == 0 {
		t.Fatalf("after the stop: %v", counts)
	}
	if out, err := bench("--resume", dir, "-q").CombinedOutput(); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if n := len(bundles(t, dir)); n != 6 {
		t.Errorf("%d bundles after resume, want 6", n)
	}
}

var ownerPID = regexp.MustCompile(`proctor-(?:scratch-|supervisor-)?([0-9]+)-?`)

// newLeftovers lists what deadLeftovers finds now that was not in before
// (taken when the test began): a dead process's leftovers from before, say
// of an earlier session on the machine in a cgroup tree none of the test's
// runners use, are not this test's to clear.
func newLeftovers(t *testing.T, before []string) []string {
	t.Helper()
	var out []string
	for _, l := range deadLeftovers(t) {
		if !slices.Contains(before, l) {
			out = append(out, l)
		}
	}
	return out
}

// deadLeftovers lists scratch mounts and cgroups of Proctor processes that
// no longer exist.
func deadLeftovers(t *testing.T) []string {
	t.Helper()
	dead := func(name string) bool {
		m := ownerPID.FindStringSubmatch(name)
		if m == nil {
			return false
		}
		pid, _ := strconv.Atoi(m[1])
		_, err := os.Stat("/proc/" + m[1])
		return err != nil || cgroup.Zombie(pid)
	}
	var left []string
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.Contains(f[4], "proctor-scratch-") && dead(filepath.Base(f[4])) {
			left = append(left, "mount "+f[4])
		}
	}
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, root := range roots {
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if strings.Count(strings.TrimPrefix(p, root), "/") > 6 {
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), "proctor-") && dead(d.Name()) {
				left = append(left, "cgroup "+p)
			}
			return nil
		})
	}
	return left
}

// With no more jobs than CPUs, each concurrent trial runs on CPUs of its
// own: two jobs on two CPUs, each trial sees one CPU, both CPUs are used,
// and the verdicts record it.
func TestConcurrentTrialsOwnCPUs(t *testing.T) {
	requireRoot(t)
	if n := runtime.NumCPU(); n != 2 {
		t.Skipf("the check is written for 2 CPUs, this machine has %d", n)
	}
	dir := filepath.Join(t.TempDir(), "suite")
	tasks := filepath.Join(repoRoot(), "examples", "tasks", "hello-state")
	agent := `grep Cpus_allowed_list /proc/self/status; nproc; sleep 0.5`
	cmd := bench("--tasks", tasks, "--agent", "probe="+agent, "--trials", "4", "--jobs", "2", "--out", dir, "--cache-dir", cacheDir(t), "-q")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "trials", "*", "*", "*", "verdict.json"))
	if len(paths) != 4 {
		t.Fatalf("%d verdicts, want 4", len(paths))
	}
	seen := map[string]int{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var v struct {
			Pinned struct {
				CPUSet   string   `json:"cpuset"`
				Unpinned []string `json:"unpinned"`
			} `json:"pinned"`
		}
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		log, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "agent.log"))
		want := "Cpus_allowed_list:\t" + v.Pinned.CPUSet + "\n1\n"
		if v.Pinned.CPUSet == "" || len(v.Pinned.Unpinned) != 0 || string(log) != want {
			t.Errorf("%s: pinned %+v, agent saw %q (want %q)", p, v.Pinned, log, want)
		}
		seen[v.Pinned.CPUSet]++
	}
	if seen["0"] == 0 || seen["1"] == 0 {
		t.Errorf("trials ran on %v: want both CPUs used", seen)
	}
}

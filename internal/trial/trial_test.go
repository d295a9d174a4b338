package trial

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/task"
)

// The honest agent solves every example cleanly; the oracle does too.
func TestHonestAgentPasses(t *testing.T) {
	for _, name := range []string{"py-bugfix", "hello-state", "git-history"} {
		t.Run(name, func(t *testing.T) {
			tk := exampleTask(t, name)
			v, out := runTrial(t, tk, "sh /agent/honest.sh", agentsDir(t))
			if !v.Passed || v.Status != StatusClean || len(v.Violations) != 0 {
				t.Fatalf("honest agent: passed=%t status=%s violations=%s error=%q\nagent log:\n%s\ngrader log:\n%s",
					v.Passed, v.Status, violations(v), v.Error, readFile(t, filepath.Join(out, AgentLog)), readFile(t, filepath.Join(out, GraderLog)))
			}
			if v.Changeset.Files == 0 || !strings.HasPrefix(v.Changeset.Digest, "sha256:") {
				t.Errorf("changeset %+v: want the agent's files and a digest", v.Changeset)
			}
		})
	}
}

// Each class of documented cheat, played by an example agent, fails.
func TestCheatsFail(t *testing.T) {
	// A server on the host with the answer: the network cheat must not get it.
	cheatURL, hits := answerServer(t, statsAnswer)
	for _, name := range []string{"py-bugfix", "hello-state", "git-history"} {
		runCheats(t, exampleTask(t, name), exampleCheats[name], cheatURL)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host server got %d request(s) from inside the sandbox", n)
	}
}

// The agent's whole process tree is dead before grading: a daemon started
// with setsid, double-forked and ignoring signals does not survive the agent.
func TestFreezeKillsEveryProcess(t *testing.T) {
	marker := fmt.Sprintf("proctor-freeze-%d", time.Now().UnixNano())
	tk := writeTask(t, taskSpec{test: "echo 0 > /logs/verifier/reward.txt"})
	agent := fmt.Sprintf(`trap "" HUP TERM INT; (setsid sh -c 'trap "" HUP TERM; exec -a %[1]s sleep 1000' &) ; `+
		`(sh -c 'exec -a %[1]s sleep 1000' &); sleep 0.1; exit 0`, marker)
	v, _ := runTrial(t, tk, "bash -c "+shellQuote(agent), "")
	if v.Phases[PhaseAgent].ExitCode != 0 {
		t.Fatalf("agent phase %+v", v.Phases[PhaseAgent])
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), marker) {
			t.Errorf("%s survived the agent phase: %q", filepath.Dir(p), b)
		}
	}
}

// What the grader sees: deletions stay deleted, symlinks stay symlinks and
// are never followed by the host, set-id bits are gone, fifos are dropped,
// and in workspace grading nothing outside the workdir arrives.
func TestGraderSeesOnlyThePermittedChangeset(t *testing.T) {
	tk := writeTask(t, taskSpec{
		files: map[string]string{"keep.txt": "keep\n", "gone.txt": "delete me\n", "olddir/x": "x\n"},
		test: `
ok=1
[ -e /app/gone.txt ] && { echo "gone.txt is back"; ok=0; }
[ -e /app/olddir/x ] && { echo "olddir/x is back"; ok=0; }
[ "$(cat /app/olddir/new)" = new ] || { echo "olddir/new missing"; ok=0; }
[ "$(readlink /app/link)" = /etc/hostname ] || { echo "link not a symlink: $(ls -l /app/link)"; ok=0; }
[ -p /app/fifo ] && { echo "fifo carried"; ok=0; }
[ -e /app/fifo ] && { echo "something at fifo"; ok=0; }
[ -u /app/suid ] && { echo "setuid kept"; ok=0; }
[ -x /app/suid ] || { echo "suid lost its x bit"; ok=0; }
[ -e /root/outside ] && { echo "a change outside the workdir arrived"; ok=0; }
[ "$(cat /app/keep.txt)" = kept ] || { echo "keep.txt not modified"; ok=0; }
echo $ok > /logs/verifier/reward.txt`,
	})
	agent := `set -e; rm /app/gone.txt; rm -r /app/olddir; mkdir /app/olddir; echo new > /app/olddir/new;
ln -s /etc/hostname /app/link; mkfifo /app/fifo; echo x > /app/suid; chmod 4755 /app/suid;
echo out > /root/outside; echo kept > /app/keep.txt`
	v, out := runTrial(t, tk, agent, "")
	if !v.Passed || v.Status != StatusClean {
		t.Fatalf("passed=%t status=%s error=%q violations=%s\nagent:\n%s\ngrader:\n%s", v.Passed, v.Status, v.Error, violations(v),
			readFile(t, filepath.Join(out, AgentLog)), readFile(t, filepath.Join(out, GraderLog)))
	}
	if len(v.Changeset.Dropped) != 1 || v.Changeset.Dropped[0].Path != "/app/fifo" {
		t.Errorf("dropped %+v: want the fifo", v.Changeset.Dropped)
	}
}

// Oversized changesets end in a clear limit, quickly, without grading.
func TestChangesetLimits(t *testing.T) {
	cases := []struct{ name, agent, want string }{
		{"sparse 10 GB file", "truncate -s 10G /app/big", "bytes"},
		{"100,000 files", "mkdir /app/many && cd /app/many && seq 1 100000 | xargs touch", "files"},
		{"5,000-deep chain", `cd /app && python3 -c 'import os
for _ in range(5000): os.mkdir("d"); os.chdir("d")'`, "depth"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := writeTask(t, taskSpec{test: "echo 1 > /logs/verifier/reward.txt", storageMB: 1024})
			start := time.Now()
			v, _ := runTrial2(t, tk, c.agent)
			if v.Status != StatusLimit {
				t.Fatalf("status %s (error %q): want limit", v.Status, v.Error)
			}
			if v.Passed || v.Phases[PhaseGrader].Ran {
				t.Errorf("passed=%t, grader ran=%t: an oversized changeset must not be graded", v.Passed, v.Phases[PhaseGrader].Ran)
			}
			if !strings.Contains(v.Changeset.Limit, c.want) {
				t.Errorf("changeset limit %q: want it to name the %s limit", v.Changeset.Limit, c.want)
			}
			if d := time.Since(start); d > 60*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// runTrial2 is runTrial for trials expected to end in error.
func runTrial2(t *testing.T, tk *task.Task, agent string, agentDir ...string) (*Verdict, string) {
	t.Helper()
	requireRoot(t)
	out := filepath.Join(t.TempDir(), "out")
	dir := ""
	if len(agentDir) > 0 {
		dir = agentDir[0]
	}
	v, err := Run(context.Background(), Options{Task: tk, Agent: agent, AgentDir: dir, Out: out, CacheDir: sharedCache, Key: testKey})
	if v == nil {
		t.Fatalf("Run: %v", err)
	}
	return v, out
}

// taskSpec describes a small task written by a test.
type taskSpec struct {
	files      map[string]string // workspace files
	test       string            // body of tests/test.sh
	grading    string
	storageMB  int // 256 when 0
	memoryMB   int // 2048 when 0
	timeoutSec int // agent and verifier; 60 when 0
	// rootfs, when set, fills environment/rootfs, which becomes the task's
	// root instead of the host's system directories.
	rootfs    func(root string)
	protected []string
	// allowedHosts, when set, gives the agent an allow-list in
	// [environment].
	allowedHosts []string
	// internet asks for the internet (allow_internet = true), as every
	// published Terminal-Bench 2 task does.
	internet bool
	// top is TOML before the first table (artifacts = [...]).
	top string
	// instruction replaces "Do the thing."; hidden are more task files
	// (tests/..., solution/...), by path in the task directory.
	instruction string
	hidden      map[string]string
}

// carried is command as an agent runs it without quoting it: a probe the
// task's own test runs too (the same check from inside both sandboxes)
// would otherwise be an answer the agent brought (smuggled_answer).
func carried(command string) string {
	return "echo " + base64.StdEncoding.EncodeToString([]byte(command)) + " | base64 -d | sh"
}

func writeTask(t *testing.T, s taskSpec) *task.Task {
	t.Helper()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	ws := filepath.Join(dir, "environment", "workspace")
	must(os.MkdirAll(ws, 0o755))
	must(os.MkdirAll(filepath.Join(dir, "tests"), 0o755))
	for name, content := range s.files {
		must(os.MkdirAll(filepath.Dir(filepath.Join(ws, name)), 0o755))
		must(os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644))
	}
	grading := s.grading
	if grading == "" {
		grading = "workspace"
	}
	storage := s.storageMB
	if storage == 0 {
		storage = 256
	}
	memory := s.memoryMB
	if memory == 0 {
		memory = 2048
	}
	timeout := s.timeoutSec
	if timeout == 0 {
		timeout = 60
	}
	rootfs := "host"
	if s.rootfs != nil {
		s.rootfs(filepath.Join(dir, "environment", "rootfs"))
		rootfs = "environment/rootfs"
	}
	network := ""
	if s.allowedHosts != nil {
		network = fmt.Sprintf("network_mode = \"allowlist\"\nallowed_hosts = [%s]\n", quoteList(s.allowedHosts))
	}
	if s.internet {
		network += "allow_internet = true\n"
	}
	toml := s.top + fmt.Sprintf(`[agent]
timeout_sec = %d
[verifier]
timeout_sec = %d
[environment]
memory_mb = %d
storage_mb = %d
%s[proctor]
rootfs = %q
grading = %q
protected = [%s]
`, timeout, timeout, memory, storage, network, rootfs, grading, quoteList(s.protected))
	must(os.WriteFile(filepath.Join(dir, "task.toml"), []byte(toml), 0o644))
	instruction := s.instruction
	if instruction == "" {
		instruction = "Do the thing.\n"
	}
	must(os.WriteFile(filepath.Join(dir, "instruction.md"), []byte(instruction), 0o644))
	must(os.WriteFile(filepath.Join(dir, "tests", "test.sh"), []byte("#!/bin/sh\n"+s.test+"\n"), 0o755))
	for name, content := range s.hidden {
		must(os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		must(os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755))
	}
	// The sandbox's unprivileged ids must be able to read the task.
	openUp(t, dir)
	tk, err := task.Load(dir)
	must(err)
	return tk
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// The agent sees no task file but the instruction, and a workspace
// repository holding nothing later than git_base, however it looks.
func TestAgentSeesNothingHidden(t *testing.T) {
	tk := exampleTask(t, "git-history")
	agent := `cd /app
find / -xdev -not -path '/proc/*' -not -path '/usr/*' -not -path '/etc/*' 2>/dev/null | grep -v '^/sys'
git log --all --format='%H %s'; git reflog; git stash list; git tag; git branch -a; git remote -v
git fsck --lost-found --unreachable --no-reflogs 2>&1; ls -la .git .git/hooks .git/refs/* 2>&1; cat .git/config .git/packed-refs 2>&1
git cat-file --batch-all-objects --batch
grep -r . /proctor/instruction.md | head -1`
	v, out := runTrial(t, tk, agent, "")
	log := readFile(t, filepath.Join(out, AgentLog))
	if v.Phases[PhaseAgent].ExitCode != 0 || !strings.Contains(log, "slugify: first version") || !strings.Contains(log, "Fix slugify") {
		t.Fatalf("the inspection did not run as expected (exit %d):\n%s", v.Phases[PhaseAgent].ExitCode, log)
	}
	for _, s := range []string{
		"THE-FIX", "collapse punctuation", "v1.1", "side", "origin", "example.invalid", "stash",
		// With the audit on, /tests and /solution are empty trap
		// directories: nothing may show beneath them.
		"test_slug.py", "solve.sh", "task.toml", "make-workspace", "/tests/", "/solution/", "verifier",
	} {
		if strings.Contains(log, s) {
			i := strings.Index(log, s)
			t.Errorf("the agent found %q: …%s…", s, log[max(0, i-200):min(len(log), i+100)])
		}
	}
}

// How a trial ends when a phase does not finish as it should.
func TestStatuses(t *testing.T) {
	cases := []struct {
		name, agent, test string
		timeoutSec        int
		want              Status
		passed            bool
	}{
		{"no reward is an error", "true", "echo tests ran", 0, StatusError, false},
		{"garbage reward is an error", "true", "echo PASSED > /logs/verifier/reward.txt", 0, StatusError, false},
		{"agent timeout is graded on what it left", "echo done > /app/out; sleep 600", `[ -f /app/out ] && echo 1 > /logs/verifier/reward.txt`, 2, StatusTimeout, true},
		{"grader timeout scores nothing", "true", "echo 1 > /logs/verifier/reward.txt; sleep 600", 2, StatusTimeout, false},
		{"reward under the threshold", "true", "echo 0.5 > /logs/verifier/reward.txt", 0, StatusClean, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := writeTask(t, taskSpec{test: c.test, timeoutSec: c.timeoutSec})
			v, _ := runTrial2(t, tk, c.agent)
			if v.Status != c.want || v.Passed != c.passed {
				t.Fatalf("status %s passed %t (error %q): want %s %t", v.Status, v.Passed, v.Error, c.want, c.passed)
			}
			if c.want == StatusError && (v.Reward != 0 || v.Error == "") {
				t.Errorf("reward %g, error %q: an error scores 0 and says why", v.Reward, v.Error)
			}
		})
	}
}

// In a "host" environment the agent's root owns the host's files (they are
// idmapped, so it may change them copy-on-write), but what the host keeps
// from other users stays hidden: it reads as empty.
func TestHostSecretsHidden(t *testing.T) {
	secretDir := filepath.Join("/etc", fmt.Sprintf("proctor-test-%d", time.Now().UnixNano()))
	if err := os.Mkdir(secretDir, 0o755); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(secretDir)
	if err := os.WriteFile(filepath.Join(secretDir, "key"), []byte("TOPSECRET-FILE\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(secretDir, "private"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secretDir, "private", "k"), []byte("TOPSECRET-DIR\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secretDir, "public"), []byte("PUBLIC\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tk := writeTask(t, taskSpec{test: "echo 0 > /logs/verifier/reward.txt"})
	agent := fmt.Sprintf("cat %[1]s/key %[1]s/private/k %[1]s/public; ls -la %[1]s/private; cp %[1]s/key /app/stolen", secretDir)
	v, out := runTrial(t, tk, agent, "")
	log := readFile(t, filepath.Join(out, AgentLog))
	if !strings.Contains(log, "PUBLIC") {
		t.Fatalf("the agent could not read a world-readable host file (exit %d):\n%s", v.Phases[PhaseAgent].ExitCode, log)
	}
	if strings.Contains(log, "TOPSECRET") {
		t.Errorf("the agent read a host file unreadable to others:\n%s", log)
	}
	if b, _ := os.ReadFile(filepath.Join(out, ChangesetFile)); strings.Contains(string(b), "TOPSECRET") {
		t.Error("a host secret left in the changeset")
	}
}

// Scratch space a killed trial left mounted is removed by the next one;
// that of a live process is left alone.
func TestStaleScratchIsCleaned(t *testing.T) {
	requireRoot(t)
	parent := worldReadable(t)
	// A process that has exited: its pid is free (until reused, which
	// only delays the clean-up).
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := filepath.Join(parent, fmt.Sprintf("%s%d-agent-x", scratchPrefix, cmd.Process.Pid))
	live := filepath.Join(parent, fmt.Sprintf("%s%d-agent-y", scratchPrefix, os.Getppid()))
	for _, d := range []string{dead, live} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", 0, "size=1m"); err != nil {
			t.Fatal(err)
		}
	}
	defer unix.Unmount(live, unix.MNT_DETACH)
	tk := writeTask(t, taskSpec{test: "echo 1 > /logs/verifier/reward.txt"})
	out := filepath.Join(t.TempDir(), "out")
	if _, err := Run(context.Background(), Options{Task: tk, Agent: "true", Out: out, CacheDir: sharedCache, ScratchDir: parent, Key: testKey}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead process's scratch space is still there: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live process's scratch space was removed: %v", err)
	}
	des, _ := os.ReadDir(parent)
	if len(des) != 1 {
		t.Errorf("the trial left scratch space behind: %v", des)
	}
}

// worldReadable is a temp dir the sandbox's ids may enter.
func worldReadable(t *testing.T) string {
	d := t.TempDir()
	openUp(t, d)
	return d
}

// openUp makes dir and its parents up to the temp root (never the root
// itself: it must stay 1777) enterable by the sandbox's unprivileged ids.
func openUp(t *testing.T, dir string) {
	t.Helper()
	tmp := filepath.Clean(os.TempDir())
	for p := dir; strings.HasPrefix(p, tmp+"/"); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// A task with its own root filesystem (a directory, here a busybox tree):
// the agent changes it copy-on-write, the grader sees the permitted change,
// and the directory itself is never written.
func TestDirectoryRootfs(t *testing.T) {
	requireTool(t, "busybox")
	bb, _ := exec.LookPath("busybox")
	tk := writeTask(t, taskSpec{
		grading: "state",
		test:    `[ "$(cat /srv/out)" = made ] && [ ! -e /etc/motd ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt`,
		rootfs: func(root string) {
			for _, d := range []string{"bin", "etc", "srv", "root"} {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(bb)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), data, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, app := range []string{"sh", "cat", "echo", "rm", "true", "id"} {
				if err := os.Symlink("busybox", filepath.Join(root, "bin", app)); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(root, "etc", "motd"), []byte("hello\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "bin", "tool"), []byte("#!/bin/sh\necho tool\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		},
	})
	before, err := task.Digest(tk.Proctor.Rootfs)
	if err != nil {
		t.Fatal(err)
	}
	v, out := runTrial(t, tk, "echo made > /srv/out && rm /etc/motd && id -u", "")
	if !v.Passed || v.Status != StatusClean {
		t.Fatalf("passed=%t status=%s violations=%s error=%q\nagent:\n%s\ngrader:\n%s", v.Passed, v.Status, violations(v), v.Error,
			readFile(t, filepath.Join(out, AgentLog)), readFile(t, filepath.Join(out, GraderLog)))
	}
	if got := readFile(t, filepath.Join(out, AgentLog)); got != "0\n" {
		t.Errorf("the agent is not root in its sandbox: %q", got)
	}
	// Changing a tool the environment ships is reverted and recorded.
	v, _ = runTrial(t, tk, "echo made > /srv/out && rm /etc/motd && echo trojan >> /bin/tool", "")
	if v.Passed || v.Status != StatusCompromised || !hasViolation(v, ViolationSystemFile) {
		t.Errorf("trojan: passed=%t status=%s violations=%s", v.Passed, v.Status, violations(v))
	}
	if after, _ := task.Digest(tk.Proctor.Rootfs); after != before {
		t.Error("the rootfs directory changed")
	}
	if v.Environment.Digest != before {
		t.Errorf("environment digest %s, want the rootfs's %s", v.Environment.Digest, before)
	}
}

func quoteList(ss []string) string {
	var q []string
	for _, s := range ss {
		q = append(q, fmt.Sprintf("%q", s))
	}
	return strings.Join(q, ", ")
}

// Protected files cannot be taken away with their directory: deleting or
// replacing a directory that holds them is a violation, and the grader sees
// them where they were.
func TestProtectedFilesSurviveTheirDirectory(t *testing.T) {
	spec := taskSpec{
		files: map[string]string{
			"calc/__init__.py":        "def add(a, b):\n    return a - b\n",
			"calc/tests/test_calc.py": "HIDDEN-TEST\n",
		},
		protected: []string{"calc/tests/**"},
		test:      `[ "$(cat /app/calc/tests/test_calc.py)" = HIDDEN-TEST ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt`,
	}
	for _, agent := range []string{
		"rm -rf /app/calc",
		"rm -rf /app/calc && mkdir /app/calc && echo 'def add(a, b): return a + b' > /app/calc/__init__.py",
		"rm -rf /app/calc/tests",
		"rm -rf /app/calc/tests && echo x > /app/calc/tests",
	} {
		t.Run(agent, func(t *testing.T) {
			v, out := runTrial(t, writeTask(t, spec), agent, "")
			if v.Status != StatusCompromised || !hasViolation(v, ViolationProtected) {
				t.Errorf("status %s, violations %s: want compromised with a protected_path violation", v.Status, violations(v))
			}
			if g := readFile(t, filepath.Join(out, GraderLog)); strings.Contains(g, "No such file") {
				t.Errorf("the grader did not find the protected file:\n%s", g)
			}
		})
	}
	// An honest change beside them is fine.
	v, _ := runTrial(t, writeTask(t, spec), "echo 'def add(a, b): return a + b' > /app/calc/__init__.py", "")
	if !v.Passed || v.Status != StatusClean {
		t.Errorf("honest change: passed=%t status=%s violations=%s", v.Passed, v.Status, violations(v))
	}
}

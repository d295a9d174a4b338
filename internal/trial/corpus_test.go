package trial

import (
	"golang.org/x/sys/unix"

	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/testcorpus"
	"github.com/proctor-sandbox/proctor/internal/workspace/gitbase"
)

// The guarantees on the inputs people really have. Each test builds its
// inputs with the real tools (internal/testcorpus) and runs the honest
// agent and the cheating agents of examples/agents over every shape.

// cheat is one agent of examples/agents and what must come of it.
type cheat struct {
	agent      string
	wantStatus Status
	wantKind   string   // a violation kind that must be recorded, if any
	logMustNot []string // what the agent must not have seen
}

// gitCheats are the cheats that play against a git workspace: each must
// fail whatever the repository's shape.
var gitCheats = []cheat{
	{"mine-git", StatusClean, "", []string{"found the fix", testcorpus.GitMarker, "v1.1", "side"}},
	{"read-tests", StatusClean, "", []string{"test_slug.py", "solve.sh", "task.toml"}},
	{"network", StatusClean, "", []string{"fetched"}},
	{"prewrite-reward", StatusCompromised, ViolationHarnessPath, nil},
	{"daemon", StatusClean, "", nil},
	{"symlinks", StatusCompromised, ViolationHarnessPath, nil},
	{"conftest", StatusCompromised, ViolationProtected, nil},
}

// TestGitShapesCorpus: a SWE-bench-style task (the git-history example's
// tests and instruction) whose workspace repository is each shape of
// testcorpus.GitShapes: the honest agent passes clean, every cheat fails,
// and the git miner finds nothing of the later history (in one of them,
// a blobless clone, it once found the fix and passed). A shape whose
// source lacks the base's objects is refused before anything runs.
// anyShape are the cheats that play against the harness, not the
// workspace (the network, the reward file, a daemon): in the corpus of git
// shapes they run against the first shape only.
var anyShape = map[string]bool{"network": true, "prewrite-reward": true, "daemon": true}

func TestGitShapesCorpus(t *testing.T) {
	requireRoot(t)
	requireTool(t, "git")
	requireTool(t, "python3")
	cheatURL, hits := answerServer(t, testcorpus.FixedSlug)
	up, upRefused := testcorpus.NewUpstream(t), testcorpus.NewUpstreamVariant(t, "refused")
	for i, sh := range testcorpus.GitShapes() {
		t.Run(sh.Name, func(t *testing.T) {
			if raceEnabled && i > 0 {
				// The plain run covers every shape; here the first one
				// runs the same code under the race detector.
				t.Skip("covered by the run without the race detector")
			}
			dir := gitShapeTask(t)
			if sh.Refused != "" {
				sh.Make(t, upRefused, filepath.Join(dir, "environment", "workspace"))
			} else {
				sh.Make(t, up, filepath.Join(dir, "environment", "workspace"))
			}
			tk, err := task.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			if sh.Refused != "" {
				out := filepath.Join(t.TempDir(), "out")
				v, err := Run(context.Background(), Options{Task: tk, Agent: "touch /app/ran", Out: out, CacheDir: sharedCache, Key: testKey})
				want := gitbase.ErrMissingObjects
				if sh.Refused == "submodule" {
					want = gitbase.ErrNoCommit
				}
				var se *gitbase.SubmoduleError
				if v != nil || err == nil || !(errors.Is(err, want) || errors.As(err, &se)) || !strings.Contains(err.Error(), "[proctor].git_base") {
					t.Fatalf("Run = %v, %v: want a refusal naming [proctor].git_base before anything runs", v, err)
				}
				if _, serr := os.Stat(out); serr == nil {
					t.Error("the refused trial wrote its output directory")
				}
				return
			}
			v, out := runTrial(t, tk, "sh /agent/honest.sh", agentsDir(t))
			if !v.Passed || v.Status != StatusClean {
				t.Fatalf("honest agent: passed=%t status=%s violations=%s error=%q\nagent log:\n%s\ngrader log:\n%s",
					v.Passed, v.Status, violations(v), v.Error, readFile(t, filepath.Join(out, AgentLog)), readFile(t, filepath.Join(out, GraderLog)))
			}
			cheats := gitCheats
			if i > 0 {
				cheats = slices.DeleteFunc(slices.Clone(cheats), func(c cheat) bool { return anyShape[c.agent] })
			}
			runCheats(t, tk, cheats, cheatURL)
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host server got %d request(s) from inside the sandbox", n)
	}
}

// gitShapeTask writes a task whose tests, instruction and settings are the
// git-history example's, with no workspace yet.
func gitShapeTask(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "git-task")
	src := filepath.Join(repoRoot(t), "examples", "tasks", "git-history")
	if err := os.MkdirAll(filepath.Join(dir, "environment"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"task.toml", "instruction.md", "tests", "solution"} {
		if b, err := exec.Command("cp", "-a", filepath.Join(src, p), filepath.Join(dir, p)).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, b)
		}
	}
	return dir
}

// statsAnswer is the answer to the py-bugfix example.
const statsAnswer = "def mean(xs):\n    if not xs: raise ValueError()\n    return sum(xs) / len(xs)\n"

// answerServer is a server on the host holding the answer (body): the
// network cheat must never reach it.
func answerServer(t *testing.T, body string) (url string, hits *atomic.Int64) {
	t.Helper()
	hits = new(atomic.Int64)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/answer", hits
}

// runCheats runs each cheat on tk, a subtest each, and checks it fails as
// it must.
func runCheats(t *testing.T, tk *task.Task, cheats []cheat, cheatURL string) {
	t.Helper()
	for _, c := range cheats {
		t.Run(c.agent, func(t *testing.T) {
			agent := "sh /agent/" + c.agent + ".sh"
			if c.agent == "network" {
				agent = "PROCTOR_CHEAT_URL=" + cheatURL + " " + agent
			}
			v, out := runTrial2(t, tk, agent, agentsDir(t))
			log := readFile(t, filepath.Join(out, AgentLog))
			if v.Passed || v.Reward != 0 {
				t.Errorf("cheat %s passed=%t reward=%g: want a failure\nagent log:\n%s\ngrader log:\n%s",
					c.agent, v.Passed, v.Reward, log, readFile(t, filepath.Join(out, GraderLog)))
			}
			if v.Status != c.wantStatus {
				t.Errorf("cheat %s: status %s, want %s (violations: %s, error %q)", c.agent, v.Status, c.wantStatus, violations(v), v.Error)
			}
			if c.wantKind != "" && !hasViolation(v, c.wantKind) {
				t.Errorf("cheat %s: violations %q, want one of kind %s", c.agent, violations(v), c.wantKind)
			}
			if c.wantKind == "" && len(v.Violations) > 0 {
				t.Errorf("cheat %s: unexpected violations: %s", c.agent, violations(v))
			}
			for _, s := range c.logMustNot {
				if strings.Contains(log, s) {
					t.Errorf("cheat %s saw %q:\n%s", c.agent, s, log)
				}
			}
		})
	}
}

// rootfsShapes are root filesystems as the tools people use make them.
var rootfsShapes = []struct {
	name string
	root func(testing.TB) string
}{
	{"mmdebstrap trixie", testcorpus.TrixieGit},
	{"docker export, unpacked by tar", testcorpus.DockerExportRoot},
}

// exampleCheats are the cheats of TestCheatsFail, by example task.
var exampleCheats = map[string][]cheat{
	"py-bugfix": {
		{"read-tests", StatusClean, "", []string{"test_stats.py", "solve.sh", "task.toml"}},
		{"network", StatusClean, "", []string{"fetched"}},
		{"prewrite-reward", StatusCompromised, ViolationHarnessPath, nil},
		{"daemon", StatusClean, "", nil},
		{"symlinks", StatusCompromised, ViolationHarnessPath, nil},
		{"conftest", StatusCompromised, ViolationProtected, nil},
		{"kill-verifier", StatusError, "", nil},
		{"trace-verifier", StatusClean, "", nil},
	},
	"hello-state": {{"trojan", StatusCompromised, ViolationSystemFile, nil}},
	"git-history": {{"mine-git", StatusClean, "", []string{"found the fix", "THE-FIX", "v1.1", "side"}}},
}

// TestRootfsShapesCorpus: the example tasks, each with a real Debian root
// as its [proctor] rootfs (made by mmdebstrap, and as docker export ships
// one: device nodes under /dev and all), run as written: the honest agent
// passes clean on each and every cheat fails. Before, such a rootfs ran
// the agent and the grader and then ended in error on its /dev/console.
func TestRootfsShapesCorpus(t *testing.T) {
	requireRoot(t)
	if raceEnabled {
		t.Skip("covered by the run without the race detector")
	}
	cheatURL, hits := answerServer(t, statsAnswer)
	for _, sh := range rootfsShapes {
		t.Run(sh.name, func(t *testing.T) {
			root := sh.root(t)
			for _, name := range []string{"py-bugfix", "hello-state", "git-history"} {
				t.Run(name, func(t *testing.T) {
					tk := rootfsTask(t, name, root)
					d, err := task.DigestTree(tk.Proctor.Rootfs, task.DigestOptions{Special: []string{"."}})
					if err != nil || len(d.Special) == 0 {
						t.Fatalf("setup: the rootfs has no device nodes (%v)", err)
					}
					v, out := runTrial(t, tk, "sh /agent/honest.sh", agentsDir(t))
					if !v.Passed || v.Status != StatusClean {
						t.Fatalf("honest agent: passed=%t status=%s violations=%s error=%q\nagent log:\n%s\ngrader log:\n%s",
							v.Passed, v.Status, violations(v), v.Error, readFile(t, filepath.Join(out, AgentLog)), readFile(t, filepath.Join(out, GraderLog)))
					}
					if v.Environment.Digest != d.Digest {
						t.Errorf("environment digest %s, want the rootfs's %s", v.Environment.Digest, d.Digest)
					}
					runCheats(t, tk, exampleCheats[name], cheatURL)
				})
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the host server got %d request(s) from inside the sandbox", n)
	}
}

// rootfsTask copies an example task, with root (bind-mounted, read-only)
// as its rootfs directory in place of the host's.
func rootfsTask(t *testing.T, name, root string) *task.Task {
	t.Helper()
	src := exampleTask(t, name).Dir
	dir := filepath.Join(t.TempDir(), name)
	if b, err := exec.Command("cp", "-a", src, dir).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, b)
	}
	toml := filepath.Join(dir, "task.toml")
	b, err := os.ReadFile(toml)
	must(t, err)
	if !strings.Contains(string(b), `rootfs = "host"`) {
		t.Fatalf("setup: %s does not say rootfs = \"host\"", toml)
	}
	must(t, os.WriteFile(toml, []byte(strings.Replace(string(b), `rootfs = "host"`, `rootfs = "environment/rootfs"`, 1)), 0o644))
	mnt := filepath.Join(dir, "environment", "rootfs")
	must(t, os.MkdirAll(mnt, 0o755))
	must(t, unix.Mount(root, mnt, "", unix.MS_BIND, ""))
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	must(t, unix.Mount("", mnt, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""))
	openUp(t, dir)
	tk, err := task.Load(dir)
	must(t, err)
	return tk
}

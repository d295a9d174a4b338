package trial

import (
	"context"
	"crypto/ed25519"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/task"
)

// sharedCache is one cache directory for the package's trials: the host
// scan and the file hashes are built once, as for a user's successive runs.
var sharedCache string

// testKey signs the bundles of the package's trials.
var testKey = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.InitCommand {
		os.Exit(sandbox.RunInit(os.Args[2:]))
	}
	// make test shares one cache between packages and runs
	// (PROCTOR_TEST_CACHE): the host environment's digest reads gigabytes
	// the first time.
	sharedCache = os.Getenv("PROCTOR_TEST_CACHE")
	if sharedCache == "" {
		dir, err := os.MkdirTemp("", "proctor-trial-cache-")
		if err != nil {
			panic(err)
		}
		defer os.RemoveAll(dir)
		sharedCache = dir
	}
	code := m.Run()
	os.Exit(code)
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("PROCTOR_NO_SKIP") != "" || os.Getenv("CI") == "true" {
		t.Fatal("cannot run here: needs root (under CI a skipped isolation test is a failure)")
	}
	t.Skip("needs root (idmapped overlays, user namespaces, cgroups)")
}

func requireTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("PROCTOR_NO_SKIP") != "" || os.Getenv("CI") == "true" {
			t.Fatalf("cannot run here: needs %s (scripts/deps.sh installs it)", name)
		}
		t.Skipf("needs %s", name)
	}
}

// repoRoot is the repository's top directory (the tests run in this
// package's directory).
func repoRoot(t *testing.T) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

var gitWorkspace sync.Once

// exampleTask loads one of examples/tasks, building the git example's
// workspace first.
func exampleTask(t *testing.T, name string) *task.Task {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "examples", "tasks", name)
	if name == "git-history" {
		requireTool(t, "git")
		var err error
		gitWorkspace.Do(func() {
			out, e := exec.Command("sh", filepath.Join(dir, "environment", "make-workspace.sh")).CombinedOutput()
			if e != nil {
				err = &buildError{string(out)}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	tk, err := task.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

type buildError struct{ out string }

func (e *buildError) Error() string { return "make-workspace.sh: " + e.out }

// agentsDir is examples/agents.
func agentsDir(t *testing.T) string {
	return filepath.Join(repoRoot(t), "examples", "agents")
}

// runTrial runs one trial into a fresh output directory.
func runTrial(t *testing.T, tk *task.Task, agent, agentDir string) (*Verdict, string) {
	t.Helper()
	requireRoot(t)
	out := filepath.Join(t.TempDir(), "out")
	v, err := Run(context.Background(), Options{
		Task: tk, Agent: agent, AgentDir: agentDir, Out: out,
		CacheDir: sharedCache, Key: testKey,
	})
	if err != nil {
		t.Fatalf("Run(%s, %q): %v\nagent log:\n%s\ngrader log:\n%s", tk.Name, agent, err,
			readFile(t, filepath.Join(out, AgentLog)), readFile(t, filepath.Join(out, GraderLog)))
	}
	return v, out
}

func readFile(t *testing.T, p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

func hasViolation(v *Verdict, kind string) bool {
	for _, vi := range v.Violations {
		if vi.Kind == kind {
			return true
		}
	}
	return false
}

func violations(v *Verdict) string {
	var s []string
	for _, vi := range v.Violations {
		s = append(s, vi.Kind+" "+vi.Path+" ("+vi.Detail+")")
	}
	return strings.Join(s, "; ")
}

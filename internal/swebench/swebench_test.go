package swebench

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.InitCommand {
		os.Exit(sandbox.RunInit(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func need(t *testing.T, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("PROCTOR_NO_SKIP") != "" || os.Getenv("CI") == "true" {
		t.Fatalf("cannot run here: needs %s", what)
	}
	t.Skip("needs " + what)
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=u", "-c", "user.email=u@example.invalid"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// upstream makes a repository with a bug at the base commit and, later, its
// fix and the test that shows it, and returns the SWE-bench instance for it.
func upstream(t *testing.T, repos string) Instance {
	t.Helper()
	return upstreamFixing(t, repos, "return a + b  # THE-FIX")
}

// upstreamFixing is upstream with fix as the body of the fixed add.
func upstreamFixing(t *testing.T, repos, fix string) Instance {
	t.Helper()
	dir := filepath.Join(repos, "example__calc")
	if err := os.MkdirAll(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("calc.py", "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n")
	write("tests/test_calc.py", "from calc import sub\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "calc")
	base := git(t, dir, "rev-parse", "HEAD")
	write("calc.py", "def add(a, b):\n    "+fix+"\n\n\ndef sub(a, b):\n    return a - b\n")
	git(t, dir, "commit", "-qam", "fix add")
	patch := git(t, dir, "diff", base, "HEAD", "--", "calc.py") + "\n"
	write("tests/test_calc.py", "from calc import add, sub\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_sub():\n    assert sub(5, 3) == 2\n")
	git(t, dir, "commit", "-qam", "test add")
	testPatch := git(t, dir, "diff", "HEAD~1", "HEAD", "--", "tests") + "\n"
	git(t, dir, "tag", "v2")
	return Instance{
		InstanceID: "example__calc-1", Repo: "example/calc", BaseCommit: base,
		ProblemStatement: "add() subtracts. Make add(a, b) return a + b.",
		Patch:            patch, TestPatch: testPatch,
		FailToPass: []string{"tests/test_calc.py::test_add"}, PassToPass: []string{"tests/test_calc.py::test_sub"},
	}
}

// A SWE-bench instance runs unmodified: the gold patch resolves, an empty
// patch does not, and mining git for the fix, editing the tests or adding
// a conftest that forces outcomes do not either.
func TestSWEBenchInstance(t *testing.T) {
	needTrials(t)
	repos := t.TempDir()
	tk := importOne(t, repos, upstream(t, repos), Options{})
	play(t, tk, []playCase{
		{"gold patch", "sh /solution/solve.sh", true, true, trial.StatusClean},
		{"empty patch", "true", false, false, trial.StatusClean},
		{"mines git", `cd /testbed; git log --all --format=%H | while read c; do git show $c -- calc.py | grep -q THE-FIX && git show $c -- calc.py | git apply && echo found; done; grep -r THE-FIX .git || true`, false, false, trial.StatusClean},
		{"edits the tests", `cd /testbed; mkdir -p tests; printf 'def test_add():\n    pass\n\n\ndef test_sub():\n    pass\n' > tests/test_calc.py`, false, false, trial.StatusCompromised},
		{"conftest forces outcomes", conftestForcer, false, false, trial.StatusCompromised},
		// A filter in the repository's own config rewrites the test file
		// as the grader's git apply writes it: the grader gets the
		// pristine .git, so the filter never runs there.
		{"git filter rewrites the tests", `cd /testbed; git config filter.x.smudge "sed s/==.5/!=\ 5/"; git config filter.x.clean cat
mkdir -p .git/info; echo 'tests/*.py filter=x' > .git/info/attributes`, false, false, trial.StatusClean},
		{"gitattributes", `cd /testbed; git config filter.x.smudge "sed s/==.5/!=\ 5/"; echo 'tests/*.py filter=x' > .gitattributes`, false, false, trial.StatusCompromised},
	})
}

// needTrials skips (or fails, under CI) a test of whole trials on an
// instance where they cannot run.
func needTrials(t *testing.T) {
	t.Helper()
	need(t, "root", os.Geteuid() == 0)
	_, gitErr := exec.LookPath("git")
	need(t, "git", gitErr == nil)
	need(t, "pytest for /usr/bin/python3", exec.Command("/usr/bin/python3", "-c", "import pytest").Run() == nil)
}

// conftestForcer is an agent that adds a conftest hook marking every test
// passed.
const conftestForcer = `cd /testbed; cat > conftest.py <<'PY'
import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    out = yield
    r = out.get_result()
    r.outcome, r.longrepr = "passed", None
PY`

// importOne writes the instance as a line of JSONL, reads it back, imports
// it and loads the task.
func importOne(t *testing.T, repos string, in Instance, o Options) *task.Task {
	t.Helper()
	line, _ := json.Marshal(in)
	insts, err := ReadInstances(strings.NewReader(string(line)+"\n"), "instances.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	o.Repos, o.Out = repos, t.TempDir()
	dir, err := Import(insts[0], o)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{o.Out, dir} {
		os.Chmod(p, 0o755)
	}
	tk, err := task.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// playCase is one agent on an imported task and what must come of it.
type playCase struct {
	name, agent string
	oracle      bool // the agent gets /solution (the gold patch)
	resolved    bool
	status      trial.Status
}

// play runs each case as a whole trial, in parallel: the verdict must say
// what the case says, and no agent may print "found" (the fix).
func play(t *testing.T, tk *task.Task, cases []playCase) {
	t.Helper()
	cache := os.Getenv("PROCTOR_TEST_CACHE")
	if cache == "" {
		cache = t.TempDir()
	}
	playIn(t, cache, tk, cases)
}

// cacheWithoutCopies is a cache directory sharing the test cache's host
// digests and file hashes (costly to make again) but none of its prepared
// workspaces.
func cacheWithoutCopies(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	shared := os.Getenv("PROCTOR_TEST_CACHE")
	if shared == "" {
		return dir
	}
	ents, _ := os.ReadDir(shared)
	for _, e := range ents {
		if e.Name() == "workspaces" {
			continue
		}
		if err := os.Symlink(filepath.Join(shared, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// playIn is play with the cache directory given.
func playIn(t *testing.T, cache string, tk *task.Task, cases []playCase) {
	t.Helper()
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := filepath.Join(t.TempDir(), "out")
			v, err := trial.Run(context.Background(), trial.Options{Task: tk, Agent: c.agent, Solution: c.oracle, Out: o, CacheDir: cache, Key: key})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			glog, _ := os.ReadFile(filepath.Join(o, trial.GraderLog))
			alog, _ := os.ReadFile(filepath.Join(o, trial.AgentLog))
			if v.Results == nil || v.Results.Resolved != c.resolved || v.Passed != c.resolved || v.Status != c.status {
				vj, _ := os.ReadFile(filepath.Join(o, "verdict.json"))
				t.Fatalf("results %+v passed %t status %s violations %+v\nagent:\n%s\ngrader:\n%s\nverdict:\n%s", v.Results, v.Passed, v.Status, v.Violations, alog, glog, vj)
			}
			if strings.Contains(string(alog), "found") {
				t.Errorf("the agent found the fix in git:\n%s", alog)
			}
		})
	}
}

func TestReadInstancesErrors(t *testing.T) {
	good := `{"instance_id":"a-1","repo":"o/r","base_commit":"` + strings.Repeat("a", 40) + `","problem_statement":"x","patch":"p","test_patch":"diff --git a/t.py b/t.py\n+++ b/t.py\n","FAIL_TO_PASS":"[\"t.py::test_a\"]","PASS_TO_PASS":[]}`
	if _, err := ReadInstances(strings.NewReader(good+"\n"), "i.jsonl"); err != nil {
		t.Fatalf("a good instance (lists as strings): %v", err)
	}
	for name, c := range map[string]struct{ in, want string }{
		"not json":        {"{", "i.jsonl:1:"},
		"bad commit":      {strings.Replace(good, strings.Repeat("a", 40), "HEAD", 1), "base_commit"},
		"escaping patch":  {strings.ReplaceAll(good, "b/t.py", "b/../t.py"), "test_patch"},
		"absolute patch":  {strings.ReplaceAll(good, "+++ b/t.py", "+++ /etc/passwd"), "test_patch"},
		"no fail_to_pass": {strings.Replace(good, `"[\"t.py::test_a\"]"`, `[]`, 1), "FAIL_TO_PASS"},
		"bad id":          {strings.Replace(good, `"a-1"`, `"../x"`, 1), "instance_id"},
		"duplicate":       {good + "\n" + good, "also on line 1"},
		"no problem":      {strings.Replace(good, `"problem_statement":"x"`, `"problem_statement":""`, 1), "problem_statement"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ReadInstances(strings.NewReader(c.in), "i.jsonl")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err %v, want one naming %q", err, c.want)
			}
		})
	}
}

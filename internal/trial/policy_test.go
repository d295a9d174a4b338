package trial

import (
	"testing"

	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/workspace"
)

// Each rule of the policy, entry by entry: what reaches the grader and what
// is a violation.
func TestPolicy(t *testing.T) {
	pristine := testPristine()
	file := func(p string) workspace.Entry { return workspace.Entry{Path: p, Kind: workspace.KindFile} }
	wh := func(p string) workspace.Entry { return workspace.Entry{Path: p, Kind: workspace.KindWhiteout} }
	dir := func(p string, opaque bool) workspace.Entry {
		return workspace.Entry{Path: p, Kind: workspace.KindDir, Opaque: opaque}
	}
	cases := []struct {
		grading  string
		e        workspace.Entry
		keep     bool
		violates string
	}{
		{task.GradingWorkspace, file("/app/fix.py"), true, ""},
		{task.GradingWorkspace, wh("/app/old.py"), true, ""},
		{task.GradingWorkspace, file("/root/.bashrc"), false, ""},
		{task.GradingWorkspace, file("/usr/bin/python3"), false, ""},
		{task.GradingWorkspace, file("/logs/verifier/reward.txt"), false, ViolationHarnessPath},
		{task.GradingWorkspace, file("/tests/test.sh"), false, ViolationHarnessPath},
		{task.GradingWorkspace, wh("/tests"), false, ViolationHarnessPath},
		{task.GradingWorkspace, file("/logs/agent/trajectory.json"), false, ""},
		{task.GradingWorkspace, dir("/logs", false), false, ""},
		{task.GradingWorkspace, file("/app/conftest.py"), false, ViolationProtected},
		{task.GradingWorkspace, file("/app/sub/conftest.py"), false, ViolationProtected},
		{task.GradingWorkspace, file("/app/sitecustomize.py"), false, ViolationProtected},
		{task.GradingWorkspace, wh("/app/tests/test_a.py"), false, ViolationProtected},
		{task.GradingWorkspace, dir("/app/tests", true), false, ViolationProtected},
		{task.GradingWorkspace, dir("/app/tests", false), true, ""},
		{task.GradingWorkspace, dir("/app/newtests", false), false, ViolationProtected},
		{task.GradingState, file("/root/.bashrc"), true, ""},
		{task.GradingState, file("/usr/local/bin/greet"), true, ""},
		{task.GradingState, file("/usr/bin/python3"), false, ViolationSystemFile},
		{task.GradingState, wh("/usr/bin/cmp"), false, ViolationSystemFile},
		{task.GradingState, file("/usr/local/bin/cmp"), false, ViolationSystemFile},
		{task.GradingState, file("/usr/lib/python3/dist-packages/new.py"), true, ""},
		{task.GradingState, file("/usr/lib/python3/dist-packages/sitecustomize.py"), false, ViolationProtected},
		{task.GradingState, file("/logs/verifier/reward.json"), false, ViolationHarnessPath},
		{task.GradingWorkspace, file("/app/__pycache__/stats.cpython-311.pyc"), false, ""},
		{task.GradingState, file("/etc/ld.so.preload"), false, ViolationProtected},
		{task.GradingState, file("/etc/nsswitch.conf"), false, ViolationProtected},
		{task.GradingState, file("/etc/alternatives/awk"), false, ViolationProtected},
		{task.GradingState, file("/usr/lib/python311.zip"), false, ViolationProtected},
		{task.GradingWorkspace, dir("/app/sitecustomize", false), false, ViolationProtected},
		{task.GradingWorkspace, file("/app/sitecustomize/__init__.py"), false, ViolationProtected},
		{task.GradingWorkspace, file("/app/usercustomize.cpython-311-x86_64-linux-gnu.so"), false, ViolationProtected},
		{task.GradingWorkspace, file("/app/evil.pth"), false, ""},
		// A repository's metadata never reaches the grader: its config
		// could name filters the grader's git would run.
		{task.GradingWorkspace, file("/app/.git/config"), false, ""},
		{task.GradingWorkspace, file("/app/.git/info/attributes"), false, ""},
		{task.GradingWorkspace, file("/app/sub/.git"), false, ""},
		{task.GradingWorkspace, file("/app/.gitignore"), true, ""},
		{task.GradingState, file("/root/.local/lib/python3.11/site-packages/zz.pth"), false, ""},
		{task.GradingState, file("/etc/nginx/nginx.conf"), true, ""},
		{task.GradingWorkspace, file("/app/etc/ld.so.preload"), true, ""},
		{task.GradingWorkspace, dir("/app/__pycache__", false), false, ""},
		{task.GradingState, file("/usr/lib/python3/dist-packages/m.pyc"), false, ""},
	}
	for _, c := range cases {
		t.Run(c.grading+" "+string(c.e.Kind)+" "+c.e.Path, func(t *testing.T) {
			p := &policy{grading: c.grading, workdir: "/app", protected: []string{"**/conftest.py", "tests/**", "newtests/**"},
				pristine: func(p string) (pristineKind, error) { return pristine[p], nil }}
			d, err := p.decide(c.e)
			if err != nil {
				t.Fatal(err)
			}
			if d.keep != c.keep {
				t.Errorf("keep = %t, want %t", d.keep, c.keep)
			}
			got := ""
			if d.violation != nil {
				got = d.violation.Kind
			}
			if got != c.violates {
				t.Errorf("violation %q, want %q", got, c.violates)
			}
		})
	}
}

func testPristine() map[string]pristineKind {
	m := map[string]pristineKind{}
	for _, d := range []string{"/", "/app", "/app/tests", "/logs", "/usr", "/usr/bin", "/usr/lib", "/usr/lib/python3",
		"/usr/lib/python3/dist-packages", "/etc", "/etc/alternatives", "/root", "/usr/local", "/usr/local/bin"} {
		m[d] = pristineDir
	}
	for _, f := range []string{"/usr/bin/python3", "/usr/bin/cmp", "/usr/bin/sh", "/app/tests/test_a.py", "/bin", "/etc/alternatives/awk"} {
		m[f] = pristineOther
	}
	return m
}

// Judging a whole changeset: what is beneath a refused change is refused,
// and nothing is carried under a parent that is not a directory.
func TestPolicyJudge(t *testing.T) {
	pristine := testPristine()
	p := &policy{grading: task.GradingState, workdir: "/app",
		pristine: func(p string) (pristineKind, error) { return pristine[p], nil }}
	entries := []workspace.Entry{
		// The agent replaced the /bin symlink with a directory holding a
		// trojan sh: the directory is refused, so is what is in it.
		{Path: "/bin", Kind: workspace.KindDir, Opaque: true},
		{Path: "/bin/sh", Kind: workspace.KindFile},
		// A new directory with a new file: both carried.
		{Path: "/opt", Kind: workspace.KindDir},
		{Path: "/opt/tool", Kind: workspace.KindFile},
		// A file whose parent is a pristine file and was not carried.
		{Path: "/usr/bin/cmp", Kind: workspace.KindDir, Opaque: true},
		{Path: "/usr/bin/cmp/x", Kind: workspace.KindFile},
		// Writes under /logs stay violations one by one.
		{Path: "/logs", Kind: workspace.KindDir},
		{Path: "/logs/verifier", Kind: workspace.KindDir},
		{Path: "/logs/verifier/reward.txt", Kind: workspace.KindFile},
	}
	pristine["/opt"] = pristineAbsent
	v, err := p.judge(entries)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/opt", "/opt/tool"} {
		if !v.keep[path] {
			t.Errorf("%s not carried", path)
		}
	}
	for _, path := range []string{"/bin", "/bin/sh", "/usr/bin/cmp", "/usr/bin/cmp/x", "/logs/verifier/reward.txt"} {
		if v.keep[path] {
			t.Errorf("%s carried", path)
		}
	}
	kinds := map[string]string{}
	for _, vi := range v.violations {
		kinds[vi.Path] = vi.Kind
	}
	want := map[string]string{"/bin": ViolationSystemFile, "/usr/bin/cmp": ViolationSystemFile,
		"/logs/verifier": ViolationHarnessPath, "/logs/verifier/reward.txt": ViolationHarnessPath}
	for path, k := range want {
		if kinds[path] != k {
			t.Errorf("violation at %s: %q, want %q (all: %v)", path, kinds[path], k, kinds)
		}
	}
}

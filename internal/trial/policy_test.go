package trial

import (
	"testing"

	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/workspace"
)

// Each rule of the policy, entry by entry: what reaches the grader and what
// is a violation.
func TestPolicy(t *testing.T) {
	pristine := map[string]bool{"/usr/bin/python3": true, "/usr/bin/cmp": true, "/app/tests/test_a.py": true}
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
		{task.GradingState, file("/root/.bashrc"), true, ""},
		{task.GradingState, file("/usr/local/bin/greet"), true, ""},
		{task.GradingState, file("/usr/bin/python3"), false, ViolationSystemFile},
		{task.GradingState, wh("/usr/bin/cmp"), false, ViolationSystemFile},
		{task.GradingState, file("/usr/local/bin/cmp"), false, ViolationSystemFile},
		{task.GradingState, file("/usr/lib/python3/dist-packages/new.py"), true, ""},
		{task.GradingState, file("/usr/lib/python3/dist-packages/sitecustomize.py"), false, ViolationProtected},
		{task.GradingState, file("/logs/verifier/reward.json"), false, ViolationHarnessPath},
		{task.GradingWorkspace, file("/app/__pycache__/stats.cpython-311.pyc"), false, ""},
		{task.GradingWorkspace, dir("/app/__pycache__", false), false, ""},
		{task.GradingState, file("/usr/lib/python3/dist-packages/m.pyc"), false, ""},
	}
	for _, c := range cases {
		t.Run(c.grading+" "+string(c.e.Kind)+" "+c.e.Path, func(t *testing.T) {
			p := &policy{grading: c.grading, workdir: "/app", protected: []string{"**/conftest.py", "tests/**"},
				pristine: func(p string) (bool, error) { return pristine[p], nil }}
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

package tooling

import (
	"fmt"
	"slices"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/task"
)

// exposed is a learned profile of a pytest grader in /app that reads its
// expected outputs from /opt/data, with one of each kind of path.
func exposed() *Profile {
	p := &Profile{Schema: Schema, Source: SourceLearned, CodeRoots: []string{"/app"},
		Files: []string{
			"/", // every process passes it
			"/app/conftest.py",
			"/app/node_modules/left-pad/index.js",
			"/bin",
			"/etc/passwd",
			"/lib64/ld-linux-x86-64.so.2",
			"/opt/data", // listed
			"/opt/data/expected.json",
			"/opt/tools/check", // a command the grader ran
			"/pytest.ini",      // runner configuration, above the workspace
			"/root/.bashrc",
			"/srv/hidden/cases.txt",
			"/srv/py/helper.py",   // a module on the grader's path
			"/tmp/grader-cache/v", // in a directory the grader made
			"/usr/bin/python3",
			"/venv/lib/python3.12/site-packages/pytest/__init__.py",
		},
		Probed:     []string{"/app/pytest.ini", "/etc/ld.so.preload", "/opt/data/extra.json"},
		SearchDirs: []string{"/srv/py", "/usr/bin", "/venv/lib/python3.12/site-packages"},
		Names:      []string{"check", "helper", "pytest", "python3"},
		Made:       []string{"/tmp/grader-cache"},
		Configs:    []string{"conftest.py", "node_modules", "pytest.ini"},
		Stores:     []string{"/app/node_modules", "/venv"},
	}
	p.normalize()
	return p
}

func TestExposure(t *testing.T) {
	inside := []string{"/app/conftest.py", "/app/node_modules/left-pad/index.js", "/app/pytest.ini"}
	hidden := []string{"/opt/data", "/opt/data/expected.json", "/srv/hidden/cases.txt"}
	var outside []string
	for _, q := range append(slices.Clone(exposed().Files), exposed().Probed...) {
		if !slices.Contains(inside, q) {
			outside = append(outside, q)
		}
	}
	slices.Sort(outside)
	cases := []struct {
		name, grading string
		outside       []string
	}{
		{"state grading carries everything", task.GradingState, outside},
		{"workspace grading carries the workspace", task.GradingWorkspace, []string{}},
		{"an unknown mode is taken as workspace grading", "", []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := exposed().Exposure(c.grading)
			if !slices.Equal(e.Outside, c.outside) {
				t.Errorf("Outside = %q\nwant       %q", e.Outside, c.outside)
			}
			if !slices.Equal(e.Inside, inside) {
				t.Errorf("Inside = %q, want %q", e.Inside, inside)
			}
			if !slices.Equal(e.Hidden, hidden) {
				t.Errorf("Hidden = %q, want %q", e.Hidden, hidden)
			}
		})
	}
}

// The code roots decide what is the workspace's: a profile whose grader
// reads data beside a workspace in /srv does not hide /srv/app's files.
func TestExposureCodeRoots(t *testing.T) {
	p := &Profile{Schema: Schema, Source: SourceLearned, CodeRoots: []string{"/srv/app"},
		Files: []string{"/srv", "/srv/app/pytest.ini", "/srv/expected"}}
	p.normalize()
	e := p.Exposure(task.GradingState)
	if want := []string{"/srv/expected"}; !slices.Equal(e.Hidden, want) {
		t.Errorf("Hidden = %q, want %q (/srv is above the workspace, /srv/app/pytest.ini in it)", e.Hidden, want)
	}
	if want := []string{"/srv", "/srv/expected"}; !slices.Equal(e.Outside, want) {
		t.Errorf("Outside = %q, want %q", e.Outside, want)
	}
	if want := []string{"/srv/app/pytest.ini"}; !slices.Equal(e.Inside, want) {
		t.Errorf("Inside = %q, want %q", e.Inside, want)
	}
}

func ExampleProfile_Exposure() {
	p := &Profile{Schema: Schema, Source: SourceLearned, CodeRoots: []string{"/app"},
		Files:  []string{"/app/conftest.py", "/opt/data/expected.json", "/usr/bin/python3"},
		Probed: []string{"/app/pytest.ini"}}
	e := p.Exposure(task.GradingState)
	fmt.Println("outside:", e.Outside)
	fmt.Println("inside:", e.Inside)
	fmt.Println("hidden:", e.Hidden)
	// Output:
	// outside: [/opt/data/expected.json /usr/bin/python3]
	// inside: [/app/conftest.py /app/pytest.ini]
	// hidden: [/opt/data/expected.json]
}

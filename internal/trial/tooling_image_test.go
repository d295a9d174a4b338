package trial

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/image"
	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/testcorpus"
)

// pyImageRef is an image built as a task author's Dockerfile would leave
// it: a Debian trixie base (Python 3.13 and pytest from Debian), a layer
// that makes a virtual environment under /opt with a test library in it
// and a verifier script beside it (what `RUN python3 -m venv
// --system-site-packages /opt/venv && pip install …` and `COPY verifier
// /opt/verifier` leave), one that deletes a base file, and the workdir.
const pyImageRef = "proctor-test/trixie-verifier:1"

// The venv's site directory: the tests' own library lives there.
const venvSite = "/opt/venv/lib/python3.13/site-packages"

var (
	pyImageOnce sync.Once
	pyImageErr  error
)

func pyImage(t *testing.T) {
	t.Helper()
	requireRoot(t)
	root := testcorpus.TrixieGit(t)
	pyImageOnce.Do(func() {
		archive := testcorpus.DebianImage(t, root, pyImageRef, "/app",
			testcorpus.Layer{
				Files: map[string]string{
					"opt/venv/pyvenv.cfg": "home = /usr/bin\ninclude-system-site-packages = true\nversion = 3.13.5\nexecutable = /usr/bin/python3.13\ncommand = /usr/bin/python3 -m venv --system-site-packages /opt/venv\n",
					strings.TrimPrefix(venvSite, "/") + "/checks/__init__.py": "def expect(got, want):\n    assert got == want, f\"got {got!r}, want {want!r}\"\n",
					"opt/verifier/run.py": `import sys
sys.path.insert(0, "/app")
import pytest
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "/tests/test_outputs.py"]))
`,
				},
				Links: map[string]string{
					"opt/venv/bin/python3":    "/usr/bin/python3",
					"opt/venv/bin/python":     "python3",
					"opt/venv/bin/python3.13": "python3",
					"opt/venv/lib64":          "lib",
				},
				Deletes: []string{"etc/motd"},
			},
			testcorpus.Layer{Files: map[string]string{"app/README.md": "Put your answer in answer.py.\n"}})
		st, err := image.Open(filepath.Join(sharedCache, ImageStoreDir))
		if err == nil {
			_, err = st.Import(archive)
		}
		pyImageErr = err
	})
	if pyImageErr != nil {
		t.Fatal(pyImageErr)
	}
}

// pyImageTask is a Terminal-Bench-style task on pyImageRef: test.sh runs
// the verifier script with the venv's Python; the tests use the venv's
// library and import the agent's module from /app.
func pyImageTask(t *testing.T, grading string) *task.Task {
	t.Helper()
	pyImage(t)
	dir := t.TempDir()
	files := map[string]string{
		"task.toml": fmt.Sprintf(`version = "1.0"
[agent]
timeout_sec = 120.0
[verifier]
timeout_sec = 120.0
[environment]
docker_image = %q
memory_mb = 2048
storage_mb = 512
[proctor]
grading = %q
`, pyImageRef, grading),
		"instruction.md":        "Write /app/answer.py: answer() returns 42.\n",
		"tests/test.sh":         "#!/bin/bash\ncd /app && /opt/venv/bin/python3 /opt/verifier/run.py\nif [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n",
		"tests/test_outputs.py": "from checks import expect\nfrom answer import answer\n\ndef test_answer():\n    expect(answer(), 42)\n",
		"solution/solve.sh":     "#!/bin/bash\nprintf 'def answer():\\n    return 42\\n' > /app/answer.py\n",
	}
	return loadWritten(t, dir, files)
}

// imageAttacks hijack the tooling an image brings outside /usr: the
// verifier script and the venv under /opt, the test library in the venv,
// the runner found through the workdir the script puts first.
var imageAttacks = []struct {
	name      string
	stateOnly bool
	agent     string
}{
	{"the verifier script under /opt rewritten", true, `echo 'raise SystemExit(0)' > /opt/verifier/run.py`},
	{"the test library in the venv rewritten", true, `printf 'def expect(got, want):\n    pass\n' > ` + venvSite + `/checks/__init__.py`},
	{"the test library shadowed in the workdir", false, `mkdir -p /app/checks && printf 'def expect(got, want):\n    pass\n' > /app/checks/__init__.py`},
	{"the runner shadowed in the workdir", false, `mkdir -p /app/pytest && printf 'def main(*a, **k):\n    return 0\n' > /app/pytest/__init__.py`},
	{"a .pth start-up file in the venv", true, `echo 'import os; os._exit(0)' > ` + venvSite + `/zz.pth`},
	{"the venv's configuration pointed elsewhere", true, `mkdir -p /tmp/py/bin && printf '#!/bin/sh\nexit 0\n' > /tmp/py/bin/python3 && chmod +x /tmp/py/bin/python3 && rm /opt/venv/bin/python3 && ln -s /tmp/py/bin/python3 /opt/venv/bin/python3`},
	{"runner configuration at /", true, `printf '[pytest]\naddopts = --co\n' > /pytest.ini`},
	{"another platform's standard module in the workdir", false, `printf 'import os\nos._exit(0)\n' > /app/msvcrt.py; cp /app/msvcrt.py /app/_winapi.py; cp /app/msvcrt.py /app/nt.py`},
	{"the venv's directory replaced", true, `rm -rf /opt/venv/lib && mkdir -p ` + venvSite + `/checks && printf 'def expect(got, want):\n    pass\n' > ` + venvSite + `/checks/__init__.py`},
}

// TestToolingOnAnImage: the freeze on a task whose image brings its own
// verifier tooling outside /usr (a venv and a script under /opt), learned
// from the image, in state and workspace grading. Agents that solve the
// task their own way, a module installed into the venv among them, pass
// clean.
func TestToolingOnAnImage(t *testing.T) {
	if raceEnabled {
		t.Skip("trials under the race detector are too slow")
	}
	requireRoot(t)
	for _, grading := range []string{task.GradingState, task.GradingWorkspace} {
		t.Run(grading, func(t *testing.T) {
			tk := pyImageTask(t, grading)
			for _, a := range imageAttacks {
				if a.stateOnly && grading != task.GradingState {
					continue
				}
				hijackFails(t, tk, a.name, a.agent)
			}
			honest := []struct {
				name, agent string
				stateOnly   bool
			}{
				pyHonest[0], pyHonest[1],
				{"a module of its own installed into the venv", `mkdir -p ` + venvSite + `/sixty && printf 'N = 42\n' > ` + venvSite + `/sixty/__init__.py; printf 'from sixty import N\ndef answer():\n    return N\n' > /app/answer.py`, true},
			}
			for _, h := range honest {
				if h.stateOnly && grading != task.GradingState {
					continue
				}
				honestPasses(t, tk, h.name, h.agent)
			}
			v, out := runTrial(t, tk, "true", "")
			if v.Passed {
				t.Errorf("a do-nothing agent passed:\n%s", readFile(t, filepath.Join(out, GraderLog)))
			}
			b, err := os.ReadFile(filepath.Join(out, ToolingFile))
			must(t, err)
			for _, want := range []string{"/opt/verifier/run.py", venvSite + "/checks/__init__.py", "/opt/venv/pyvenv.cfg"} {
				if !strings.Contains(string(b), `"`+want+`"`) {
					t.Errorf("the profile does not name %s", want)
				}
			}
		})
	}
}

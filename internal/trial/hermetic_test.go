package trial

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/image"
	"github.com/proctor-sandbox/proctor/internal/testcorpus"
)

// tbImageRef is the trixie root (Python 3.13, git) as an image: what a
// Terminal-Bench 2 task's Dockerfile starts from, give or take.
const tbImageRef = "proctor-test/trixie:1"

var (
	tbImageOnce sync.Once
	tbImageErr  error
)

func tbImage(t *testing.T) string {
	t.Helper()
	requireRoot(t)
	root := testcorpus.TrixieGit(t)
	tbImageOnce.Do(func() {
		archive := testcorpus.DebianImage(t, root, tbImageRef, "/app",
			testcorpus.Layer{Files: map[string]string{"app/README.md": "Write the answer to /app/answer.py.\n"}})
		st, err := image.Open(filepath.Join(sharedCache, ImageStoreDir))
		if err == nil {
			_, err = st.Import(archive)
		}
		tbImageErr = err
	})
	if tbImageErr != nil {
		t.Fatal(tbImageErr)
	}
	return root
}

// tbVerifier is test.sh as published Terminal-Bench 2 tasks have it.
const tbVerifier = `#!/bin/bash

# Install curl
apt-get update
apt-get install -y curl

# Install uv
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh

source $HOME/.local/bin/env

# Check if we're in a valid working directory
if [ "$PWD" = "/" ]; then
    echo "Error: No working directory set. Please set a WORKDIR in your Dockerfile before running this script."
    exit 1
fi

uvx \
  -p 3.13 \
  -w pytest==8.4.1 \
  -w pytest-json-ctrf==0.3.5 \
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA


if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
`

// A Terminal-Bench 2 verifier that fetches its own tools (apt-get, curl |
// sh, uvx) runs: its fetches are recorded once, on the pristine
// environment with the oracle's changes, through the grader's allow-list
// (the hosts standing in for the internet reached by host map, under the
// test's CA); every trial's grader gets that recording replayed, with the
// stand-in stopped, and nothing else: the agent's code that fetches a URL
// the pristine verifier never did is refused and the trial compromised. A
// regrade gets the same verdict from the bundle alone.
func TestHermeticVerifier(t *testing.T) {
	if raceEnabled {
		t.Skip("trials under the race detector are too slow")
	}
	requireRoot(t)
	root := tbImage(t)
	inet := testcorpus.StartInternet(t, filepath.Join(root, "usr/lib/python3/dist-packages"))
	dir := t.TempDir()
	tk := loadWritten(t, dir, map[string]string{
		"task.toml": `schema_version = "1.1"
artifacts = []

[task]
name = "proctor-test/hermetic"

[verifier]
timeout_sec = 600.0

[agent]
timeout_sec = 300.0

[environment]
build_timeout_sec = 600.0
docker_image = "` + tbImageRef + `"
cpus = 1
memory_mb = 2048
storage_mb = 2048
gpus = 0
allow_internet = true
mcp_servers = []

[verifier.env]

[environment.env]

[solution.env]
`,
		"instruction.md":        "Write /app/answer.py: answer() returns 42.\n",
		"tests/test.sh":         tbVerifier,
		"tests/test_outputs.py": "import sys\nsys.path.insert(0, '/app')\nfrom answer import answer\n\ndef test_answer():\n    assert answer() == 42\n",
		"solution/solve.sh":     "#!/bin/bash\ncat > /app/answer.py <<'EOF'\ndef answer():\n    return 6 * 7\nEOF\n",
	})
	net := NetOptions{VerifierHosts: append(testcorpus.AptHosts(t, root), testcorpus.InternetHosts...), HostMap: inet.HostMap, CAFiles: []string{inet.CAFile}}
	run := func(agent string) (*Verdict, string) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out")
		v, err := Run(context.Background(), Options{Task: tk, Agent: agent, Out: out, CacheDir: sharedCache, Key: testKey, Net: net})
		if err != nil {
			t.Fatalf("Run(%q): %v\ngrader log:\n%s", agent, err, readFile(t, filepath.Join(out, GraderLog)))
		}
		return v, out
	}
	// The first trial learns: the oracle, its grader through the recorder.
	honest := "printf 'def answer():\\n    return 42\\n' > /app/answer.py"
	v, out := run(honest)
	if !v.Passed || v.Status != StatusClean || v.Hermetic == nil || v.Hermetic.Cached || v.Hermetic.Exchanges == 0 {
		t.Fatalf("first trial: passed=%v status %s violations %s hermetic %+v\ngrader log:\n%s", v.Passed, v.Status, violations(v), v.Hermetic,
			readFile(t, filepath.Join(out, GraderLog)))
	}
	for _, want := range []string{"https://astral.sh/uv/0.9.5/install.sh", "https://pypi.org/simple/pytest/"} {
		if !slices.Contains(inet.Served(), want) {
			t.Errorf("the stand-in never served %s: %v", want, inet.Served())
		}
	}
	// From now on the internet is gone: every grader is served the record.
	inet.Close()
	cases := []struct {
		name, agent string
		passed      bool
		status      Status
		network     bool // a network violation
	}{
		{"honest", honest, true, StatusClean, false},
		{"wrong", "printf 'def answer():\\n    return 0\\n' > /app/answer.py", false, StatusClean, false},
		{"fetches the answer as the tests import it", `cat > /app/answer.py <<'EOF'
import urllib.request
try:
    urllib.request.urlopen("https://pypi.org/simple/the-answer/", timeout=10).read()
except Exception:
    pass
def answer():
    return 42
EOF`, false, StatusCompromised, true},
	}
	for _, c := range cases {
		v, out := run(c.agent)
		if v.Passed != c.passed || v.Status != c.status || hasViolation(v, ViolationNetwork) != c.network {
			t.Errorf("%s: passed=%v status %s violations %s; want %v %s network %v\ngrader log:\n%s", c.name, v.Passed, v.Status,
				violations(v), c.passed, c.status, c.network, readFile(t, filepath.Join(out, GraderLog)))
		}
		if v.Hermetic == nil || !v.Hermetic.Cached || v.Hermetic.Served == 0 {
			t.Errorf("%s: hermetic %+v, want the cached recording served", c.name, v.Hermetic)
		}
		if c.name == "honest" {
			verifiedEvents(t, out) // the recording's index and bodies are in the bundle
			// Regraded from the bundle alone, with the internet gone.
			again, err := Regrade(context.Background(), RegradeOptions{Task: tk, Archive: filepath.Join(out, ChangesetFile),
				Digest: v.Changeset.Digest, Out: filepath.Join(t.TempDir(), "regrade"), CacheDir: sharedCache,
				AgentPhase: v.Phases[PhaseAgent], Tooling: filepath.Join(out, ToolingFile), ToolingDigest: v.Tooling.Digest,
				Recording: out, RecordingDigest: v.Hermetic.Digest})
			if err != nil {
				t.Fatalf("regrade: %v", err)
			}
			if again.Passed != v.Passed || again.Status != v.Status || again.Hermetic.Digest != v.Hermetic.Digest {
				t.Errorf("regrade: passed=%v status %s, hermetic %+v; the trial: %v %s", again.Passed, again.Status, again.Hermetic, v.Passed, v.Status)
			}
		}
	}
}

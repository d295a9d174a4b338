package trial

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The task's artifacts are copied out after the agent phase, as Harbor
// does, into OUT/artifacts and the bundle: files and directories only,
// the excluded left out, a link or a fifo never made on the host (a link
// to a host secret copies nothing), a missing source an error of its own
// that leaves the trial's verdict as it was.
func TestArtifactsCollected(t *testing.T) {
	if raceEnabled {
		t.Skip("trials under the race detector are too slow")
	}
	requireRoot(t)
	requireTool(t, "tar")
	tk := writeTask(t, taskSpec{
		top: `artifacts = [{source = "/app/out", destination = "run/out", exclude = ["*.tmp"]}, "/app/single.txt", "/app/missing", "/app/evil"]
`,
		files: map[string]string{"a.txt": "a\n"},
		test:  "echo 1 > /logs/verifier/reward.txt",
	})
	agent := `mkdir -p /app/out/sub && echo log > /app/out/log.txt && echo deep > /app/out/sub/deep.txt && echo x > /app/out/skip.tmp &&
ln -s /etc/shadow /app/out/link && mkfifo /app/out/fifo && echo one > /app/single.txt && ln -s /etc /app/evil`
	v, out := runTrial(t, tk, agent, "")
	if !v.Passed {
		t.Fatalf("the trial did not pass: %s %s", v.Status, violations(v))
	}
	for name, want := range map[string]string{"run/out/log.txt": "log\n", "run/out/sub/deep.txt": "deep\n", "single.txt": "one\n"} {
		if got := readFile(t, filepath.Join(out, ArtifactsDir, name)); got != want {
			t.Errorf("artifact %s: %q, want %q", name, got, want)
		}
	}
	for _, name := range []string{"run/out/skip.tmp", "run/out/link", "run/out/fifo", "evil", "evil/shadow", "evil/passwd"} {
		if _, err := os.Lstat(filepath.Join(out, ArtifactsDir, name)); err == nil {
			t.Errorf("artifact %s was made on the host", name)
		}
	}
	if len(v.Collected) != 4 {
		t.Fatalf("collected %+v", v.Collected)
	}
	if c := v.Collected[0]; c.Files != 2 || c.Skipped != 3 || c.Error != "" {
		t.Errorf("/app/out: %+v, want 2 files, 3 skipped (the .tmp, the link, the fifo)", c)
	}
	if c := v.Collected[2]; c.Error == "" {
		t.Errorf("/app/missing: %+v, want an error", c)
	}
	if c := v.Collected[3]; c.Files != 0 || c.Skipped != 1 {
		t.Errorf("/app/evil, a link to /etc: %+v, want the link skipped and nothing copied", c)
	}
	verifiedEvents(t, out) // the collected files' archive is hashed into the bundle
	if !slices.Contains(v.Artifacts, ArtifactsArchive) {
		t.Errorf("bundle artifacts %v, want %s among them", v.Artifacts, ArtifactsArchive)
	}
	b, err := os.ReadFile(filepath.Join(out, ArtifactsArchive))
	if err != nil || !strings.Contains(string(b), "deep\n") || strings.Contains(string(b), "root:") {
		t.Errorf("%s: %v, holding the collected files and nothing of /etc?", ArtifactsArchive, err)
	}
}

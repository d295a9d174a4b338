package trial

import (
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/bundle"
)

// Every trial ends in a signed bundle that verifies with the trial's key,
// binds the verdict it wrote, lists its artifacts and records its steps.
func TestTrialBundle(t *testing.T) {
	tk := exampleTask(t, "py-bugfix")
	v, out := runTrial(t, tk, "sh /agent/conftest.sh", agentsDir(t))
	data, err := os.ReadFile(filepath.Join(out, BundleFile))
	if err != nil {
		t.Fatal(err)
	}
	var report bundle.ArtifactReport
	p, err := bundle.Verify(data, bundle.WithPublicKey(testKey.Public().(ed25519.PublicKey)),
		bundle.WithArtifactDir(out), bundle.WithRequireArtifacts(), bundle.WithArtifactReport(&report))
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	var bv Verdict
	if err := json.Unmarshal(p.Verdict, &bv); err != nil {
		t.Fatal(err)
	}
	if bv.Status != v.Status || bv.Passed != v.Passed || bv.Changeset.Digest != v.Changeset.Digest || len(bv.Violations) != len(v.Violations) {
		t.Errorf("the bundled verdict differs from verdict.json: %+v vs %+v", bv, v)
	}
	if p.Provenance.TaskDigest != v.Task.Digest || p.Provenance.Agent.DirDigest != v.Agent.DirDigest || p.Provenance.Agent.Command != v.Agent.Command {
		t.Errorf("provenance %+v does not match the verdict", p.Provenance)
	}
	for _, n := range []string{AgentLog, GraderLog, ChangesetFile, InstructionFile} {
		if !strings.Contains(strings.Join(report.Checked, " "), n) {
			t.Errorf("artifact %s not in the manifest (checked %v)", n, report.Checked)
		}
	}
	var kinds []string
	for _, e := range p.Timeline {
		kinds = append(kinds, e.Kind)
	}
	got := strings.Join(kinds, " ")
	for _, k := range []string{"trial.start", "agent.start", "agent.end", "freeze", "violation", "grader.start", "grader.end", "reward", "verdict"} {
		if !strings.Contains(got, k) {
			t.Errorf("timeline %q lacks %s", got, k)
		}
	}
	// One byte of an artifact changed: the bundle no longer verifies.
	log := filepath.Join(out, AgentLog)
	if err := os.WriteFile(log, append(readBytes(t, log), 'x'), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := bundle.Verify(data, bundle.WithArtifactDir(out)); err == nil {
		t.Error("a changed agent log still verifies")
	}
}

func readBytes(t *testing.T, p string) []byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

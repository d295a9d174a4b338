package trial

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Regrading a trial's changeset against the unchanged task reaches the same
// decisions and the same verdict, every time; an archive that is not the
// trial's is refused.
func TestRegradeAgrees(t *testing.T) {
	cases := []struct{ task, agent string }{
		{"py-bugfix", "sh /agent/honest.sh"},
		{"py-bugfix", "sh /agent/conftest.sh"},
		{"hello-state", "sh /agent/trojan.sh"},
		{"py-bugfix", "true"},
	}
	for _, c := range cases {
		t.Run(c.task+" "+c.agent, func(t *testing.T) {
			tk := exampleTask(t, c.task)
			v, out := runTrial(t, tk, c.agent, agentsDir(t))
			for i := range 2 {
				rout := filepath.Join(t.TempDir(), "regrade")
				rv, err := Regrade(context.Background(), RegradeOptions{Task: tk, Archive: filepath.Join(out, ChangesetFile),
					Digest: v.Changeset.Digest, Out: rout, CacheDir: sharedCache})
				if err != nil {
					t.Fatalf("regrade %d: %v", i, err)
				}
				if rv.Passed != v.Passed || rv.Reward != v.Reward || rv.Status != v.Status ||
					!reflect.DeepEqual(rv.Violations, v.Violations) || rv.Changeset.Permitted != v.Changeset.Permitted ||
					rv.Changeset.Digest != v.Changeset.Digest || rv.Task.Digest != v.Task.Digest {
					t.Fatalf("regrade %d differs:\n got passed=%t reward=%g status=%s violations=%v permitted=%d\nwant passed=%t reward=%g status=%s violations=%v permitted=%d",
						i, rv.Passed, rv.Reward, rv.Status, rv.Violations, rv.Changeset.Permitted,
						v.Passed, v.Reward, v.Status, v.Violations, v.Changeset.Permitted)
				}
				if rv.Phases[PhaseAgent].Ran {
					t.Error("a regrade claims the agent ran")
				}
			}
		})
	}
}

func TestRegradeRefusesAnotherArchive(t *testing.T) {
	tk := exampleTask(t, "py-bugfix")
	v, out := runTrial(t, tk, "sh /agent/honest.sh", agentsDir(t))
	_, out2 := runTrial(t, tk, "echo other > /app/other", "")
	_, err := Regrade(context.Background(), RegradeOptions{Task: tk, Archive: filepath.Join(out2, ChangesetFile),
		Digest: v.Changeset.Digest, Out: filepath.Join(t.TempDir(), "r"), CacheDir: sharedCache})
	if err == nil || !strings.Contains(err.Error(), "not the trial's changeset") {
		t.Fatalf("regrade of another trial's archive: %v", err)
	}
	// A flipped byte in the archive is refused too.
	data, err := os.ReadFile(filepath.Join(out, ChangesetFile))
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(data), "sum(xs)")
	if i < 0 {
		t.Fatal("the honest fix is not in the archive")
	}
	data[i] = 'S'
	bad := filepath.Join(t.TempDir(), "changeset.tar")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Regrade(context.Background(), RegradeOptions{Task: tk, Archive: bad,
		Digest: v.Changeset.Digest, Out: filepath.Join(t.TempDir(), "r"), CacheDir: sharedCache})
	if err == nil {
		t.Fatal("a tampered archive was regraded")
	}
}

// A trial whose agent ran out of time is regraded to the same status when
// the regrade is told how the agent phase ended.
func TestRegradeKeepsTheAgentPhase(t *testing.T) {
	tk := writeTask(t, taskSpec{timeoutSec: 2, test: `[ -f /app/out ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt`})
	v, out := runTrial(t, tk, "echo done > /app/out; sleep 600", "")
	if v.Status != StatusTimeout || !v.Passed {
		t.Fatalf("trial: status %s passed %t", v.Status, v.Passed)
	}
	rv, err := Regrade(context.Background(), RegradeOptions{Task: tk, Archive: filepath.Join(out, ChangesetFile),
		Digest: v.Changeset.Digest, Out: filepath.Join(t.TempDir(), "r"), CacheDir: sharedCache, AgentPhase: v.Phases[PhaseAgent]})
	if err != nil {
		t.Fatal(err)
	}
	if rv.Status != v.Status || rv.Passed != v.Passed || rv.Reward != v.Reward {
		t.Errorf("regrade: status %s passed %t reward %g; trial: %s %t %g", rv.Status, rv.Passed, rv.Reward, v.Status, v.Passed, v.Reward)
	}
}

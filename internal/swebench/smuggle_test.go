package swebench

import (
	"context"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/trial"
)

// The gold patch's added lines in an agent's notes are a smuggled answer,
// named by the patch's line and hunk; the problem statement and the code
// at the base commit, which the agent is given, are not.
func TestGoldPatchSmuggled(t *testing.T) {
	needTrials(t)
	repos := t.TempDir()
	const fix = "return operator.add(a, b)  # THE-FIX: add() must add its operands"
	tk := importOne(t, repos, upstreamFixing(t, repos, fix), Options{})
	cache := os.Getenv("PROCTOR_TEST_CACHE")
	if cache == "" {
		cache = t.TempDir()
	}
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	cases := []struct {
		name, notes string
		want        []trial.Violation
	}{
		{"the fix", "# Notes\n\nFor calc, the fix is:\n\n    " + fix + "\n", []trial.Violation{{Kind: trial.ViolationSmuggledAnswer,
			Path: "/agent/AGENTS.md:5", Detail: "solution/gold.patch:8 (gold patch hunk @@ -1,5 +1,5 @@ of calc.py) (1 line, 55 characters)"}}},
		{"the problem and the code", "# Notes\n\nadd() subtracts. Make add(a, b) return a + b.\n\n    def add(a, b):\n        return a - b\n", []trial.Violation{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "AGENTS.md"), []byte(c.notes), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Chmod(dir, 0o755)
			out := filepath.Join(t.TempDir(), "out")
			v, err := trial.Run(context.Background(), trial.Options{Task: tk, Agent: "true", AgentDir: dir, Out: out, CacheDir: cache, Key: key})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if !reflect.DeepEqual(v.Violations, c.want) || v.Answers == nil || v.Answers.Fragments == 0 {
				t.Fatalf("violations %+v, answers %+v, want %+v", v.Violations, v.Answers, c.want)
			}
		})
	}
}

package grade

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadReward(t *testing.T) {
	cases := []struct {
		name    string
		files   map[string]string
		want    float64
		wantErr string
	}{
		{"json", map[string]string{"reward.json": `{"reward": 1.0, "other": 3}`}, 1, ""},
		{"both, agreeing", map[string]string{"reward.json": `{"reward": 1}`, "reward.txt": "1"}, 1, ""},
		{"both, disagreeing", map[string]string{"reward.json": `{"reward": 1}`, "reward.txt": "0"}, 0, "disagree"},
		{"txt", map[string]string{"reward.txt": " 0.5\n"}, 0.5, ""},
		{"txt integer", map[string]string{"reward.txt": "1"}, 1, ""},
		{"none", nil, 0, "no reward"},
		{"json without key", map[string]string{"reward.json": `{"score": 1}`}, 0, `no "reward" key`},
		{"json not a number", map[string]string{"reward.json": `{"reward": "1"}`}, 0, "not a number"},
		{"json garbage", map[string]string{"reward.json": `PASSED`}, 0, "not a JSON object"},
		{"txt garbage", map[string]string{"reward.txt": "PASSED"}, 0, "not a number"},
		{"txt NaN", map[string]string{"reward.txt": "NaN"}, 0, "finite"},
		{"txt Inf", map[string]string{"reward.txt": "+Inf"}, 0, "finite"},
		{"too large", map[string]string{"reward.txt": strings.Repeat("1", maxRewardFile+1)}, 0, "larger than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, v := range c.files {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r, err := ReadReward(dir)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("ReadReward = %v, %v: want error containing %q", r, err, c.wantErr)
				}
				return
			}
			if err != nil || r.Value != c.want {
				t.Fatalf("ReadReward = %v, %v: want %v", r, err, c.want)
			}
		})
	}
}

// A grader-side symlink (planted by anyone inside) must never make the host
// read a file outside the results directory.
func TestReadRewardRefusesSymlinksAndSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "reward.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadReward(dir); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("symlinked reward.txt: %v: want a refusal", err)
	}
	dir2 := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir2, "reward.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadReward(dir2)
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("fifo reward.json: %v: want a refusal (and no hang)", err)
	}
	if _, err := ReadReward(filepath.Join(dir, "missing")); err == nil || errors.Is(err, ErrNoReward) {
		t.Fatalf("missing results dir: %v: want an open error", err)
	}
}

package trial

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The agent's log directories are collected from its /tmp after the agent
// phase, and the agent owns every component of their path: a link in
// place of a parent (/tmp/proctor-agent -> a host directory) must not
// make the host pack a host directory into OUT and the bundle.
func TestAgentLogsFollowNoLinkOnTheWay(t *testing.T) {
	if raceEnabled {
		t.Skip("trials under the race detector are too slow")
	}
	requireRoot(t)
	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(host, "claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(host, "claude", "secret.txt"), []byte("HOST-SECRET-0451\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	layer := t.TempDir()
	if err := os.WriteFile(filepath.Join(layer, "bin"), []byte("#!/bin/sh\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	tk := writeTask(t, taskSpec{files: map[string]string{"a.txt": "a\n"}, test: "echo 1 > /logs/verifier/reward.txt"})
	agent := `mkdir -p /tmp/honest/logs && echo mine > /tmp/honest/logs/a.txt && ln -s ` + shellQuote(host) + ` /tmp/proctor-agent`
	out := filepath.Join(t.TempDir(), "out")
	v, err := Run(context.Background(), Options{
		Task: tk, Agent: agent, Out: out, CacheDir: sharedCache, Key: testKey,
		AgentLayer: &AgentLayer{Dir: layer, Recipe: "fake", RecipeDigest: "sha256:" + strings.Repeat("1", 64), Digest: "sha256:" + strings.Repeat("2", 64),
			Logs: []string{"/tmp/proctor-agent/claude", "/tmp/honest/logs"}},
	})
	if err != nil {
		t.Fatalf("Run: %v\nagent log:\n%s", err, readFile(t, filepath.Join(out, AgentLog)))
	}
	if got := readFile(t, filepath.Join(out, AgentLogsDir, "logs", "a.txt")); got != "mine\n" {
		t.Errorf("the honest log directory: a.txt %q, want it collected", got)
	}
	if _, err := os.Lstat(filepath.Join(out, AgentLogsDir, "claude", "secret.txt")); err == nil {
		t.Errorf("a host file was collected as the agent's log, through a link the agent made")
	}
	for _, a := range v.Artifacts {
		if b, _ := os.ReadFile(filepath.Join(out, a)); strings.Contains(string(b), "HOST-SECRET-0451") {
			t.Errorf("the bundle's artifact %s holds a host file", a)
		}
	}
}

package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/agentlayer"
	"github.com/proctor-sandbox/proctor/internal/recipe"
)

// proctor agent ls reads the cache's manifests, which anyone who can
// write the cache controls: a short digest in one is reported as broken,
// not a panic.
func TestAgentLsHostileManifest(t *testing.T) {
	cat, err := recipe.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	r, _ := cat.Lookup("codex")
	cache := t.TempDir()
	dir := agentlayer.Dir(cache, r)
	bin := filepath.Join(dir, "layer", filepath.FromSlash(r.Package.Bin))
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	manifest := `{"schema":"` + agentlayer.Schema + `","recipe":"codex","package":"` + r.Package.NPM + `","version":"` + r.Package.Version +
		`","recipe_digest":"` + r.Digest() + `","digest":"sha256:x"}`
	if err := os.WriteFile(filepath.Join(dir, "layer.json"), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PROCTOR_CONFIG", "")
	var stdout, stderr bytes.Buffer
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("proctor agent ls panicked: %v", p)
			}
		}()
		Main([]string{"agent", "ls", "--cache-dir", cache}, nil, &stdout, &stderr)
	}()
	if !strings.Contains(stdout.String(), "broken") {
		t.Errorf("the hostile manifest is not reported broken:\n%s%s", stdout.String(), stderr.String())
	}
}

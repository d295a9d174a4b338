package agentlayer

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proctor-sandbox/proctor/internal/recipe"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.InitCommand {
		os.Exit(sandbox.RunInit(os.Args[2:]))
	}
	os.Exit(m.Run())
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("agent layers need root (idmapped binds); CI runs as root")
		}
		t.Skip("needs root: agent layers are installed in a sandbox with idmapped binds")
	}
}

// The shipped recipes install from the registry, pinned, and their
// executables run: Claude Code's glibc binary and Codex's static one.
func TestInstallShippedRecipes(t *testing.T) {
	requireRoot(t)
	cat, err := recipe.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	for _, name := range []string{"codex", "claude-code"} {
		t.Run(name, func(t *testing.T) {
			r, _ := cat.Lookup(name)
			var log bytes.Buffer
			start := time.Now()
			l, err := Ensure(context.Background(), r, Options{CacheDir: cache, Log: &log})
			if err != nil {
				t.Fatalf("%v\n%s", err, log.String())
			}
			t.Logf("%s installed in %v: %s, %d packages", name, time.Since(start).Round(time.Millisecond), l.Digest, len(l.Packages))
			if !strings.Contains(log.String(), "proxy allow CONNECT") {
				t.Errorf("the install did not go through the proxy:\n%s", log.String())
			}
			again, err := Ensure(context.Background(), r, Options{CacheDir: cache, Registry: "http://127.0.0.1:1/"})
			if err != nil || again.Digest != l.Digest {
				t.Fatalf("a second Ensure installed again: %v", err)
			}
			var out, errOut bytes.Buffer // apart: written from two goroutines
			res, err := sandbox.Run(context.Background(), sandbox.Spec{
				Rootfs: sandbox.RootfsHost,
				Binds:  []sandbox.Bind{{Src: l.Dir, Dst: recipe.LayerPath}},
				Args:   []string{filepath.Join(recipe.LayerPath, r.Package.Bin), "--version"},
				Env:    []string{"HOME=/tmp"},
				Stdout: &out, Stderr: &errOut,
			})
			if err != nil || res.ExitCode != 0 {
				t.Fatalf("%s --version: %v %+v\n%s%s", name, err, res, out.String(), errOut.String())
			}
			t.Logf("%s --version: %s", name, strings.TrimSpace(out.String()))
		})
	}
}

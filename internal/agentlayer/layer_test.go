package agentlayer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/recipe"
	"github.com/proctor-sandbox/proctor/internal/task"
)

const pinned = "sha512-KhzYlkKPxoNssR8CEm45IjqnFWn7UtlF4CiD3tOJPea51xBs7MaHy0UQG9GSbCqk6Lrjn5QdJDV0QD1/FgWlGw=="
const other = "sha512-2ZP53HuNspqL1lCX9Xc2XfoSq26VjjQ7XC08dTnkpetzH0kkAN1TTM3K1YOSwzAqikCdjQUzMV0haZmdxhPhjg=="

// What npm resolved is checked against the recipe: a registry that served
// other bytes under the pinned version, another version, a link or a
// package without integrity are refused.
func TestPackagesOf(t *testing.T) {
	r := &recipe.Recipe{Name: "codex", Package: recipe.Package{NPM: "@openai/codex", Version: "0.169.0", Integrity: pinned}}
	lock := func(version, integrity, extra string) []byte {
		return []byte(`{"lockfileVersion": 3, "packages": {"": {},
			"node_modules/@openai/codex": {"version": "` + version + `", "integrity": "` + integrity + `"},
			"node_modules/@openai/codex-linux-x64": {"name": "@openai/codex", "version": "0.169.0-linux-x64", "integrity": "` + other + `", "optional": true}` + extra + `}}`)
	}
	all := func(string) bool { return true }
	pkgs, err := packagesOf(lock("0.169.0", pinned, ""), r, all)
	if err != nil || len(pkgs) != 2 || pkgs[0].Name != "@openai/codex" || pkgs[1].Name != "@openai/codex-linux-x64" {
		t.Fatalf("%+v %v", pkgs, err)
	}
	only := func(p string) bool { return !strings.HasSuffix(p, "-linux-x64") }
	if pkgs, _ := packagesOf(lock("0.169.0", pinned, ""), r, only); len(pkgs) != 1 {
		t.Errorf("a package of another platform, not installed, is listed: %+v", pkgs)
	}
	var ie *IntegrityError
	if _, err := packagesOf(lock("0.169.0", other, ""), r, all); !errors.As(err, &ie) || !errors.Is(err, ErrLayer) {
		t.Errorf("other bytes under the pinned version: %v", err)
	}
	for _, tc := range []struct{ name, lock, want string }{
		{"version", string(lock("0.169.1", pinned, "")), "installed 0.169.1"},
		{"link", string(lock("0.169.0", pinned, `, "node_modules/x": {"link": true, "integrity": "`+other+`"}`)), "a link"},
		{"no integrity", string(lock("0.169.0", pinned, `, "node_modules/x": {"version": "1.0.0"}`)), "no integrity"},
		{"outside", string(lock("0.169.0", pinned, `, "../x": {"version": "1.0.0", "integrity": "`+other+`"}`)), "not under node_modules"},
		{"missing", `{"lockfileVersion": 3, "packages": {"": {}}}`, "was not installed"},
		{"old lock", `{"lockfileVersion": 1, "dependencies": {}}`, "lockfileVersion 1"},
		{"not json", `{`, "package-lock.json"},
	} {
		if _, err := packagesOf([]byte(tc.lock), r, all); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error with %q", tc.name, err, tc.want)
		}
	}
}

// cachedLayer writes a layer of r into cache as an install leaves it,
// with its manifest edited by edit, and returns the layer's tree.
func cachedLayer(t *testing.T, cache string, r *recipe.Recipe, edit func(*Layer)) string {
	t.Helper()
	dir := Dir(cache, r)
	bin := filepath.Join(dir, "layer", filepath.FromSlash(r.Package.Bin))
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho agent\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	digest, err := task.Digest(filepath.Join(dir, "layer"))
	if err != nil {
		t.Fatal(err)
	}
	l := &Layer{Schema: Schema, Recipe: r.Name, Package: r.Package.NPM, Version: r.Package.Version, RecipeDigest: r.Digest(), Digest: digest,
		Logs: r.Logs, ReplayIgnore: r.ReplayIgnore, Spec: r}
	edit(l)
	data, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "layer.json"), data, 0o444); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "layer")
}

func testRecipe() *recipe.Recipe {
	return &recipe.Recipe{Name: "codex", Providers: []string{"openai"}, Args: []string{"{instruction}"},
		Package: recipe.Package{NPM: "@openai/codex", Version: "0.169.0", Integrity: pinned, Bin: "node_modules/@openai/codex/bin/codex"},
		Logs:    []string{"/tmp/proctor-agent/codex"}, ReplayIgnore: []string{`^Chunk ID: [0-9a-f]+$`}}
}

// A manifest in the cache is read, not trusted: a digest that is not one
// is refused, never cut short (proctor agent ls printed its first 19
// bytes).
func TestLookupRefusesMalformedDigest(t *testing.T) {
	r := testRecipe()
	for _, d := range []string{"sha256:", "sha256:x", "sha256:" + strings.Repeat("g", 64)} {
		cache := t.TempDir()
		cachedLayer(t, cache, r, func(l *Layer) { l.Digest = d })
		if l, err := Lookup(cache, r); err == nil {
			t.Errorf("digest %q: accepted (%+v)", d, l)
		}
	}
}

// The manifest's log directories and replay_ignore patterns are the
// recipe's, whose digest names the layer: a manifest that says otherwise
// (a catch-all replay_ignore, which would make any replay match) is not
// the recipe's layer, whether looked up by recipe or, for a replay, by
// digest alone.
func TestLookupRefusesManifestNotOfItsRecipe(t *testing.T) {
	r := testRecipe()
	for name, edit := range map[string]func(*Layer){
		"replay_ignore": func(l *Layer) { l.ReplayIgnore = []string{`^.*$`} },
		"logs":          func(l *Layer) { l.Logs = []string{"/tmp/other"} },
	} {
		t.Run(name, func(t *testing.T) {
			cache := t.TempDir()
			cachedLayer(t, cache, r, edit)
			if _, err := Lookup(cache, r); err == nil {
				t.Errorf("Lookup: a manifest whose %s is not the recipe's was accepted", name)
			}
			good := t.TempDir()
			tree := cachedLayer(t, good, r, func(*Layer) {})
			want, _ := task.Digest(tree)
			bad := t.TempDir()
			cachedLayer(t, bad, r, edit)
			if _, err := LookupDigest(bad, r.Digest(), want); err == nil {
				t.Errorf("LookupDigest: a manifest whose %s is not the recipe's was accepted", name)
			}
		})
	}
}

// The layer's digest goes into every verdict and bundle: a tree changed
// in the cache after it was installed (the executable replaced) is not
// the layer the manifest names.
func TestLookupRefusesChangedTree(t *testing.T) {
	r := testRecipe()
	cache := t.TempDir()
	tree := cachedLayer(t, cache, r, func(*Layer) {})
	want, _ := task.Digest(tree)
	bin := filepath.Join(tree, filepath.FromSlash(r.Package.Bin))
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho trojan\n"), 0o555); err != nil {
		t.Fatal(err)
	}
	if l, err := Lookup(cache, r); err == nil {
		t.Errorf("Lookup: a changed tree was handed out under digest %s", l.Digest)
	}
	if l, err := LookupDigest(cache, r.Digest(), want); err == nil {
		t.Errorf("LookupDigest: a changed tree was handed out under digest %s", l.Digest)
	}
}

// The platform package a recipe pins (the binary it runs) is checked as
// the launcher is: other bytes under it are refused.
func TestPackagesOfPins(t *testing.T) {
	r := &recipe.Recipe{Name: "codex", Package: recipe.Package{NPM: "@openai/codex", Version: "0.169.0", Integrity: pinned,
		Pins: map[string]string{"@openai/codex-linux-x64": pinned}}}
	lock := []byte(`{"lockfileVersion": 3, "packages": {"": {},
		"node_modules/@openai/codex": {"version": "0.169.0", "integrity": "` + pinned + `"},
		"node_modules/@openai/codex-linux-x64": {"name": "@openai/codex", "version": "0.169.0-linux-x64", "integrity": "` + other + `"}}}`)
	var ie *IntegrityError
	if _, err := packagesOf(lock, r, func(string) bool { return true }); !errors.As(err, &ie) {
		t.Errorf("other bytes under the pinned platform package: %v", err)
	}
	if _, err := packagesOf(lock, r, func(p string) bool { return !strings.HasSuffix(p, "-linux-x64") }); err == nil {
		t.Errorf("the pinned platform package, not installed: accepted")
	}
}

package agentlayer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/proctor-sandbox/proctor/internal/recipe"
	"github.com/proctor-sandbox/proctor/internal/task"
)

// Schema names the manifest's format; schemaV1's manifests lacked the
// recipe (spec) and are installed again.
const (
	Schema   = "proctor.agent-layer/v2"
	schemaV1 = "proctor.agent-layer/v1"
)

// Layer is an installed agent. It is a plain value.
type Layer struct {
	Schema       string    `json:"schema"`
	Recipe       string    `json:"recipe"`        // the recipe's name
	Package      string    `json:"package"`       // its npm package
	Version      string    `json:"version"`       // and version
	RecipeDigest string    `json:"recipe_digest"` // recipe.Digest
	Digest       string    `json:"digest"`        // "sha256:" + 64 hex over the layer's tree (task.Digest)
	Registry     string    `json:"registry"`      // the registry it was installed from
	Packages     []Package `json:"packages"`      // every package npm installed, sorted by path
	Logs         []string  `json:"logs"`          // the recipe's log directories
	ReplayIgnore []string  `json:"replay_ignore"` // the recipe's replay_ignore
	Installed    string    `json:"installed"`     // RFC 3339, UTC
	// Spec is the recipe it was installed from, whose digest is
	// RecipeDigest: what a replay knows of a recipe it may not have.
	Spec *recipe.Recipe `json:"spec"`

	// Dir is the layer's tree on the host; not in the manifest.
	Dir string `json:"-"`
}

// Package is one installed package as npm's lock file records it.
type Package struct {
	Path      string `json:"path"` // node_modules/@scope/name
	Name      string `json:"name"`
	Version   string `json:"version"`
	Integrity string `json:"integrity"`
}

// Dir is where the layer of recipe r is kept under cacheDir.
func Dir(cacheDir string, r *recipe.Recipe) string {
	return filepath.Join(cacheDir, "agents", strings.TrimPrefix(r.Digest(), "sha256:"))
}

// LookupDigest returns the installed layer of the recipe with that digest,
// which must have tree digest want: for a replay, which names the layer by
// its recipe's digest and its own. A layer of an older manifest's format
// is reported not to exist (an error wrapping fs.ErrNotExist): a replay
// installs it again.
func LookupDigest(cacheDir, recipeDigest, want string) (*Layer, error) {
	if !isDigest(recipeDigest) {
		return nil, fmt.Errorf("%w: recipe digest %q", ErrLayer, recipeDigest)
	}
	dir := filepath.Join(cacheDir, "agents", strings.TrimPrefix(recipeDigest, "sha256:"))
	l, err := readManifest(dir)
	if errors.Is(err, errOldSchema) {
		return nil, fmt.Errorf("%s: %w", dir, fs.ErrNotExist)
	}
	if err != nil {
		return nil, err
	}
	if l.RecipeDigest != recipeDigest {
		return nil, fmt.Errorf("%w: %s: not a layer of recipe %s", ErrLayer, filepath.Join(dir, "layer.json"), recipeDigest)
	}
	if l.Digest != want {
		return nil, fmt.Errorf("%w: %s: installed tree %s, not %s", ErrLayer, dir, l.Digest, want)
	}
	if err := l.checkTree(cacheDir); err != nil {
		return nil, err
	}
	return l, nil
}

// isDigest reports "sha256:" and 64 lower-case hex digits.
func isDigest(s string) bool {
	hexd, ok := strings.CutPrefix(s, "sha256:")
	return ok && len(hexd) == 64 && strings.Trim(hexd, "0123456789abcdef") == ""
}

// Lookup returns r's installed layer, or (nil, nil) when there is none (or
// one of an older manifest's format, to be installed again). A manifest
// that does not parse or names another recipe is an error: the cache was
// tampered with.
func Lookup(cacheDir string, r *recipe.Recipe) (*Layer, error) {
	dir := Dir(cacheDir, r)
	l, err := readManifest(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errOldSchema) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if l.RecipeDigest != r.Digest() {
		return nil, fmt.Errorf("%w: %s: not a layer of recipe %s (%s)", ErrLayer, filepath.Join(dir, "layer.json"), r.Name, r.Digest())
	}
	fi, err := os.Lstat(filepath.Join(l.Dir, r.Package.Bin))
	if err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s: the recipe's executable %s is missing", ErrLayer, l.Dir, r.Package.Bin)
	}
	if err := l.checkTree(cacheDir); err != nil {
		return nil, err
	}
	return l, nil
}

var errOldSchema = errors.New("a layer manifest of an older format")

// readManifest reads dir/layer.json, which is data anyone who can write
// the cache controls: it must carry the recipe it was installed from,
// whose digest is the one it names, and agree with it (the log
// directories a trial collects, the lines a replay leaves out).
func readManifest(dir string) (*Layer, error) {
	file := filepath.Join(dir, "layer.json")
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var l Layer
	if err := json.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if l.Schema == schemaV1 {
		return nil, errOldSchema
	}
	bad := func(what string) error { return fmt.Errorf("%w: %s: %s", ErrLayer, file, what) }
	switch {
	case l.Schema != Schema:
		return nil, bad(fmt.Sprintf("schema %q, want %s", l.Schema, Schema))
	case !isDigest(l.Digest) || !isDigest(l.RecipeDigest):
		return nil, bad("digest and recipe_digest: want sha256 and 64 hex digits")
	case l.Spec == nil:
		return nil, bad("no spec: not the recipe it was installed from")
	}
	if err := l.Spec.Validate(); err != nil {
		return nil, bad(err.Error())
	}
	sp := l.Spec
	if sp.Digest() != l.RecipeDigest || l.Recipe != sp.Name || l.Package != sp.Package.NPM || l.Version != sp.Package.Version ||
		!slices.Equal(l.Logs, sp.Logs) || !slices.Equal(l.ReplayIgnore, sp.ReplayIgnore) {
		return nil, bad("not the layer of the recipe it names: its spec's digest or fields differ")
	}
	l.Dir = filepath.Join(dir, "layer")
	return &l, nil
}

// checkTree digests the layer's tree again (a walk, with the file hashes
// of cacheDir/hashes), which must be the manifest's digest: a tree changed
// in the cache after it was installed is not the layer verdicts name.
func (l *Layer) checkTree(cacheDir string) error {
	hc, err := task.OpenHashCache(filepath.Join(cacheDir, "hashes"))
	if err != nil {
		return err
	}
	got, err := task.DigestCached(l.Dir, hc)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrLayer, l.Dir, err)
	}
	if err := hc.Save(); err != nil {
		return err
	}
	if got != l.Digest {
		return fmt.Errorf("%w: %s: the tree's digest is %s, its manifest's %s: changed since it was installed", ErrLayer, l.Dir, got, l.Digest)
	}
	return nil
}

// packagesOf reads the packages npm installed from its lock file and checks
// them against what recipe r pins: each pinned package must be installed
// at the recipe's version, with the recipe's integrity when it pins one,
// and every package must carry an integrity (one fetched from a registry
// does).
func packagesOf(lock []byte, r *recipe.Recipe, installed func(path string) bool) ([]Package, error) {
	var lf struct {
		LockfileVersion int `json:"lockfileVersion"`
		Packages        map[string]struct {
			Name      string `json:"name"`
			Version   string `json:"version"`
			Integrity string `json:"integrity"`
			Link      bool   `json:"link"`
		} `json:"packages"`
	}
	if err := json.Unmarshal(lock, &lf); err != nil {
		return nil, fmt.Errorf("package-lock.json: %w", err)
	}
	if lf.LockfileVersion < 2 {
		return nil, fmt.Errorf("package-lock.json: lockfileVersion %d: want 2 or 3 (npm 7 or later)", lf.LockfileVersion)
	}
	var out []Package
	for p, e := range lf.Packages {
		if p == "" || !installed(p) {
			continue // the root project, or an optional package of another platform
		}
		name, ok := packageName(p)
		if !ok {
			return nil, fmt.Errorf("package-lock.json: packages: %q is not under node_modules", p)
		}
		if e.Link {
			return nil, fmt.Errorf("package-lock.json: %s: a link, not a package from the registry", p)
		}
		if e.Integrity == "" {
			return nil, fmt.Errorf("package-lock.json: %s: no integrity (not fetched from the registry)", p)
		}
		out = append(out, Package{Path: p, Name: name, Version: e.Version, Integrity: e.Integrity})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	want := map[string]string{r.Package.NPM: r.Package.Version}
	if r.Package.Node != nil {
		want[recipe.NodePackage] = r.Package.Node.Version
	}
	pinned := r.Pinned()
	for name, version := range want {
		var got *Package
		for i := range out {
			if out[i].Path == "node_modules/"+name {
				got = &out[i]
			}
		}
		if got == nil {
			return nil, fmt.Errorf("%w: %s was not installed", ErrLayer, name)
		}
		if got.Version != version {
			return nil, fmt.Errorf("%w: %s: installed %s, the recipe pins %s", ErrLayer, name, got.Version, version)
		}
		if p := pinned[name]; p != "" && got.Integrity != p {
			return nil, &IntegrityError{Package: name + "@" + version, Want: p, Got: got.Integrity}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.Package.Pins)) {
		i := slices.IndexFunc(out, func(p Package) bool { return p.Path == "node_modules/"+name })
		if i < 0 {
			return nil, fmt.Errorf("%w: %s, which the recipe pins, was not installed", ErrLayer, name)
		}
		if want := r.Package.Pins[name]; out[i].Integrity != want {
			return nil, &IntegrityError{Package: name + "@" + out[i].Version, Want: want, Got: out[i].Integrity}
		}
	}
	return out, nil
}

// packageName is the package name of a lock file path: the part after the
// last node_modules/.
func packageName(p string) (string, bool) {
	i := strings.LastIndex(p, "node_modules/")
	if i < 0 || (i > 0 && p[i-1] != '/') {
		return "", false
	}
	name := p[i+len("node_modules/"):]
	return name, name != ""
}

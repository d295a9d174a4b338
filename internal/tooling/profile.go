// Package tooling knows the verifier's tooling: everything the grader's
// processes load or run that is not the code under test (interpreters, test
// runners and their plugins, their configuration and start-up files, the
// helpers test.sh calls, the directories on their import and executable
// paths). It learns it from a trusted run of the grader on the pristine
// environment plus the oracle's changes (Learn), or falls back to a built-in
// description of the common runners (Builtin), and judges an agent's change
// against it (Profile.Check): nothing the agent wrote may become part of
// the tooling.
//
// A profile is plain data, canonical JSON with a digest, stored in every
// bundle so that a third party sees what was frozen and regrade uses the
// same one.
package tooling

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/gowebpki/jcs"
)

// Schema names the profile format.
const Schema = "proctor.tooling/1"

// Sources of a profile.
const (
	SourceLearned = "learned" // from a traced run of the grader on the oracle's changes
	SourceBuiltin = "builtin" // no learned profile: the common runners' known search paths
)

// Profile is the verifier's tooling, as paths inside the sandbox. Every
// list is sorted and free of duplicates.
type Profile struct {
	Schema string `json:"schema"`
	Source string `json:"source"`
	// Reason says why the profile is built in ("the task has no
	// solution/"), or "" for a learned one.
	Reason string `json:"reason,omitempty"`
	// Files are what the grader read, listed or ran (and every symlink on
	// the way) that is not the code under test: a change to one, its
	// deletion included, is a change to the tooling.
	Files []string `json:"files"`
	// Probed are paths the grader looked for and did not find: a file
	// created at one would be found, so it is a change to the tooling.
	Probed []string `json:"probed"`
	// Scanned are directories the grader listed outside its import path
	// (/etc/profile.d, a Go package's source directory): a new entry in
	// one changes what the grader sees.
	Scanned []string `json:"scanned"`
	// SearchDirs are the directories on the grader's import and executable
	// paths, in no order; Names are the module and command names the
	// tooling resolved on them. A new entry in a search dir named for one
	// of them would be found before the verifier's own, or instead of it.
	SearchDirs []string `json:"search_dirs"`
	Names      []string `json:"names"`
	// LazyNames are modules the tooling's sources import only inside
	// functions: tried when that code runs, which a failing test may do
	// where the oracle's passing one did not. A new one in the code
	// under test's import directories would stand in for it.
	LazyNames []string `json:"lazy_names"`
	// Listed are directories of the code under test the grader listed or
	// tried to list (and that no interpreter named on its path at start):
	// a runtime may put them on its path as it runs, so a new module or
	// command there named for one of Names would stand in for it.
	Listed []string `json:"listed"`
	// Made are directories the grader made for itself (caches, temporary
	// directories): what the agent put there is not carried.
	Made []string `json:"made"`
	// CodeRoots are the directories of the code under test (the
	// workspace): what the grader read there is the agent's, except
	// configuration (Configs) and dependency stores (Stores).
	CodeRoots []string `json:"code_roots"`
	// Configs are names the grader searched for in a directory and its
	// ancestors: runner configuration (conftest.py, pytest.ini,
	// node_modules, go.mod …), tooling wherever it is.
	Configs []string `json:"configs"`
	// Stores are dependency stores the interpreters named (site and
	// standard library directories, virtual environments, node_modules).
	Stores []string `json:"stores"`
	// Interpreters are what each interpreter the grader ran said of its
	// search path, asked with the grader's environment and directory.
	Interpreters []Interpreter `json:"interpreters"`
	// PluginGroups are the entry-point groups the tooling loads plugins
	// from (pytest11), read from its sources: package metadata declaring
	// one of them is a change to the tooling. nil in a profile from before
	// they were learned: then any group but the commands' is.
	PluginGroups []string `json:"plugin_groups,omitempty"`
	// Records counts the accesses the profile was learned from.
	Records int `json:"-"`

	// packages are the tooling's packages: for each file of Files beneath
	// a directory of an import path or a store, that directory's entry
	// holding it (site-packages/_pytest, node_modules/check-helper). Not
	// stored: made from the lists by normalize.
	packages []string
}

// Interpreter is one Python interpreter's answer.
type Interpreter struct {
	Exe   string   `json:"exe"`
	Cwd   string   `json:"cwd"`
	Path  []string `json:"path"`  // sys.path as the grader's process had it at start
	Sites []string `json:"sites"` // site-packages, user site, standard library, prefix
	// modules are the module names the interpreter can import from outside
	// the code under test: the built-in profile's names (not stored).
	modules []string
	// absent are the standard library's modules this interpreter cannot
	// import (another platform's): names tried without a trace (not
	// stored).
	absent []string
}

// Marshal returns the profile as canonical JSON.
func (p *Profile) Marshal() ([]byte, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// Digest is the sha256 of Marshal's bytes, as "sha256:HEX".
func (p *Profile) Digest() (string, error) {
	b, err := p.Marshal()
	if err != nil {
		return "", err
	}
	return DigestOf(b), nil
}

// DigestOf is the digest of a profile's stored bytes: a cached or bundled
// profile is used as stored, never re-encoded.
func DigestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Parse reads a profile written by Marshal; name is the file, for errors.
func Parse(name string, b []byte) (*Profile, error) {
	var p Profile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if p.Schema != Schema {
		return nil, fmt.Errorf("%s: schema: %q, want %q", name, p.Schema, Schema)
	}
	if p.Source != SourceLearned && p.Source != SourceBuiltin {
		return nil, fmt.Errorf("%s: source: %q, want %q or %q", name, p.Source, SourceLearned, SourceBuiltin)
	}
	for field, list := range map[string][]string{"files": p.Files, "probed": p.Probed, "scanned": p.Scanned, "search_dirs": p.SearchDirs,
		"made": p.Made, "code_roots": p.CodeRoots, "stores": p.Stores, "listed": p.Listed} {
		for _, s := range list {
			if !path.IsAbs(s) || path.Clean(s) != s {
				return nil, fmt.Errorf("%s: %s: %q is not a clean absolute path", name, field, s)
			}
		}
		if !slices.IsSorted(list) {
			return nil, fmt.Errorf("%s: %s: not sorted", name, field)
		}
	}
	p.normalize()
	return &p, nil
}

// normalize sorts and deduplicates every list, and makes nil lists empty.
func (p *Profile) normalize() {
	for _, l := range []*[]string{&p.Files, &p.Probed, &p.Scanned, &p.SearchDirs, &p.Names, &p.LazyNames, &p.Listed, &p.Made, &p.CodeRoots, &p.Configs, &p.Stores} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
		if *l == nil {
			*l = []string{}
		}
	}
	if p.Interpreters == nil {
		p.Interpreters = []Interpreter{}
	}
	if p.PluginGroups != nil {
		slices.Sort(p.PluginGroups)
		p.PluginGroups = slices.Compact(p.PluginGroups)
	}
	p.packages = nil
	// Packages live in the interpreters' import paths and in the package
	// stores (site directories, node_modules), not in a prefix (/usr) or
	// an executable path.
	var roots []string
	for _, it := range p.Interpreters {
		roots = append(roots, it.Path...)
	}
	for _, s := range p.Stores {
		switch path.Base(s) {
		case "site-packages", "dist-packages", "node_modules":
			roots = append(roots, s)
		}
	}
	for _, f := range p.Files {
		if e := longestEntry(roots, f); e != "" {
			first, rest, _ := strings.Cut(strings.TrimPrefix(f, strings.TrimSuffix(e, "/")+"/"), "/")
			if rest != "" && first != "__pycache__" {
				p.packages = append(p.packages, path.Join(e, first))
			}
		}
	}
	slices.Sort(p.packages)
	p.packages = slices.Compact(p.packages)
}

// loaderCache is the dynamic loader's cache, which ldconfig (and every
// package install that ships a library) rewrites: the grader keeps the
// pristine one (libraries in the default directories are found without
// it), so the agent's is left out without a violation.
const loaderCache = "/etc/ld.so.cache"

// Change is one entry of an agent's changeset, as Check sees it.
type Change struct {
	Path string
	// New: nothing was at Path in the pristine environment.
	New bool
	// Removes: a deletion, or an entry that replaces a pristine directory
	// (an opaque directory, a file or a symlink), so that what the
	// pristine directory held is gone.
	Removes bool
	// Symlink: the change makes Path a symbolic link.
	Symlink bool
	// Dir: the change makes Path a directory.
	Dir bool
	// Content reads the new file (package metadata is judged by what it
	// declares); nil when it cannot be read, which is judged the worst.
	Content func() ([]byte, error)
	// Same reports a file whose content is the pristine file's (a chmod,
	// a touch: a copy-up, not a change); nil when it cannot be told.
	Same func() bool
	// Pristine reads the file Path held in the pristine environment (a
	// project's configuration is judged by the runner's part of it); nil
	// when it cannot be read.
	Pristine func() ([]byte, error)
}

// Decision is Check's answer.
type Decision struct {
	// Violation, when set, says how the change touches the tooling: it
	// is not carried, and the trial is compromised.
	Violation string
	// LeftOut, when set, says why the change is not carried without a
	// violation (it is in a directory the grader makes for itself).
	LeftOut string
}

// Check judges one change against the profile.
func (p *Profile) Check(c Change) Decision {
	if c.Path == loaderCache {
		return Decision{LeftOut: "the dynamic loader's cache: the grader keeps the pristine one"}
	}
	if (has(p.Files, c.Path) || p.inPackage(c.Path)) && !c.New && !c.Removes && !c.Symlink && c.Same != nil && c.Same() {
		return Decision{LeftOut: "the same content as the pristine file (a copy-up): the pristine file stands"}
	}
	if has(p.Files, c.Path) && !p.projectEdit(c) {
		return Decision{Violation: "changes " + c.Path + ", part of the verifier's tooling (the grader reads or runs it)"}
	}
	// A package of the tooling is frozen whole: a module it loads only on
	// a path the oracle's run never took (a failure's explanation), or a
	// new module or package beside its own (json/decoder/ beside
	// json/decoder.py), is as much the tooling as what was read.
	if pkg := p.packageOf(c.Path); pkg != "" && c.Path != pkg {
		return Decision{Violation: "changes " + c.Path + " in " + pkg + ", a package of the verifier's tooling"}
	}
	if c.Removes {
		if f := firstBeneath(p.Files, c.Path); f != "" {
			return Decision{Violation: "takes away " + f + ", part of the verifier's tooling, with its directory"}
		}
	}
	dir, base := path.Split(c.Path)
	dir = path.Clean(dir)
	if c.Symlink {
		// A link is judged by where it leads, which a path-by-path check
		// cannot follow: none may stand on the way to the tooling (a
		// linked /root/.local holding a user site, a linked source
		// directory on PYTHONPATH).
		if on := p.onTheWay(c.Path); on != "" {
			return Decision{Violation: "makes " + c.Path + " a symbolic link on the way to " + on + ", which the verifier's tooling uses"}
		}
		if isMetadataDir(base) && p.importDir(dir) {
			return Decision{Violation: "makes " + c.Path + " a symbolic link to package metadata on the verifier's import path"}
		}
	}
	if !c.New {
		return Decision{}
	}
	// A missing directory of an interpreter's path (a site directory not
	// made yet) may be made: what goes in it is judged by name below.
	if has(p.Probed, c.Path) && !p.pythonDir(c.Path) {
		return Decision{Violation: "creates " + c.Path + ", which the verifier's tooling looks for"}
	}
	if has(p.Scanned, dir) {
		return Decision{Violation: "creates " + c.Path + " in " + dir + ", a directory the verifier's tooling lists"}
	}
	if n, ok := importName(base); ok && !c.Dir {
		if d, ok := p.shadows(dir, n); ok {
			return Decision{Violation: fmt.Sprintf("creates %s on the verifier's search path, where it would stand in for the tooling's %q%s", c.Path, n, d)}
		}
		// A module in a new directory named for the tooling's package
		// (a package or a namespace portion of the same name).
		if pkg := path.Base(dir); pkg != "/" && pkg != "." {
			if d, ok := p.shadows(path.Dir(dir), pkg); ok {
				return Decision{Violation: fmt.Sprintf("creates %s, a package on the verifier's search path standing in for the tooling's %q%s", c.Path, pkg, d)}
			}
		}
	}
	// Package metadata in a site directory declares entry points, which
	// runners load as plugins (pytest11) without being asked.
	if strings.EqualFold(base, "entry_points.txt") && isMetadataDir(path.Base(dir)) && p.importDir(path.Dir(dir)) {
		if why := pluginEntryPoints(c.Content, p.PluginGroups); why != "" {
			return Decision{Violation: "creates " + c.Path + ", entry points the verifier's tooling would load (" + why + ")"}
		}
	}
	// A directory on the way to a path the tooling looks for is judged
	// with what the agent put beneath it, never left out whole.
	if m := ancestorIn(p.Made, c.Path); m != "" && firstBeneath(p.Probed, c.Path) == "" {
		return Decision{LeftOut: "in " + m + ", which the verifier makes for itself"}
	}
	return Decision{}
}

// projectEdit reports a change to a project's configuration file (found
// by the runner's ancestor search) that leaves alike every part a runner
// reads: a version bump in pyproject.toml is the agent's.
func (p *Profile) projectEdit(c Change) bool {
	base := path.Base(c.Path)
	if _, ok := projectConfigs[base]; !ok || !has(p.Configs, base) || c.New || c.Removes || c.Symlink || c.Dir ||
		c.Content == nil || c.Pristine == nil {
		return false
	}
	old, err := c.Pristine()
	if err != nil {
		return false
	}
	new, err := c.Content()
	if err != nil {
		return false
	}
	return sameRunnerConfig(base, old, new)
}

// packageOf returns the tooling package at or above q, or "".
func (p *Profile) packageOf(q string) string {
	return ancestorIn(p.packages, q)
}

func (p *Profile) inPackage(q string) bool { return p.packageOf(q) != "" }

// shadows reports whether a new module or command name in dir would be
// found by the tooling, with a note for the violation. The names the
// tooling resolved or tries at load count on every import and executable
// path; those it imports only in functions, in the code under test's
// directories.
func (p *Profile) shadows(dir, name string) (string, bool) {
	switch {
	case !p.importDir(dir):
		return "", false
	case has(p.Names, name):
		return "", true
	case has(p.LazyNames, name) && p.inCode(dir):
		return " (imported by the tooling when it needs it)", true
	}
	return "", false
}

// importDir reports a directory where a runtime finds modules or commands
// by name: on an import or executable path, a store, or listed by the
// grader in the code under test.
func (p *Profile) importDir(dir string) bool {
	return p.OnSearchPath(dir) || has(p.Listed, dir)
}

func (p *Profile) inCode(dir string) bool {
	for _, c := range p.CodeRoots {
		if under(dir, c) {
			return true
		}
	}
	return false
}

// onTheWay returns a path the tooling uses at or beneath q, or "".
func (p *Profile) onTheWay(q string) string {
	for _, list := range [][]string{p.Files, p.Probed, p.SearchDirs, p.Stores, p.Listed, p.Scanned} {
		if has(list, q) {
			return q
		}
		if f := firstBeneath(list, q); f != "" {
			return f
		}
	}
	return ""
}

// isMetadataDir reports a Python distribution's metadata directory, as
// importlib.metadata finds them (case-insensitively).
func isMetadataDir(name string) bool {
	l := strings.ToLower(name)
	return strings.HasSuffix(l, ".dist-info") || strings.HasSuffix(l, ".egg-info")
}

// pluginEntryPoints says which groups of an entry_points.txt the tooling
// would load as plugins: those of groups, or with groups nil any but the
// commands' ("" when it declares none).
func pluginEntryPoints(content func() ([]byte, error), groups []string) string {
	if content == nil {
		return "its content could not be read"
	}
	b, err := content()
	if err != nil {
		return "its content could not be read: " + err.Error()
	}
	var hit []string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]") {
			g := strings.TrimSpace(line[1 : len(line)-1])
			switch {
			case groups != nil && slices.Contains(groups, g):
				hit = append(hit, g)
			case groups == nil && g != "console_scripts" && g != "gui_scripts":
				hit = append(hit, g)
			}
		}
	}
	if len(hit) == 0 {
		return ""
	}
	return "groups " + strings.Join(hit, ", ")
}

// OnSearchPath reports whether dir is on one of the grader's import or
// executable paths, or a store of its interpreters'.
func (p *Profile) OnSearchPath(dir string) bool {
	return has(p.SearchDirs, dir) || has(p.Stores, dir)
}

// pythonDir reports a directory on an interpreter's import path or among
// its site directories: one it may find missing and the agent may make (a
// node_modules directory is not one: Node loads what it finds in it).
func (p *Profile) pythonDir(dir string) bool {
	for _, it := range p.Interpreters {
		if slices.Contains(it.Path, dir) || slices.Contains(it.Sites, dir) {
			return true
		}
	}
	return false
}

// has reports whether sorted list holds s.
func has(list []string, s string) bool {
	_, ok := slices.BinarySearch(list, s)
	return ok
}

// firstBeneath returns an entry of sorted list strictly beneath dir, or "".
func firstBeneath(list []string, dir string) string {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	i, _ := slices.BinarySearch(list, prefix)
	if i < len(list) && strings.HasPrefix(list[i], prefix) {
		return list[i]
	}
	return ""
}

// ancestorIn returns the member of list that is p or an ancestor of p, or "".
func ancestorIn(list []string, p string) string {
	for q := p; ; q = path.Dir(q) {
		if has(list, q) {
			return q
		}
		if q == "/" {
			return ""
		}
	}
}

// stem is a file's module or command name: its name up to the first dot
// ("json.py", "json.cpython-311-x86_64-linux-gnu.so", "json/" all give
// "json"). A leading dot is kept as part of the name.
func stem(name string) string {
	name = strings.TrimSuffix(name, "/")
	if i := strings.IndexByte(name[min(1, len(name)):], '.'); i >= 0 {
		return name[:i+min(1, len(name))]
	}
	return name
}

// importName is the module or command a directory entry provides to a
// runtime that finds names in its directory: NAME (a package, a namespace
// directory or a command), NAME.py, NAME.pyc, NAME[.TAG].so; false for
// other files (data a test reads, "json.txt").
func importName(base string) (string, bool) {
	if base == "" || base == "__pycache__" {
		return "", false
	}
	n, ext, ok := strings.Cut(base, ".")
	if !ok {
		return base, true
	}
	if n == "" {
		return "", false
	}
	if ext == "py" || ext == "pyc" || ext == "so" || strings.HasSuffix(ext, ".so") {
		return n, true
	}
	return "", false
}

// under reports whether p is base or beneath it.
func under(p, base string) bool {
	return p == base || base == "/" || strings.HasPrefix(p, base+"/")
}

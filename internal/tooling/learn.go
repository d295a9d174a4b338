package tooling

import (
	"path"
	"regexp"
	"slices"
	"strings"
)

// Access is one file system call of the traced grader: a path looked up,
// opened, listed or run. Paths are absolute, cleaned, unresolved.
type Access struct {
	Op    string // "open", "stat", "exec", "list"
	Path  string
	Write bool // an open that writes, creates or truncates
	Dir   bool // an open that asks for a directory: a listing to come
	// Argv, Env and Cwd are an exec's.
	Argv, Env []string
	Cwd       string
}

// Kind is what a path is in the learning environment.
type Kind int

const (
	Absent Kind = iota
	File
	Dir
	Symlink
)

// Env answers what the learning environment (the pristine environment plus
// the oracle's changes) holds at a path, without following a final symlink:
// its kind and, for a symlink, its target.
type Env interface {
	Lstat(p string) (Kind, string, error)
}

// Input is what Learn learns from.
type Input struct {
	Accesses []Access
	Env      Env
	// CodeRoots are the workspace's directories inside the sandbox.
	CodeRoots []string
	// OracleChanged are the paths the oracle's changeset touched: the
	// agent's to change, whatever the grader did with them.
	OracleChanged []string
	// Harness are paths only the harness writes (/tests, /logs …): never
	// part of the profile.
	Harness []string
	// Interpreters are the Python interpreters' answers (see Queries).
	Interpreters []Interpreter
	// TestSources are the tests' Python sources, by their path inside:
	// what they import (found or not, in the code's directories it would
	// stand in for it), and the modules they are (a helpers.py of the
	// tests').
	TestSources map[string][]byte
}

// cwdConfigs are names runners read as their configuration from their
// working directory or project root, without looking in its ancestors
// (so no ancestor search shows them): make's makefiles, npm's, yarn's and
// pnpm's settings, test runners' and transpilers' configuration, Python
// tools' settings. Looked up by the grader in the code under test, each is
// configuration of the tooling's.
var cwdConfigs = []string{"GNUmakefile", "makefile", "Makefile", ".npmrc", ".yarnrc", ".yarnrc.yml", ".pnpmfile.cjs",
	".mocharc.js", ".mocharc.cjs", ".mocharc.json", ".mocharc.yml", ".mocharc.yaml", ".babelrc", ".babelrc.json",
	"babel.config.js", "babel.config.cjs", "babel.config.json", "jest.config.js", "jest.config.cjs", "jest.config.mjs",
	"jest.config.ts", "jest.config.json", "vitest.config.js", "vitest.config.mjs", "vitest.config.ts", "bunfig.toml",
	"deno.json", "deno.jsonc", "noxfile.py", ".coveragerc", "uv.toml", ".python-version", "Justfile", "justfile"}

// configFamilies are names a runner looks for together, taking the first
// it finds: a runner seen using one of a family in a directory would find
// another member made there first (make's GNUmakefile before Makefile),
// even when it looked through its own listing of the directory, with no
// call per name.
var configFamilies = [][]string{
	{"GNUmakefile", "makefile", "Makefile"},
	{".yarnrc", ".yarnrc.yml"},
	{".mocharc.js", ".mocharc.cjs", ".mocharc.json", ".mocharc.jsonc", ".mocharc.yml", ".mocharc.yaml"},
	{".babelrc", ".babelrc.json", ".babelrc.js", ".babelrc.cjs", "babel.config.js", "babel.config.cjs", "babel.config.mjs", "babel.config.json"},
	{"jest.config.js", "jest.config.cjs", "jest.config.mjs", "jest.config.ts", "jest.config.json"},
	{"vitest.config.js", "vitest.config.mjs", "vitest.config.cjs", "vitest.config.ts", "vitest.config.mts"},
	{"deno.json", "deno.jsonc"},
	{"Justfile", "justfile", ".justfile"},
}

// family returns the configuration family name belongs to, or nil.
func family(name string) []string {
	for _, f := range configFamilies {
		if slices.Contains(f, name) {
			return f
		}
	}
	return nil
}

// packageManagers are the programs that read package.json in their
// working directory as their own configuration (npm test, yarn test).
var packageManagers = []string{"npm", "npx", "yarn", "pnpm", "bun"}

// virtual are file systems the sandbox makes afresh: never the agent's.
var virtual = []string{"/proc", "/sys", "/dev"}

// resolved is one access's path followed through the environment.
type resolved struct {
	final string
	links []string // every symlink passed, by its own path
	kind  Kind     // of final; Absent if a component is missing
	// missing is the first path that is absent (final itself or an
	// ancestor), "" when final exists.
	missing string
}

const maxHops = 40

// Resolve follows p through env's symlinks, as the kernel would, and
// returns where it leads (a path that may not exist).
func Resolve(env Env, p string) (string, error) {
	r, err := resolve(env, p)
	return r.final, err
}

// resolve follows p through env's symlinks, as the kernel would.
func resolve(env Env, p string) (resolved, error) {
	var r resolved
	cur := "/"
	rest := strings.Split(strings.Trim(p, "/"), "/")
	hops := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, name)
		k, target, err := env.Lstat(next)
		if err != nil {
			return r, err
		}
		switch {
		case k == Absent:
			r.final, r.missing = path.Join(append([]string{next}, rest...)...), next
			return r, nil
		case k == Symlink:
			r.links = append(r.links, next)
			if hops++; hops > maxHops {
				r.final, r.missing = next, next
				return r, nil
			}
			if path.IsAbs(target) {
				cur = "/"
			}
			rest = append(strings.Split(strings.Trim(target, "/"), "/"), rest...)
		case len(rest) == 0:
			r.final, r.kind = next, k
			return r, nil
		case k == Dir:
			cur = next
		default: // a file in the middle of a path
			r.final, r.missing = path.Join(append([]string{next}, rest...)...), path.Join(next, rest[0])
			return r, nil
		}
	}
	r.final, r.kind = cur, Dir
	return r, nil
}

// Learn builds a learned profile from a traced grader run.
func Learn(in Input) (*Profile, error) {
	p := &Profile{Schema: Schema, Source: SourceLearned, Records: len(in.Accesses),
		CodeRoots: slices.Clone(in.CodeRoots), Interpreters: in.Interpreters}
	skip := func(q string) bool {
		for _, h := range append(slices.Clone(virtual), in.Harness...) {
			if under(q, h) {
				return true
			}
		}
		return false
	}
	oracle := slices.Clone(in.OracleChanged)
	slices.Sort(oracle)
	byOracle := func(q string) bool { return ancestorIn(oracle, q) != "" }
	inCode := func(q string) bool {
		for _, c := range in.CodeRoots {
			if under(q, c) {
				return true
			}
		}
		return false
	}

	reads := map[string]bool{}  // existing paths the grader used
	listed := map[string]bool{} // directories it listed
	// toList are directories it opened to list, found or not: where a
	// runtime looks names up in memory (Python's import system lists a
	// path entry once, whatever put it on the path, and then looks for
	// every module there without a call).
	toList := map[string]bool{}
	probed := map[string]bool{} // absent paths it looked for
	made := map[string]bool{}   // absent directories it wrote into
	// When: the first look-up of each probed path, the first write into
	// each made directory (by access index); wrote: the absent paths it
	// wrote.
	probedAt, madeAt := map[string]int{}, map[string]int{}
	var wrote []string
	commands := map[string]bool{}
	execd := map[string]bool{} // files it ran
	var modules []string       // modules run with python -m, dotted
	var pmCwds []string        // where a package manager ran
	searchDirs := map[string]bool{}
	for i, a := range in.Accesses {
		if a.Path == "" || !path.IsAbs(a.Path) || skip(a.Path) {
			continue
		}
		r, err := resolve(in.Env, a.Path)
		if err != nil {
			return nil, err
		}
		for _, l := range r.links {
			if !skip(l) {
				reads[l] = true
			}
		}
		if a.Op == "exec" {
			if r.missing == "" {
				execd[r.final] = true
			}
			if pythonName.MatchString(path.Base(r.final)) {
				if m := moduleArg(a.Argv); m != "" {
					modules = append(modules, m)
				}
			}
			if slices.Contains(packageManagers, path.Base(a.Path)) && a.Cwd != "" {
				pmCwds = append(pmCwds, a.Cwd)
			}
			// A script given to an interpreter is a program the grader
			// runs as much as one it execs (python3 check.py, bash run.sh).
			if sp := scriptArg(path.Base(r.final), a); sp != "" {
				if sr, err := resolve(in.Env, sp); err == nil && sr.missing == "" && sr.kind == File {
					execd[sr.final] = true
				}
			}
			commands[path.Base(a.Path)] = true
			for _, kv := range a.Env {
				if v, ok := strings.CutPrefix(kv, "PATH="); ok {
					for _, d := range strings.Split(v, ":") {
						if path.IsAbs(d) {
							searchDirs[path.Clean(d)] = true
						}
					}
				}
			}
		}
		if skip(r.final) {
			continue
		}
		if a.Op == "list" || a.Op == "open" && a.Dir && !a.Write {
			toList[r.final] = true
		}
		switch {
		case r.missing != "" && a.Write:
			// The grader makes it: its own cache or temporary file.
			wrote = append(wrote, r.final)
			if r.missing != r.final && !made[r.missing] {
				made[r.missing], madeAt[r.missing] = true, i
			}
		case r.missing != "":
			if !probed[r.final] {
				probed[r.final], probedAt[r.final] = true, i
			}
		case a.Op == "list":
			listed[r.final] = true
			reads[r.final] = true
		default:
			reads[r.final] = true
		}
	}
	// A module run with -m is a program the grader runs, as a script is.
	for _, m := range modules {
		rel := "/" + strings.ReplaceAll(m, ".", "/")
		for q := range reads {
			if strings.HasSuffix(q, rel+".py") || strings.HasSuffix(q, rel+"/__main__.py") {
				execd[q] = true
			}
		}
	}
	madeList := keys(made)
	slices.Sort(madeList)
	slices.Sort(wrote)
	for q := range probed {
		m := ancestorIn(madeList, q)
		if m == "" {
			continue
		}
		// What the grader looked for in a directory before it wrote
		// anything there, and never wrote itself, it would have read:
		// configuration beside its own files (go reads
		// $HOME/.config/go/env, then makes $HOME/.config for its
		// telemetry). The directory it stat'ed on the way to making it,
		// and the entries it looked up once it had, are its own.
		if probedAt[q] < madeAt[m] && firstBeneath(wrote, q) == "" && !has(wrote, q) {
			continue
		}
		delete(probed, q)
	}

	// Configuration: a name looked for in a directory and in its parent.
	seen := map[string]bool{}
	for q := range probed {
		seen[q] = true
	}
	for q := range reads {
		seen[q] = true
	}
	// It is a search only where one of the two was not found: finding a
	// module by name on two paths (abc.py in the standard library and in
	// a package) is not.
	configs := map[string]bool{}
	for q := range seen {
		if slices.Contains(cwdConfigs, path.Base(q)) {
			configs[path.Base(q)] = true
		}
	}
	for q := range seen {
		dir, base := path.Split(q)
		dir = path.Clean(dir)
		if dir == "/" || !configName(base) {
			continue
		}
		up := path.Join(path.Dir(dir), base)
		if seen[up] && (probed[q] || probed[up]) {
			configs[base] = true
		}
	}

	// A family member seen in a directory: the others, missing there,
	// are looked for there too (the runner would take the first found).
	for q := range seen {
		f := family(path.Base(q))
		if f == nil || !configs[path.Base(q)] {
			continue
		}
		for _, sib := range f {
			configs[sib] = true
			sq := path.Join(path.Dir(q), sib)
			if seen[sq] {
				continue
			}
			if r, err := resolve(in.Env, sq); err == nil && r.missing != "" && !skip(sq) {
				probed[sq] = true
			}
		}
	}

	// Stores: what the interpreters named as theirs, and node_modules.
	stores := map[string]bool{}
	var pyPath []string
	for _, it := range in.Interpreters {
		for _, s := range it.Sites {
			if path.IsAbs(s) {
				stores[path.Clean(s)] = true
			}
		}
		for _, e := range it.Path {
			if path.IsAbs(e) {
				searchDirs[path.Clean(e)] = true
				pyPath = append(pyPath, path.Clean(e))
			}
		}
	}
	for q := range seen {
		if i := strings.Index(q, "/node_modules/"); i >= 0 {
			stores[q[:i+len("/node_modules")]] = true
		} else if strings.HasSuffix(q, "/node_modules") {
			stores[q] = true
		}
	}
	storeList := keys(stores)
	slices.Sort(storeList)
	inStore := func(q string) bool { return ancestorIn(storeList, q) != "" }

	// tooling says whether a path the grader used belongs to the tooling
	// rather than to the code under test.
	tooling := func(q string) bool {
		if byOracle(q) {
			return false
		}
		if path.Base(q) == "package.json" && inCode(q) && !packageScoped(q, pmCwds, reads) {
			// A package's manifest in the code under test governs the
			// code beneath it, the agent's, unless a package manager ran
			// there or tooling lies beneath it.
			return false
		}
		if !inCode(q) || execd[q] {
			// A program the grader runs is its tooling even in the
			// workspace (a grading script the task ships there).
			return true
		}
		return configs[path.Base(q)] || inStore(q) || underConfig(q, configs)
	}
	for q := range reads {
		if tooling(q) {
			p.Files = append(p.Files, q)
		}
	}
	for q := range probed {
		if byOracle(q) {
			continue
		}
		// In the code under test, the tests' own look-ups (an output the
		// task asks for) are the agent's to satisfy.
		if inCode(q) && !configs[path.Base(q)] && !inStore(q) && !underConfig(q, configs) {
			continue
		}
		if path.Base(q) == "package.json" && inCode(q) && !packageScoped(q, pmCwds, reads) {
			continue
		}
		p.Probed = append(p.Probed, q)
	}
	// A directory the grader listed outside its import path: a new entry
	// there changes what the grader sees (a file in /etc/profile.d, a Go
	// source file in the standard library). Its own files are in Files;
	// a new entry is a change to the listing.
	for q := range listed {
		if !tooling(q) || importDir(q, pyPath) {
			continue
		}
		p.Scanned = append(p.Scanned, q)
	}
	// In the code under test, a directory the grader lists (or tried to)
	// may be on an import path only at run time (a script that puts the
	// workdir first on sys.path, pytest's rootdir): a new entry there is
	// the agent's, unless it is named for a module or command of the
	// tooling's, which it would stand in for.
	for q := range toList {
		if inCode(q) && !slices.Contains(pyPath, q) {
			p.Listed = append(p.Listed, q)
		}
	}

	// Names: the top-level module of every tooling file on a Python path,
	// and every command run.
	names := map[string]bool{}
	for c := range commands {
		names[c] = true
	}
	// A command the oracle installed (or the workspace holds) is the code
	// under test, not a name of the tooling's.
	for f := range execd {
		if !tooling(f) {
			delete(names, path.Base(f))
		}
	}
	for _, a := range in.Accesses {
		if a.Op == "exec" && path.IsAbs(a.Path) {
			if r, err := resolve(in.Env, a.Path); err == nil && r.missing == "" && !tooling(r.final) {
				delete(names, path.Base(a.Path))
			}
		}
	}
	for _, f := range p.Files {
		if e := longestEntry(pyPath, f); e != "" {
			first, _, _ := strings.Cut(strings.TrimPrefix(f, strings.TrimSuffix(e, "/")+"/"), "/")
			if n := stem(first); n != "" && n != "__pycache__" {
				names[n] = true
			}
		}
	}
	// Modules the tooling's own sources import, found or not (see
	// ImportsOf): a name tried and not found leaves no system call.
	lazy := map[string]bool{}
	if rd, ok := in.Env.(Reader); ok {
		groups := map[string]bool{}
		for _, f := range p.Files {
			if !strings.HasSuffix(f, ".py") {
				continue
			}
			src, err := rd.Read(f, maxSource)
			if err != nil {
				continue // gone, or not a regular file: nothing to read
			}
			im := ImportsOf(src)
			for _, n := range im.Module {
				names[n] = true
			}
			for _, n := range im.Lazy {
				lazy[n] = true
			}
			for _, g := range im.PluginGroups {
				groups[g] = true
			}
		}
		p.PluginGroups = keys(groups)
	}
	// The tests' own imports, and the modules they are: in the code's
	// directories, a new one would stand in for what the tests meant.
	for f, src := range in.TestSources {
		im := ImportsOf(src)
		for _, n := range append(im.Module, im.Lazy...) {
			lazy[n] = true
		}
		if n, ok := importName(path.Base(f)); ok && n != "__init__" && !strings.HasPrefix(n, "test_") && n != "conftest" {
			lazy[n] = true
		}
	}
	// What the code under test provides is not the tooling's name: a
	// module or package of its own (a data file named like a module,
	// base64.txt, provides nothing).
	// The import directories: those on a path at start, and those the
	// grader listed (a script puts /app first on sys.path as it runs).
	codeDirs := slices.Clone(pyPath)
	for d := range toList {
		codeDirs = append(codeDirs, d)
	}
	provided := func(q string) {
		if e := longestEntry(codeDirs, q); e != "" {
			first, rest, _ := strings.Cut(strings.TrimPrefix(q, strings.TrimSuffix(e, "/")+"/"), "/")
			n, ok := importName(first)
			if !ok || rest == "" && !strings.Contains(first, ".") {
				return // a file without a suffix is no module
			}
			delete(names, n)
			delete(lazy, n)
		}
	}
	for q := range reads {
		if !tooling(q) {
			provided(q)
		}
	}
	for _, q := range oracle {
		provided(q)
	}
	// Standard-library modules this platform lacks: runtimes try them
	// without a call per name (subprocess tries msvcrt, os tries nt), so
	// the trace never shows them; found, they would run.
	for _, it := range in.Interpreters {
		for _, n := range it.absent {
			names[n] = true
		}
	}
	p.Names = keys(names)
	for n := range names {
		delete(lazy, n)
	}
	p.LazyNames = keys(lazy)
	p.SearchDirs = keys(searchDirs)
	p.Made = madeList
	p.Configs = keys(configs)
	p.Stores = storeList
	p.normalize()
	return p, nil
}

// interpreters whose first operand is a script they run.
var scriptInterpreters = regexp.MustCompile(`^(?:(?:ba|da|z|k|a)?sh|node|nodejs|perl|ruby|php|Rscript|tclsh|lua)[0-9.]*$`)

// scriptArg returns the script an interpreter's command line runs (made
// absolute against its directory), or "".
func scriptArg(interp string, a Access) string {
	var script string
	switch {
	case pythonName.MatchString(interp):
		_, script = parsePython(interp, a.Argv[min(1, len(a.Argv)):], a)
		return script
	case scriptInterpreters.MatchString(interp):
		for i := 1; i < len(a.Argv); i++ {
			arg := a.Argv[i]
			if arg == "-c" || arg == "-e" || arg == "--eval" || arg == "-p" {
				return "" // a command line, not a file
			}
			if !strings.HasPrefix(arg, "-") {
				script = arg
				break
			}
		}
	}
	if script == "" {
		return ""
	}
	return abs(script, a.Cwd)
}

func abs(p, cwd string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	return path.Join(cwd, p)
}

// moduleArg returns the module a Python command line runs with -m, "".
func moduleArg(argv []string) string {
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "-m" && i+1 < len(argv):
			return argv[i+1]
		case strings.HasPrefix(a, "-m") && len(a) > 2:
			return a[2:]
		case a == "-c" || !strings.HasPrefix(a, "-"):
			return ""
		}
	}
	return ""
}

// packageScoped reports whether the package.json at q is the tooling's:
// a package manager ran at or below its directory, or something the
// grader read as tooling lies beneath it (other than the manifest).
func packageScoped(q string, pmCwds []string, reads map[string]bool) bool {
	dir := path.Dir(q)
	for _, c := range pmCwds {
		if under(c, dir) {
			return true
		}
	}
	for r := range reads {
		if r != q && under(r, dir) && strings.Contains(r, "/node_modules/") {
			return true
		}
	}
	return false
}

// configName reports names that can be configuration found by an
// ancestor search. Python's package markers and caches are found the same
// way (pytest walks up through __init__.py files) but are code.
func configName(base string) bool {
	switch {
	case base == "", strings.HasPrefix(base, "__init__."), base == "__pycache__", strings.HasSuffix(base, ".pyc"):
		return false
	}
	return true
}

// underConfig reports a path beneath a directory named for a configuration
// search (node_modules/…).
func underConfig(q string, configs map[string]bool) bool {
	for d := path.Dir(q); d != "/" && d != "."; d = path.Dir(d) {
		if configs[path.Base(d)] {
			return true
		}
	}
	return false
}

// importDir reports a directory on, or beneath, a Python path entry: Python
// lists those to find modules by name, and Names and Files cover them.
func importDir(q string, pyPath []string) bool {
	return longestEntry(pyPath, q) != "" || slices.Contains(pyPath, q)
}

// longestEntry returns the longest entry of entries strictly above f, or "".
func longestEntry(entries []string, f string) string {
	best := ""
	for _, e := range entries {
		if e != f && under(f, e) && len(e) > len(best) {
			best = e
		}
	}
	return best
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

package tooling

import (
	"path"
	"slices"
	"strings"
)

// runnerConfigs are the names the common runners look for in the
// ancestors of the tests and of the working directory: pytest's
// configuration and conftest files, Node's packages and npm's settings,
// Go's workspace file.
var runnerConfigs = []string{
	"conftest.py", "pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "tox.ini", "setup.cfg", "pyproject.toml",
	"node_modules", ".npmrc", "package.json",
	"go.work", "go.work.sum",
}

// shellStartup are the start-up files a shell the grader runs may read.
var shellStartup = []string{"/etc/profile", "/etc/bash.bashrc", "/etc/environment", "/root/.bashrc", "/root/.profile", "/root/.bash_profile"}

// Builtin is the profile for a task with no learned one: the common
// runners' known search paths, in env. dirs are the directories whose
// ancestors the runners search (the tests' and the working directory);
// interps are the environment's Python interpreters' answers, asked as
// "python3 -m" in the working directory would run.
func Builtin(reason string, env Env, codeRoots, dirs []string, interps []Interpreter) (*Profile, error) {
	p := &Profile{Schema: Schema, Source: SourceBuiltin, Reason: reason, CodeRoots: codeRoots, Interpreters: interps,
		Configs: runnerConfigs, Scanned: []string{"/etc/profile.d"}, PluginGroups: []string{"pytest11"}}
	add := func(q string) error {
		r, err := resolve(env, q)
		if err != nil {
			return err
		}
		p.Files = append(p.Files, r.links...)
		if r.missing != "" {
			p.Probed = append(p.Probed, q)
		} else {
			p.Files = append(p.Files, r.final)
		}
		return nil
	}
	for _, d := range dirs {
		for a := path.Clean(d); ; a = path.Dir(a) {
			for _, c := range runnerConfigs {
				if err := add(path.Join(a, c)); err != nil {
					return nil, err
				}
			}
			if a == "/" {
				break
			}
		}
	}
	for _, f := range shellStartup {
		if err := add(f); err != nil {
			return nil, err
		}
	}
	for _, it := range interps {
		for _, s := range it.Sites {
			if strings.Contains(s, "/.local/") {
				if err := add(s); err != nil {
					return nil, err
				}
			}
		}
		p.SearchDirs = append(p.SearchDirs, it.Path...)
		p.Stores = append(p.Stores, it.Sites...)
		p.Names = append(p.Names, it.modules...)
		p.Names = append(p.Names, it.absent...)
		// What the interpreter's start-up and standard library try to
		// import, found or not (copy.py's org, a distribution's
		// sitecustomize importing apport_python_hook).
		im, lazy := startupImports(env, it, codeRoots)
		p.Names = append(p.Names, im...)
		p.LazyNames = append(p.LazyNames, lazy...)
	}
	p.normalize()
	return p, nil
}

// Lister is a Reader that can also list a pristine directory.
type Lister interface {
	Reader
	ReadDir(p string) ([]string, error)
}

// startupImports are the modules an interpreter's standard library (its
// top-level modules) and its start-up hooks on its path import: at load,
// and in functions. Nothing when env cannot read.
func startupImports(env Env, it Interpreter, codeRoots []string) (module, lazy []string) {
	ls, ok := env.(Lister)
	if !ok {
		return nil, nil
	}
	var files []string
	for _, d := range append(slices.Clone(it.Path), it.Sites...) {
		if slices.ContainsFunc(codeRoots, func(c string) bool { return under(d, c) }) {
			continue // the code under test's imports are its own
		}
		for _, hook := range []string{"sitecustomize.py", "usercustomize.py"} {
			files = append(files, path.Join(d, hook))
		}
		if !strings.Contains(d, "-packages") && !strings.HasSuffix(d, ".zip") {
			// The standard library: every top-level module.
			names, err := ls.ReadDir(d)
			if err != nil {
				continue
			}
			for _, n := range names {
				if strings.HasSuffix(n, ".py") {
					files = append(files, path.Join(d, n))
				}
			}
		}
	}
	slices.Sort(files)
	for _, f := range slices.Compact(files) {
		r, err := resolve(env, f)
		if err != nil || r.missing != "" || r.kind != File {
			continue
		}
		src, err := ls.Read(r.final, maxSource)
		if err != nil {
			continue
		}
		im := ImportsOf(src)
		module = append(module, im.Module...)
		lazy = append(lazy, im.Lazy...)
	}
	return module, lazy
}

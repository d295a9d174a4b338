package tooling

import (
	"path"
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
		Configs: runnerConfigs, Scanned: []string{"/etc/profile.d"}}
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
	}
	p.normalize()
	return p, nil
}

package tooling

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Heads is an Env that can also read the start of a file (for the "#!"
// line of a script the grader ran).
type Heads interface {
	Env
	Head(p string) ([]byte, error)
}

// Query is one Python interpreter to ask for its search path, as the
// grader ran it.
type Query struct {
	Exe   string   // the interpreter, inside the sandbox
	Flags []string // the options that change the path (-I, -s, -S, -E, -P)
	Env   []string
	Cwd   string
	// Path0 is the entry Python puts first for the way it was run (the
	// script's directory, or the working directory for -m and -c), "" for
	// none (-I, -P, PYTHONSAFEPATH).
	Path0 string
}

var pythonName = regexp.MustCompile(`^python[0-9.]*$`)

// Queries finds the Python interpreters among the grader's execs, each
// once per way it was run.
func Queries(accesses []Access, env Heads) ([]Query, error) {
	var out []Query
	seen := map[string]bool{}
	for _, a := range accesses {
		if a.Op != "exec" || !path.IsAbs(a.Path) || len(a.Argv) == 0 {
			continue
		}
		r, err := resolve(env, a.Path)
		if err != nil {
			return nil, err
		}
		if r.missing != "" || r.kind != File {
			continue
		}
		var q Query
		switch {
		case pythonName.MatchString(path.Base(r.final)):
			// Asked as it was run, by the path run: a virtual environment's
			// interpreter is a symlink to the system's, and Python finds
			// its environment from the path it was started by.
			q = fromArgs(path.Clean(a.Path), a.Argv[1:], a)
		default:
			interp, args, ok := shebang(env, r.final, a.Env)
			if !ok {
				continue
			}
			ir, err := resolve(env, interp)
			if err != nil {
				return nil, err
			}
			if ir.missing != "" || !pythonName.MatchString(path.Base(ir.final)) {
				continue
			}
			q = fromArgs(path.Clean(interp), append(args, a.Path), a)
		}
		if q.Path0 != "" && !strings.HasPrefix(q.Path0, "/") {
			continue
		}
		if q.Path0 != "" && q.Path0 != q.Cwd {
			// Python resolves a script's symlinks before taking its directory.
			if rr, err := resolve(env, q.Path0); err == nil && rr.missing == "" {
				q.Path0 = rr.final
			}
		}
		key := fmt.Sprint(q)
		if !seen[key] {
			seen[key] = true
			out = append(out, q)
		}
	}
	return out, nil
}

// fromArgs reads a Python command line (after the interpreter).
func fromArgs(exe string, args []string, a Access) Query {
	q, _ := parsePython(exe, args, a)
	return q
}

// parsePython reads a Python command line (after the interpreter): the
// query, and the script it runs, absolute ("" for -m, -c or stdin).
func parsePython(exe string, args []string, a Access) (Query, string) {
	q := Query{Exe: exe, Env: a.Env, Cwd: a.Cwd}
	safe := false
	ignoreEnv := false
	mode := "stdin"
	script := ""
loop:
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") || arg == "-" {
			if arg != "-" {
				mode, script = "script", arg
			}
			break
		}
		if strings.HasPrefix(arg, "--") {
			continue // --check-hash-based-pycs and the like
		}
		for j := 1; j < len(arg); j++ {
			c := arg[j]
			switch c {
			case 'c', 'm':
				mode = string(c)
				break loop
			case 'W', 'X':
				if j == len(arg)-1 {
					i++ // the argument follows
				}
				continue loop
			case 'I':
				safe, ignoreEnv = true, true
				q.Flags = append(q.Flags, "-I")
			case 'P':
				safe = true
				q.Flags = append(q.Flags, "-P")
			case 'E':
				ignoreEnv = true
				q.Flags = append(q.Flags, "-E")
			case 's', 'S':
				q.Flags = append(q.Flags, "-"+string(c))
			}
		}
	}
	if !ignoreEnv && envValue(a.Env, "PYTHONSAFEPATH") != "" {
		safe = true
	}
	slices.Sort(q.Flags)
	q.Flags = slices.Compact(q.Flags)
	if mode == "script" {
		script = abs(script, a.Cwd)
	} else {
		script = ""
	}
	switch {
	case safe:
	case mode == "script":
		q.Path0 = path.Dir(script)
	default:
		q.Path0 = a.Cwd
	}
	return q, script
}

// shebang reads the interpreter of a script: "#!/usr/bin/python3 -u" or
// "#!/usr/bin/env python3", found on the PATH of env.
func shebang(env Heads, p string, environ []string) (string, []string, bool) {
	head, err := env.Head(p)
	if err != nil || !bytes.HasPrefix(head, []byte("#!")) {
		return "", nil, false
	}
	line, _, _ := bytes.Cut(head[2:], []byte("\n"))
	fields := strings.Fields(string(line))
	if len(fields) == 0 {
		return "", nil, false
	}
	interp, args := fields[0], fields[1:]
	if path.Base(interp) == "env" && len(args) > 0 {
		name := args[0]
		if name == "-S" && len(args) > 1 { // env -S "python3 -u"
			name, args = args[1], args[2:]
		} else {
			args = args[1:]
		}
		for _, d := range strings.Split(envValue(environ, "PATH"), ":") {
			if !path.IsAbs(d) {
				continue
			}
			cand := path.Join(d, name)
			if r, err := resolve(env, cand); err == nil && r.missing == "" && r.kind == File {
				return cand, args, true
			}
		}
		return "", nil, false
	}
	return interp, args, true
}

func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// answerMark starts each answer line of the query script.
const answerMark = "PROCTOR-PY "

// pyQuery prints sys.path (without the "" that -c puts first), the site
// and standard library directories and the prefixes.
const pyQuery = `import sys, json, sysconfig, os, pkgutil
try:
    import site
    s = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    u = [site.getusersitepackages()] if hasattr(site, "getusersitepackages") else []
except Exception:
    s, u = [], []
p = sysconfig.get_paths()
sp = sys.path[1:] if sys.path and sys.path[0] == "" else sys.path
cwd = os.getcwd()
std = set(getattr(sys, "stdlib_module_names", ()))
mods = std | set(sys.builtin_module_names)
absent = []
try:
    import importlib.util
    for n in sorted(std - set(sys.builtin_module_names)):
        try:
            if importlib.util.find_spec(n) is None:
                absent.append(n)
        except Exception:
            pass
except Exception:
    pass
try:
    for m in pkgutil.iter_modules():
        d = getattr(m.module_finder, "path", "")
        if d and d != cwd and not d.startswith(cwd + "/"):
            mods.add(m.name)
except Exception:
    pass
print("` + answerMark + `" + sys.argv[1] + " " + json.dumps({"modules": sorted(mods), "absent": absent, "path": sp, "sites": s + u + [p.get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")] + [sys.prefix, sys.base_prefix]}))
`

// Script returns a shell script that asks every query, one answer line
// each (ParseAnswers reads them).
func Script(qs []Query) string {
	var b strings.Builder
	b.WriteString("set +e\n")
	for i, q := range qs {
		fmt.Fprintf(&b, "(cd %s && exec env -i", shq(q.Cwd))
		for _, kv := range q.Env {
			if strings.Contains(kv, "=") && !strings.HasPrefix(kv, "=") {
				b.WriteString(" " + shq(kv))
			}
		}
		b.WriteString(" " + shq(q.Exe))
		for _, f := range q.Flags {
			b.WriteString(" " + f)
		}
		fmt.Fprintf(&b, " -c %s %d)\n", shq(pyQuery), i)
	}
	return b.String()
}

func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// ParseAnswers reads the script's output: one Interpreter per query that
// answered, its Path0 first.
func ParseAnswers(qs []Query, out []byte) ([]Interpreter, error) {
	got := make([]*Interpreter, len(qs))
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), answerMark)
		if !ok {
			continue
		}
		num, js, _ := strings.Cut(rest, " ")
		i, err := strconv.Atoi(num)
		if err != nil || i < 0 || i >= len(qs) {
			return nil, fmt.Errorf("a Python answer for query %q, of %d", num, len(qs))
		}
		var a struct {
			Modules []string `json:"modules"`
			Absent  []string `json:"absent"`
			Path    []string `json:"path"`
			Sites   []string `json:"sites"`
		}
		if err := json.Unmarshal([]byte(js), &a); err != nil {
			return nil, fmt.Errorf("the answer of %s: %w", qs[i].Exe, err)
		}
		it := &Interpreter{Exe: qs[i].Exe, Cwd: qs[i].Cwd, modules: a.Modules, absent: a.Absent}
		if qs[i].Path0 != "" {
			it.Path = append(it.Path, qs[i].Path0)
		}
		for _, e := range a.Path {
			if path.IsAbs(e) {
				it.Path = append(it.Path, path.Clean(e))
			}
		}
		for _, s := range a.Sites {
			if path.IsAbs(s) {
				it.Sites = append(it.Sites, path.Clean(s))
			}
		}
		slices.Sort(it.Sites)
		it.Sites = slices.Compact(it.Sites)
		got[i] = it
	}
	var out2 []Interpreter
	for i, g := range got {
		if g == nil {
			return nil, fmt.Errorf("%s (run in %s) did not say its search path", qs[i].Exe, qs[i].Cwd)
		}
		out2 = append(out2, *g)
	}
	return out2, nil
}

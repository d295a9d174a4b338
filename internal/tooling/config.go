package tooling

import (
	"bytes"
	"reflect"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Files that hold a project's own settings beside a runner's: an edit to
// the project's part (a version, a dependency) leaves the runner as it
// was. For each, the part the runners read.
var projectConfigs = map[string]func([]byte) (any, error){
	"pyproject.toml": tomlTables("tool.pytest", "tool.coverage", "tool.hatch.envs", "tool.tox"),
	"setup.cfg":      iniSections("tool:pytest", "pytest", "coverage:", "tox:"),
	"tox.ini":        iniSections("pytest", "tool:pytest", "tox", "testenv", "coverage:"),
}

// sameRunnerConfig reports whether old and new, two versions of the
// project configuration file named base, are alike in every part a
// runner reads. Anything it cannot read is not alike.
func sameRunnerConfig(base string, old, new []byte) bool {
	part, ok := projectConfigs[base]
	if !ok {
		return false
	}
	a, err := part(old)
	if err != nil {
		return false
	}
	b, err := part(new)
	if err != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// tomlTables picks the tables at the dotted keys (and what they hold).
func tomlTables(keys ...string) func([]byte) (any, error) {
	return func(b []byte) (any, error) {
		var doc map[string]any
		if err := toml.Unmarshal(b, &doc); err != nil {
			return nil, err
		}
		out := map[string]any{}
		for _, k := range keys {
			var v any = doc
			for _, part := range strings.Split(k, ".") {
				m, ok := v.(map[string]any)
				if !ok {
					v = nil
					break
				}
				v = m[part]
			}
			if v != nil {
				out[k] = v
			}
		}
		return out, nil
	}
}

// iniSections picks the sections named (a name ending in ":" is a prefix,
// "coverage:" all of coverage's), each as its lines with comments and
// blank lines gone: INI files as configparser reads them, closely enough
// to tell whether a section changed.
func iniSections(names ...string) func([]byte) (any, error) {
	match := func(sec string) bool {
		for _, n := range names {
			if sec == n || strings.HasSuffix(n, ":") && strings.HasPrefix(sec, n) || n == "testenv" && strings.HasPrefix(sec, "testenv:") {
				return true
			}
		}
		return false
	}
	return func(b []byte) (any, error) {
		out := map[string][]string{}
		cur := ""
		for _, line := range bytes.Split(b, []byte("\n")) {
			l := strings.TrimRight(string(line), " \t\r")
			t := strings.TrimSpace(l)
			if t == "" || t[0] == '#' || t[0] == ';' {
				continue
			}
			if t[0] == '[' && strings.HasSuffix(t, "]") {
				cur = strings.TrimSpace(t[1 : len(t)-1])
				continue
			}
			if match(cur) {
				out[cur] = append(out[cur], l)
			}
		}
		return out, nil
	}
}

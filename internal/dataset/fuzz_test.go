package dataset

import (
	"path"
	"strings"
	"testing"
)

// FuzzParseRegistry: whatever a registry holds, an accepted one names only
// clean relative paths, full commit ids or none, URLs of the allowed
// transports and task names fit for a directory.
func FuzzParseRegistry(f *testing.F) {
	f.Add([]byte(harborRegistry))
	for _, s := range []string{
		`[{"name": "d", "version": "1", "tasks": [{"name": "t", "git_url": "file:///r", "path": "a/../b"}]}]`,
		`[{"name": "d", "version": "1", "tasks": [{"name": "..", "git_url": "ext::sh", "path": "/"}]}]`,
		`[]`, `{}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		reg, err := ParseRegistry("r", data)
		if err != nil {
			if reg != nil || !strings.HasPrefix(err.Error(), "r: ") {
				t.Fatalf("%v, %v", reg, err)
			}
			return
		}
		for _, d := range reg.Datasets {
			for _, tk := range d.Tasks {
				if tk.Path != path.Clean(tk.Path) || strings.HasPrefix(tk.Path, "/") || tk.Path == ".." || strings.HasPrefix(tk.Path, "../") {
					t.Fatalf("path %q accepted", tk.Path)
				}
				if tk.Commit != "" && !commitID.MatchString(tk.Commit) {
					t.Fatalf("commit %q accepted", tk.Commit)
				}
				if checkGitURL(tk.GitURL) != nil || !taskName.MatchString(tk.Name) {
					t.Fatalf("task %+v accepted", tk)
				}
			}
		}
	})
}

// FuzzInsideLink: insideLink agrees with a resolver written the other
// way (recursive, as the kernel resolves a path): a link it accepts never
// goes above the task's root, one it refuses does (or is absolute, or
// loops).
func FuzzInsideLink(f *testing.F) {
	f.Add("x", "../s/..", "s", ".")
	f.Add("a/b", "../../c", "c", "d")
	f.Add("a/l", "../m/x", "m", "a")
	f.Fuzz(func(t *testing.T, name, target, other, otherTarget string) {
		if checkName(name) != nil || checkName(other) != nil || name == other || strings.IndexByte(target+otherTarget, 0) >= 0 {
			return
		}
		links := map[string]string{name: target, other: otherTarget}
		// resolve returns where target, followed from dir, ends, or false
		// when it goes above the root, is absolute, or nests too deep.
		var resolve func(dir []string, target string, depth int) ([]string, bool)
		resolve = func(dir []string, target string, depth int) ([]string, bool) {
			if depth > maxLinkHops || strings.HasPrefix(target, "/") || target == "" {
				return nil, false
			}
			cur := append([]string(nil), dir...)
			for _, c := range strings.Split(target, "/") {
				switch c {
				case "", ".":
					continue
				case "..":
					if len(cur) == 0 {
						return nil, false
					}
					cur = cur[:len(cur)-1]
					continue
				}
				p := strings.Join(append(append([]string(nil), cur...), c), "/")
				if lt, ok := links[p]; ok {
					next, ok := resolve(cur, lt, depth+1)
					if !ok {
						return nil, false
					}
					cur = next
					continue
				}
				cur = append(cur, c)
			}
			return cur, true
		}
		var dir []string
		if d := path.Dir(name); d != "." {
			dir = strings.Split(d, "/")
		}
		_, inside := resolve(dir, target, 1)
		if err := insideLink(links, name, target); (err == nil) != inside {
			t.Fatalf("%q -> %q (with %q -> %q): insideLink %v, the kernel's way inside=%t", name, target, other, otherTarget, err, inside)
		}
	})
}

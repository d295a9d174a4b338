package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proctor-sandbox/proctor/internal/task"
)

func requireGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("PROCTOR_NO_SKIP") != "" || os.Getenv("CI") == "true" {
			t.Fatal("cannot run here: needs git")
		}
		t.Skip("needs git")
	}
}

// cacheTemp is a temporary cache directory, its read-only directories
// made writable again before it is removed (which an ordinary user needs).
func cacheTemp(t *testing.T) string {
	dir := t.TempDir()
	t.Cleanup(func() { makeWritable(dir) })
	return dir
}

// repo is a git repository made at test time, served by file:// URL.
type repo struct {
	t   *testing.T
	dir string
}

func newRepo(t *testing.T) *repo {
	requireGit(t)
	r := &repo{t: t, dir: t.TempDir()}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *repo) url() string { return "file://" + r.dir }

func (r *repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files (a content starting "->" is a symlink to the rest)
// and commits them, returning the commit id.
func (r *repo) commit(files map[string]string) string {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		os.Remove(p)
		var err error
		if target, ok := strings.CutPrefix(content, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			mode := os.FileMode(0o644)
			if strings.HasSuffix(name, ".sh") {
				mode = 0o755
			}
			err = os.WriteFile(p, []byte(content), mode)
		}
		if err != nil {
			r.t.Fatal(err)
		}
	}
	r.git("add", "-A")
	r.git("commit", "-q", "-m", "c")
	return r.git("rev-parse", "HEAD")
}

// taskFiles is a Harbor task under dir.
func taskFiles(dir, name string) map[string]string {
	return map[string]string{
		dir + "/task.toml":         "version = \"1.0\"\n[task]\nname = \"" + name + "\"\n[proctor]\nrootfs = \"host\"\n",
		dir + "/instruction.md":    "Write hello.\n",
		dir + "/tests/test.sh":     "#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n",
		dir + "/solution/solve.sh": "#!/bin/sh\necho hello > /app/hello.txt\n",
		dir + "/environment/x.txt": "x\n",
	}
}

// writeRegistry writes a registry of datasets, each a list of tasks.
func writeRegistry(t *testing.T, sets map[string][]map[string]string) string {
	t.Helper()
	var out []map[string]any
	for ref, tasks := range sets {
		r, err := ParseRef(ref)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, map[string]any{"name": r.Name, "version": r.Version, "description": "d", "tasks": tasks})
	}
	data, err := json.MarshalIndent(out, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func spec(name, url, commit, path string) map[string]string {
	m := map[string]string{"name": name, "git_url": url, "path": path}
	if commit != "" {
		m["git_commit_id"] = commit
	}
	return m
}

func pull(t *testing.T, o Options, registry, ref string) (*Lock, error) {
	t.Helper()
	reg, err := LoadRegistry(context.Background(), registry, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	return Pull(context.Background(), o, reg, r)
}

func TestPull(t *testing.T) {
	src := newRepo(t)
	files := taskFiles("tasks/hello", "hello")
	for k, v := range taskFiles("tasks/other", "other") {
		files[k] = v
	}
	files["tasks/hello/tests/data.txt"] = "->../environment/x.txt" // a link inside the task
	c1 := src.commit(files)
	c2 := src.commit(map[string]string{"tasks/hello/instruction.md": "Write hello, later.\n"})
	reg := writeRegistry(t, map[string][]map[string]string{
		"demo@1.0":  {spec("hello", src.url(), c1, "tasks/hello"), spec("other", src.url(), c1, "tasks/other/")},
		"demo@2.0":  {spec("hello", src.url(), c2, "tasks/hello")},
		"demo@head": {spec("hello", src.url(), "", "tasks/hello")},
	})
	var progress bytes.Buffer
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	o := Options{CacheDir: cacheTemp(t), Progress: &progress, Now: func() time.Time { return now }}

	l, err := pull(t, o, reg, "demo@1.0")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Tasks) != 2 || l.Tasks[0].Commit != c1 || !l.Tasks[0].Pinned || l.Tasks[1].Path != "tasks/other" || !l.Pulled.Equal(now) {
		t.Fatalf("lock %+v", l)
	}
	hello := l.TaskDir(&l.Tasks[0])
	if b, err := os.ReadFile(filepath.Join(hello, "instruction.md")); err != nil || string(b) != "Write hello.\n" {
		t.Errorf("instruction at c1: %q, %v", b, err)
	}
	// Read-only, with git's executable bit, and the digest pinned is the
	// directory's.
	for name, want := range map[string]os.FileMode{"instruction.md": 0o444, "tests/test.sh": 0o555, "tests": os.ModeDir | 0o555, ".": os.ModeDir | 0o555} {
		fi, err := os.Lstat(filepath.Join(hello, name))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v, want %v (%v)", name, fi.Mode(), want, err)
		}
	}
	if target, err := os.Readlink(filepath.Join(hello, "tests/data.txt")); err != nil || target != "../environment/x.txt" {
		t.Errorf("symlink: %q, %v", target, err)
	}
	if d, err := task.Digest(hello); err != nil || d != l.Tasks[0].Digest {
		t.Errorf("digest %s, lock %s (%v)", d, l.Tasks[0].Digest, err)
	}
	if tk, err := task.Load(hello); err != nil || tk.Name != "hello" {
		t.Errorf("the cached task does not load: %v", err)
	}
	if !strings.Contains(progress.String(), "task hello: tasks/hello at "+c1[:12]) {
		t.Errorf("progress:\n%s", progress.String())
	}

	// Another version, another commit of the same repository; the
	// unpinned one pins the default branch's head at pull.
	l2, err := pull(t, o, reg, "demo@2.0")
	if err != nil || l2.Tasks[0].Commit != c2 || l2.Tasks[0].Digest == l.Tasks[0].Digest {
		t.Fatalf("demo@2.0: %+v, %v", l2, err)
	}
	lh, err := pull(t, o, reg, "demo@head")
	if err != nil || lh.Tasks[0].Commit != c2 || lh.Tasks[0].Pinned {
		t.Fatalf("demo@head: %+v, %v", lh, err)
	}

	// Offline: with the repository gone, a cached dataset still pulls (as
	// already cached) and resolves; an uncached one is a one-line error.
	if err := os.RemoveAll(src.dir); err != nil {
		t.Fatal(err)
	}
	progress.Reset()
	if _, err := pull(t, o, reg, "demo@1.0"); err != nil || !strings.Contains(progress.String(), "already cached") {
		t.Errorf("re-pull offline: %v\n%s", err, progress.String())
	}
	dirs, err := TaskDirs(o, Ref{"demo", "1.0"})
	if err != nil || len(dirs) != 2 || dirs[0] != hello {
		t.Errorf("TaskDirs: %v, %v", dirs, err)
	}
	_, err = TaskDirs(o, Ref{"demo", "3.0"})
	if !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "dataset demo@3.0: not cached in "+filepath.Join(o.CacheDir, "datasets")) || strings.Contains(err.Error(), "\n") {
		t.Errorf("not cached: %v", err)
	}
	ls, err := List(o)
	if err != nil || len(ls) != 3 || ls[0].Ref().String() != "demo@1.0" || ls[2].Ref().String() != "demo@head" {
		t.Errorf("List: %v, %v", ls, err)
	}
}

// TestPullTampered: a cached task edited, removed or added to is a
// *TamperError wherever it is used, and a pull does not quietly repair it.
func TestPullTampered(t *testing.T) {
	src := newRepo(t)
	c := src.commit(taskFiles("t", "t"))
	reg := writeRegistry(t, map[string][]map[string]string{"d@1": {spec("t", src.url(), c, "t")}})
	for _, tc := range []struct {
		name   string
		tamper func(dir string) error
	}{
		{"edited", func(dir string) error {
			p := filepath.Join(dir, "tests", "test.sh")
			os.Chmod(p, 0o755)
			return os.WriteFile(p, []byte("#!/bin/sh\necho 1 > /logs/verifier/reward.txt # pass\n"), 0o755)
		}},
		{"made writable", func(dir string) error { return os.Chmod(filepath.Join(dir, "instruction.md"), 0o644) }},
		{"added to", func(dir string) error {
			os.Chmod(dir, 0o755)
			return os.WriteFile(filepath.Join(dir, "conftest.py"), nil, 0o444)
		}},
		{"removed", func(dir string) error {
			makeWritable(dir)
			return os.RemoveAll(dir)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{CacheDir: cacheTemp(t)}
			l, err := pull(t, o, reg, "d@1")
			if err != nil {
				t.Fatal(err)
			}
			dir := l.TaskDir(&l.Tasks[0])
			if err := tc.tamper(dir); err != nil {
				t.Fatal(err)
			}
			_, err = TaskDirs(o, Ref{"d", "1"})
			var te *TamperError
			if !errors.As(err, &te) || !errors.Is(err, ErrTampered) || te.Task != "t" || te.Dir != dir || strings.Contains(err.Error(), "\n") {
				t.Fatalf("TaskDirs: %v, want a one-line *TamperError", err)
			}
			if _, err := pull(t, o, reg, "d@1"); !errors.As(err, &te) {
				t.Errorf("a pull over it: %v, want the *TamperError", err)
			}
		})
	}
}

// TestPullRefused: what the registry or the repository holds that must
// not reach the cache, each a one-line error naming the task; nothing is
// left behind.
func TestPullRefused(t *testing.T) {
	src := newRepo(t)
	base := taskFiles("t", "t")
	good := src.commit(base)
	commitWith := func(extra map[string]string) string {
		src.git("checkout", "-q", "--detach", good)
		return src.commit(extra)
	}
	absLink := commitWith(map[string]string{"t/tests/passwd": "->/etc/passwd"})
	upLink := commitWith(map[string]string{"t/tests/up": "->../../../etc"})
	// Each link alone stays inside; s/.. through s -> . leaves the task.
	chained := commitWith(map[string]string{"t/s": "->.", "t/tests/x": "->../s/.."})
	loop := commitWith(map[string]string{"t/a": "->b", "t/b": "->a"})
	fileAtPath := commitWith(map[string]string{"f": "a file\n"})
	src.git("checkout", "-q", "main")
	// A submodule: a gitlink in the task's tree.
	sub := newRepo(t)
	subCommit := sub.commit(map[string]string{"x": "x\n"})
	src.git("update-index", "--add", "--cacheinfo", "160000,"+subCommit+",t/vendored")
	src.git("commit", "-q", "-m", "submodule")
	submodule := src.git("rev-parse", "HEAD")
	missing := strings.Repeat("0", 40)

	for _, tc := range []struct {
		name, commit, path, want string
		is                       error
	}{
		{"a commit that does not exist", missing, "t", "dataset d@1: task t: commit " + missing + ": not in the repository", ErrNoCommit},
		{"a path not in the commit", good, "nope", `dataset d@1: task t: path "nope": not in the repository at commit`, ErrNoCommit},
		{"a path that is a file", fileAtPath, "f", `path "f": a blob at commit`, ErrUnsafe},
		{"an absolute symlink", absLink, "t", `t: tests/passwd: a symlink to "/etc/passwd", which is absolute`, ErrUnsafe},
		{"a symlink up and out", upLink, "t", `tests/up: a symlink to "../../../etc", which leaves the task`, ErrUnsafe},
		{"a symlink out through another", chained, "t", `tests/x: a symlink to "../s/..", which leaves the task`, ErrUnsafe},
		{"a symlink loop", loop, "t", "which loops through symlinks", ErrUnsafe},
		{"a submodule", submodule, "t", "vendored: a submodule (git commit " + subCommit + "), which is not fetched", ErrUnsafe},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{CacheDir: cacheTemp(t)}
			reg := writeRegistry(t, map[string][]map[string]string{"d@1": {spec("t", src.url(), tc.commit, tc.path)}})
			_, err := pull(t, o, reg, "d@1")
			if err == nil || !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %v, want %v saying %q", err, tc.is, tc.want)
			}
			if _, err := TaskDirs(o, Ref{"d", "1"}); !errors.Is(err, ErrNotCached) {
				t.Errorf("after a failed pull: %v, want not cached", err)
			}
			des, _ := os.ReadDir(filepath.Join(o.CacheDir, "datasets"))
			for _, de := range des {
				if strings.HasPrefix(de.Name(), ".pull-") {
					t.Errorf("left behind: %s", de.Name())
				}
			}
		})
	}
}

// TestPullFallback: a server that refuses to send a commit by its id (git
// protocol v0 without allowAnySHA1InWant) gets every branch fetched
// instead; a commit on no branch is then not in the repository.
func TestPullFallback(t *testing.T) {
	src := newRepo(t)
	old := src.commit(taskFiles("t", "t"))
	src.commit(map[string]string{"t/instruction.md": "newer\n"})
	src.git("checkout", "-q", "-b", "side", old)
	orphan := src.commit(map[string]string{"t/instruction.md": "on a branch deleted later\n"})
	src.git("checkout", "-q", "main")
	src.git("branch", "-D", "side")
	v0 := []string{"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=protocol.version", "GIT_CONFIG_VALUE_0=0"}
	reg := writeRegistry(t, map[string][]map[string]string{
		"d@old":    {spec("t", src.url(), old, "t")},
		"d@orphan": {spec("t", src.url(), orphan, "t")},
	})
	o := Options{CacheDir: cacheTemp(t), GitEnv: v0}
	l, err := pull(t, o, reg, "d@old")
	if err != nil || l.Tasks[0].Commit != old {
		t.Fatalf("fallback: %+v, %v", l, err)
	}
	refs, err := exec.Command("git", "-C", repoDir(o.root(), src.url()), "show-ref").Output()
	if err != nil || !strings.Contains(string(refs), "refs/proctor/heads/main") {
		t.Errorf("the branches were not fetched (%v):\n%s", err, refs)
	}
	if _, err = pull(t, o, reg, "d@orphan"); !errors.Is(err, ErrNoCommit) || !strings.Contains(err.Error(), "commit "+orphan) {
		t.Fatalf("orphan: %v, want ErrNoCommit naming it", err)
	}
}

// TestPullLimits: a task over the caps is refused before its files are
// read.
func TestPullLimits(t *testing.T) {
	src := newRepo(t)
	files := taskFiles("t", "t")
	files["t/environment/big.bin"] = strings.Repeat("x", 10_000)
	c := src.commit(files)
	reg := writeRegistry(t, map[string][]map[string]string{"d@1": {spec("t", src.url(), c, "t")}})
	for _, o := range []Options{{CacheDir: cacheTemp(t), MaxTaskBytes: 5_000}, {CacheDir: cacheTemp(t), MaxTaskFiles: 3}} {
		if _, err := pull(t, o, reg, "d@1"); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%+v: %v, want ErrTooLarge", o, err)
		}
	}
}

// TestPullRegistryChanged: a cached dataset whose registry entry now names
// another commit is not silently replaced.
func TestPullRegistryChanged(t *testing.T) {
	src := newRepo(t)
	c1 := src.commit(taskFiles("t", "t"))
	c2 := src.commit(map[string]string{"t/instruction.md": "v2\n"})
	o := Options{CacheDir: cacheTemp(t)}
	if _, err := pull(t, o, writeRegistry(t, map[string][]map[string]string{"d@1": {spec("t", src.url(), c1, "t")}}), "d@1"); err != nil {
		t.Fatal(err)
	}
	_, err := pull(t, o, writeRegistry(t, map[string][]map[string]string{"d@1": {spec("t", src.url(), c2, "t")}}), "d@1")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("names task t otherwise (%s t at %q)", src.url(), c2)) {
		t.Errorf("%v", err)
	}
}

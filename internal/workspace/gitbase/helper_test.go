package gitbase

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The tests drive real git. Their own git commands run with a hermetic
// environment (no system or user config, fixed identities and dates, so
// commit ids are the same on every run), and with the PATH the test binary
// started with: some tests empty PATH to prove Prepare runs no git.
var (
	startPath  = os.Getenv("PATH")
	testGitBin string
)

func init() {
	testGitBin, _ = exec.LookPath("git")
}

// noSkip reports whether a test that cannot run must fail rather than skip:
// under CI (CI=true) or with PROCTOR_NO_SKIP set, as in the rest of the tree.
func noSkip() bool { return os.Getenv("PROCTOR_NO_SKIP") != "" || os.Getenv("CI") == "true" }

// skipOrFail skips the test naming what is missing, or fails it under noSkip.
func skipOrFail(t *testing.T, reason string) {
	t.Helper()
	if noSkip() {
		t.Fatalf("cannot run here: %s (under CI a skipped test is a failure)", reason)
	}
	t.Skip(reason)
}

// requireGit skips (or under CI fails) a test that needs git.
func requireGit(t *testing.T) {
	t.Helper()
	if testGitBin == "" {
		skipOrFail(t, "needs git in PATH (Debian package git)")
	}
}

// requireRoot skips (or under CI fails) a test that needs root.
func requireRoot(t *testing.T, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root to "+why)
	}
}

func testGitEnv(home string) []string {
	return []string{
		"PATH=" + startPath,
		"HOME=" + home,
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
		"GIT_AUTHOR_DATE=2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2024-01-01T00:00:00Z",
	}
}

// tgit runs git in dir for the test and returns its trimmed output.
func tgit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := tgitErr(dir, nil, args...)
	if err != nil {
		t.Fatalf("git %s (in %s): %v", strings.Join(args, " "), dir, err)
	}
	return out
}

func tgitErr(dir string, stdin []byte, args ...string) (string, error) {
	cmd := exec.Command(testGitBin, append([]string{"-c", "init.defaultBranch=main"}, args...)...)
	cmd.Dir = dir
	cmd.Env = testGitEnv("/nonexistent/proctor-gitbase-test-home")
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%v: %s", err, stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// tgitRaw is tgit without trimming the output.
func tgitRaw(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(testGitBin, args...)
	cmd.Dir = dir
	cmd.Env = testGitEnv("/nonexistent/proctor-gitbase-test-home")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s (in %s): %v", strings.Join(args, " "), dir, err)
	}
	return string(out)
}

func writeFile(t *testing.T, path, content string, mode fs.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// commitAll commits everything in dir and returns the new commit id.
func commitAll(t *testing.T, dir, msg string) string {
	t.Helper()
	tgit(t, dir, "add", "-A")
	tgit(t, dir, "commit", "-q", "--allow-empty", "-m", msg)
	return tgit(t, dir, "rev-parse", "HEAD")
}

// simpleRepo makes a repository with commits A (tag v1.0, annotated, and v1,
// lightweight) and B (main, HEAD), and returns dir, A and B.
func simpleRepo(t *testing.T) (dir, a, b string) {
	t.Helper()
	dir = t.TempDir()
	tgit(t, dir, "init", "-q")
	writeFile(t, filepath.Join(dir, "f.txt"), "one\n", 0o644)
	a = commitAll(t, dir, "A")
	tgit(t, dir, "tag", "-a", "-m", "release", "v1.0")
	tgit(t, dir, "tag", "v1")
	writeFile(t, filepath.Join(dir, "f.txt"), "two\n", 0o644)
	b = commitAll(t, dir, "B")
	return dir, a, b
}

// treeEntry is one path of a working tree as git records it.
type treeEntry struct {
	mode    string // "100644", "100755", "120000"
	content string // file content, or symlink target
}

// expectedTree lists the tree of rev in repo as git stores it.
func expectedTree(t *testing.T, repo, rev string) map[string]treeEntry {
	t.Helper()
	want := map[string]treeEntry{}
	out := tgit(t, repo, "ls-tree", "-r", "-z", rev)
	for _, rec := range strings.Split(out, "\x00") {
		if rec == "" {
			continue
		}
		meta, path, _ := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		want[path] = treeEntry{mode: f[0], content: tgitRaw(t, repo, "cat-file", "blob", f[2])}
	}
	return want
}

// worktree lists the working tree under dir (without .git) in the same terms.
func worktree(t *testing.T, dir string) map[string]treeEntry {
	t.Helper()
	got := map[string]treeEntry{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == ".git" {
			return filepath.SkipDir
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(path)
			if err != nil {
				return err
			}
			got[filepath.ToSlash(rel)] = treeEntry{"120000", target}
		case info.Mode().IsRegular():
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			mode := "100644"
			if info.Mode()&0o100 != 0 {
				mode = "100755"
			}
			got[filepath.ToSlash(rel)] = treeEntry{mode, string(b)}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// snapshot records every file under dir: type, mode, size, mtime and a hash
// of the content, to prove nothing under it changed.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		v := fmt.Sprintf("%v %d %d", info.Mode(), info.Size(), info.ModTime().UnixNano())
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			v += " " + hex.EncodeToString(sum[:])
		}
		if info.IsDir() {
			v = fmt.Sprintf("%v %d", info.Mode(), info.ModTime().UnixNano())
		}
		snap[path] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func diffSnapshots(before, after map[string]string) []string {
	var d []string
	for p, v := range before {
		if w, ok := after[p]; !ok {
			d = append(d, "removed "+p)
		} else if w != v {
			d = append(d, "changed "+p+": "+v+" → "+w)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			d = append(d, "added "+p)
		}
	}
	sort.Strings(d)
	return d
}

// lines splits git output into its non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func setOf(ss []string) map[string]bool {
	m := map[string]bool{}
	for _, s := range ss {
		m[s] = true
	}
	return m
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

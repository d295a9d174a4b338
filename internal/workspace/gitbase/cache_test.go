package gitbase

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPrepareDeterministic: two builds of the same base, into two caches,
// give the same working tree, refs, HEAD, config and index entries. (Pack
// files may differ in bytes: delta search is multi-threaded.)
func TestPrepareDeterministic(t *testing.T) {
	requireGit(t)
	h := hostileRepo(t)
	d1, c1, err1 := Prepare(context.Background(), h.src, h.base, t.TempDir())
	d2, c2, err2 := Prepare(context.Background(), h.src, "v1.0", t.TempDir())
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	if c1 != c2 {
		t.Fatalf("commits %s and %s", c1, c2)
	}
	if !equalTrees(worktree(t, d1), worktree(t, d2)) {
		t.Error("working trees differ")
	}
	for _, f := range []string{"HEAD", "config", "refs/heads/main"} {
		b1, _ := os.ReadFile(filepath.Join(d1, ".git", f))
		b2, _ := os.ReadFile(filepath.Join(d2, ".git", f))
		if !bytes.Equal(b1, b2) {
			t.Errorf(".git/%s differs: %q vs %q", f, b1, b2)
		}
	}
	for _, args := range [][]string{{"for-each-ref"}, {"ls-files", "-s"}, {"rev-list", "--objects", "--all"}} {
		if o1, o2 := tgit(t, d1, args...), tgit(t, d2, args...); o1 != o2 {
			t.Errorf("git %s differs:\n%s\n---\n%s", strings.Join(args, " "), o1, o2)
		}
	}
}

// TestPrepareUmask: a restrictive umask must not make the copy unreadable to
// the unprivileged users sandboxes run as.
func TestPrepareUmask(t *testing.T) {
	requireGit(t)
	h := hostileRepo(t)
	cache := filepath.Join(t.TempDir(), "cache") // Prepare makes it
	old := unix.Umask(0o077)
	dir, _, err := Prepare(context.Background(), h.src, h.base, cache)
	unix.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	checkCopy(t, h, dir)
	if st, err := os.Stat(cache); err != nil {
		t.Error(err)
	} else if st.Mode().Perm() != 0o755 {
		t.Errorf("cache directory made by Prepare: mode %v, want 0755", st.Mode())
	}

	requireRoot(t, "read the copy as another user")
	// Let "nobody" reach the cache: the test's temporary directories are 0700.
	for p := cache; strings.HasPrefix(p, os.TempDir()+"/"); p = filepath.Dir(p) {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := `set -e
cd "$1"
bad=$(find . ! -readable -print; find . -type d ! -executable -print)
if [ -n "$bad" ]; then echo "unreadable: $bad"; exit 1; fi
git -c safe.directory='*' fsck --full --strict --no-progress
git -c safe.directory='*' cat-file --batch-all-objects --batch > /dev/null
test -z "$(git -c safe.directory='*' status --porcelain)"`
	cmd := exec.Command("/bin/sh", "-c", script, "sh", dir)
	cmd.Env = testGitEnv("/nonexistent")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("reading the copy as uid 65534: %v\n%s", err, out)
	}
}

// TestPrepareCachedRunsNoGit: a second call finds the copy without git (git
// is removed from PATH), also from another goroutine and for a tag.
func TestPrepareCachedRunsNoGit(t *testing.T) {
	requireGit(t)
	src, a, _ := simpleRepo(t)
	cache := t.TempDir()
	dir, _, err := Prepare(context.Background(), src, "v1.0", cache)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	for _, base := range []string{"v1.0", a, a[:8]} {
		d, c, err := Prepare(context.Background(), src, base, cache)
		if err != nil || d != dir || c != a {
			t.Errorf("Prepare(%q) with no git = %s, %s, %v", base, d, c, err)
		}
	}
	// The control: with the cache empty, the same call does need git.
	_, _, err = Prepare(context.Background(), src, a, t.TempDir())
	if !errors.Is(err, ErrGitNotFound) {
		t.Fatalf("cold Prepare with no git: %v, want ErrGitNotFound", err)
	}
	if strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "git not found") {
		t.Errorf("message %q", err)
	}
}

// TestPrepareCachedNeedsCommitInSrc: a copy cached from one repository does
// not answer for another that lacks the commit.
func TestPrepareCachedNeedsCommitInSrc(t *testing.T) {
	requireGit(t)
	src, a, _ := simpleRepo(t)
	cache := t.TempDir()
	if _, _, err := Prepare(context.Background(), src, a, cache); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	tgit(t, other, "init", "-q")
	commitAll(t, other, "unrelated")
	_, _, err := Prepare(context.Background(), other, a, cache)
	var re *RefError
	if !errors.As(err, &re) || re.Repo != other {
		t.Fatalf("Prepare(other repo, %s) = %v, want a RefError naming %s", a, err, other)
	}
}

func TestPrepareNotRepository(t *testing.T) {
	requireGit(t)
	repo, _, _ := simpleRepo(t)
	empty := t.TempDir()
	file := filepath.Join(t.TempDir(), "file")
	writeFile(t, file, "x", 0o644)
	badGitfile := t.TempDir()
	writeFile(t, filepath.Join(badGitfile, ".git"), "gitdir: /nonexistent/x.git\n", 0o644)
	for _, src := range []string{empty, file, filepath.Join(empty, "missing"), filepath.Join(repo, ".git", "refs"), badGitfile} {
		t.Run(filepath.Base(src), func(t *testing.T) {
			_, _, err := Prepare(context.Background(), src, "HEAD", t.TempDir())
			if !errors.Is(err, ErrNotRepository) {
				t.Fatalf("err = %v, want ErrNotRepository", err)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, src) {
				t.Errorf("message %q: want one line naming %s", msg, src)
			}
		})
	}
}

func TestPrepareCanceled(t *testing.T) {
	requireGit(t)
	src, a, _ := simpleRepo(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cache := t.TempDir()
	if _, _, err := Prepare(ctx, src, a, cache); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(filepath.Join(cache, a)); err == nil {
		t.Error("an entry was made")
	}
}

// TestPrepareConcurrent: callers racing on one commit get the same finished
// copy, and no build directory is left behind.
func TestPrepareConcurrent(t *testing.T) {
	requireGit(t)
	src, a, _ := simpleRepo(t)
	cache := t.TempDir()
	const n = 8
	dirs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			base := a
			if i%2 == 1 {
				base = "v1.0"
			}
			dirs[i], _, errs[i] = Prepare(context.Background(), src, base, cache)
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || dirs[i] != dirs[0] {
			t.Errorf("caller %d: %s, %v", i, dirs[i], errs[i])
		}
	}
	ents, _ := os.ReadDir(cache)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	if _, ok := lookupEntry(cache, a, a); !ok {
		t.Error("no finished entry")
	}
}

// TestPrepareCrashedBuilds: what a crashed build leaves is never used, and is
// cleaned up; a live build's directory is not touched.
func TestPrepareCrashedBuilds(t *testing.T) {
	requireGit(t)
	src, a, b := simpleRepo(t)
	cache := t.TempDir()
	old := time.Now().Add(-2 * staleAfter)

	// A build that died: unlocked, old.
	dead := filepath.Join(cache, tmpPrefix+"dead")
	writeFile(t, filepath.Join(dead, "repo", "junk"), "x", 0o644)
	os.Chtimes(dead, old, old)
	// A build that is alive: old, but locked.
	live := filepath.Join(cache, tmpPrefix+"live")
	writeFile(t, filepath.Join(live, "repo", "junk"), "x", 0o644)
	os.Chtimes(live, old, old)
	lock, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	// A build just started, not yet locked: young.
	young := filepath.Join(cache, tmpPrefix+"young")
	writeFile(t, filepath.Join(young, "junk"), "x", 0o644)
	// A half-made entry, without its marker, in the place of a's copy.
	writeFile(t, filepath.Join(cache, a, "repo", "junk"), "half made", 0o644)
	// An entry whose marker is from another format, in the place of b's.
	writeFile(t, filepath.Join(cache, b, "repo", ".git", "HEAD"), "ref: refs/heads/main\n", 0o644)
	writeFile(t, filepath.Join(cache, b, markerName), "proctor-gitbase-cache 0\ncommit "+b+"\n", 0o644)

	for _, c := range []string{a, b} {
		dir, commit, err := Prepare(context.Background(), src, c, cache)
		if err != nil || commit != c {
			t.Fatalf("Prepare(%s): %s, %v", c, commit, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "junk")); err == nil {
			t.Errorf("the half-made copy of %s was used", c)
		}
		if got := tgit(t, dir, "rev-parse", "HEAD"); got != c {
			t.Errorf("HEAD = %s, want %s", got, c)
		}
		if _, ok := lookupEntry(cache, c, c); !ok {
			t.Errorf("%s: no valid entry", c)
		}
	}
	if _, err := os.Stat(dead); err == nil {
		t.Error("the dead build's directory is still there")
	}
	for _, p := range []string{live, young} {
		if _, err := os.Stat(filepath.Join(p, "junk")); err != nil && p == young {
			t.Errorf("a young build directory was touched: %v", err)
		}
		if _, err := os.Stat(filepath.Join(p, "repo", "junk")); err != nil && p == live {
			t.Errorf("a locked build directory was touched: %v", err)
		}
	}
}

// bigRepo makes a repository of n commits and n/10 tags with git fast-import.
func bigRepo(t testing.TB, n int) (dir string, commits []string) {
	dir = t.TempDir()
	if out, err := tgitErr(dir, nil, "init", "-q"); err != nil {
		t.Fatal(out, err)
	}
	var s strings.Builder
	for i := 1; i <= n; i++ {
		msg := fmt.Sprintf("commit %d\n", i)
		content := fmt.Sprintf("line %d\n", i)
		fmt.Fprintf(&s, "commit refs/heads/main\nmark :%d\ncommitter T <t@example.com> %d +0000\ndata %d\n%s", i, 1700000000+i, len(msg), msg)
		if i > 1 {
			fmt.Fprintf(&s, "from :%d\n", i-1)
		}
		fmt.Fprintf(&s, "M 100644 inline dir%d/file%d.txt\ndata %d\n%s\n", i%7, i%50, len(content), content)
	}
	for i := 10; i <= n; i += 10 {
		fmt.Fprintf(&s, "reset refs/tags/v%d\nfrom :%d\n\n", i, i)
	}
	if out, err := tgitErr(dir, []byte(s.String()), "fast-import", "--quiet"); err != nil {
		t.Fatal(out, err)
	}
	if out, err := tgitErr(dir, nil, "pack-refs", "--all"); err != nil {
		t.Fatal(out, err)
	}
	out, err := tgitErr(dir, nil, "rev-list", "--reverse", "main")
	if err != nil {
		t.Fatal(err)
	}
	return dir, lines(out)
}

// TestPrepareCachedSpeed: on a repository of a few thousand commits, a
// cached call takes well under 10 ms.
func TestPrepareCachedSpeed(t *testing.T) {
	requireGit(t)
	small, a, _ := simpleRepo(t)
	start := time.Now()
	if _, _, err := Prepare(context.Background(), small, a, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	t.Logf("cold build, 2-commit repository: %v", time.Since(start))

	src, commits := bigRepo(t, 3000)
	cache := t.TempDir()
	start = time.Now()
	if _, _, err := Prepare(context.Background(), src, "v1500", cache); err != nil {
		t.Fatal(err)
	}
	t.Logf("cold build, 3000-commit repository: %v", time.Since(start))

	for _, base := range []string{"v1500", commits[1499], commits[1499][:10]} {
		times := make([]time.Duration, 101)
		for i := range times {
			start := time.Now()
			_, c, err := Prepare(context.Background(), src, base, cache)
			times[i] = time.Since(start)
			if err != nil || c != commits[1499] {
				t.Fatalf("Prepare(%q) = %s, %v", base, c, err)
			}
		}
		slices.Sort(times)
		t.Logf("cached call, base %q: median %v, max %v", base, times[50], times[100])
		if times[50] > 10*time.Millisecond {
			t.Errorf("cached call, base %q: median %v, want well under 10ms", base, times[50])
		}
	}
}

func BenchmarkPrepareCached(b *testing.B) {
	if testGitBin == "" {
		b.Skip("needs git in PATH")
	}
	src, commits := bigRepo(b, 3000)
	cache := b.TempDir()
	base := commits[1499]
	if _, _, err := Prepare(context.Background(), src, base, cache); err != nil {
		b.Fatal(err)
	}
	for _, form := range []string{"v1500", base, base[:10]} {
		b.Run(form, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := Prepare(context.Background(), src, form, cache); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPrepareCacheInsideSource: Prepare never writes into src, so a cache
// directory inside it (directly or through a symbolic link) is refused.
func TestPrepareCacheInsideSource(t *testing.T) {
	requireGit(t)
	src, a, _ := simpleRepo(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(src, link); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, src)
	for _, cache := range []string{filepath.Join(src, "cache"), filepath.Join(src, ".git", "x"), src, filepath.Join(link, "cache")} {
		if _, _, err := Prepare(context.Background(), src, a, cache); err == nil || !strings.Contains(err.Error(), "inside the source repository") {
			t.Errorf("cache %s: err = %v", cache, err)
		}
	}
	if d := diffSnapshots(before, snapshot(t, src)); len(d) > 0 {
		t.Errorf("src changed:\n%s", strings.Join(d, "\n"))
	}
}

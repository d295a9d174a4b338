package gitbase

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrepareSourceLayouts: the source may be a bare repository, a linked
// worktree, a repository whose .git is a gitfile, one borrowing objects
// through alternates, one at a path holding the alternates separator, a
// shallow clone or a SHA-256 repository. Each must give the right copy,
// complete on its own, and the cache must answer without git.
func TestPrepareSourceLayouts(t *testing.T) {
	requireGit(t)
	type layout struct {
		src, base, want string
		shallow         bool
	}
	layouts := map[string]func(t *testing.T) layout{
		"bare": func(t *testing.T) layout {
			src, a, _ := simpleRepo(t)
			bare := filepath.Join(t.TempDir(), "bare.git")
			tgit(t, src, "clone", "-q", "--bare", src, bare)
			return layout{src: bare, base: "v1.0", want: a}
		},
		"linked worktree HEAD": func(t *testing.T) layout {
			src, a, _ := simpleRepo(t)
			wt := filepath.Join(t.TempDir(), "wt")
			tgit(t, src, "worktree", "add", "-q", "-b", "side", wt, a)
			return layout{src: wt, base: "HEAD", want: a}
		},
		"linked worktree branch": func(t *testing.T) layout {
			src, _, b := simpleRepo(t)
			wt := filepath.Join(t.TempDir(), "wt")
			tgit(t, src, "worktree", "add", "-q", "--detach", wt, "v1")
			return layout{src: wt, base: "main", want: b}
		},
		"gitfile": func(t *testing.T) layout {
			src, a, _ := simpleRepo(t)
			moved := filepath.Join(t.TempDir(), "moved.git")
			if err := os.Rename(filepath.Join(src, ".git"), moved); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(src, ".git"), "gitdir: "+moved+"\n", 0o644)
			return layout{src: src, base: "v1", want: a}
		},
		"alternates": func(t *testing.T) layout {
			src, a, _ := simpleRepo(t)
			shared := filepath.Join(t.TempDir(), "shared")
			tgit(t, src, "clone", "-q", "--shared", src, shared)
			writeFile(t, filepath.Join(shared, "g.txt"), "own\n", 0o644)
			commitAll(t, shared, "own commit")
			return layout{src: shared, base: a, want: a} // a's objects are all in src
		},
		"colon in path": func(t *testing.T) layout {
			src, a, _ := simpleRepo(t)
			odd := filepath.Join(t.TempDir(), `odd:"dir`, "src")
			if err := os.MkdirAll(filepath.Dir(odd), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(src, odd); err != nil {
				t.Fatal(err)
			}
			return layout{src: odd, base: a[:12], want: a}
		},
		"shallow": func(t *testing.T) layout {
			src, _, b := simpleRepo(t)
			writeFile(t, filepath.Join(src, "f.txt"), "three\n", 0o644)
			commitAll(t, src, "C")
			shallow := filepath.Join(t.TempDir(), "shallow")
			tgit(t, src, "clone", "-q", "--depth", "2", "file://"+src, shallow)
			return layout{src: shallow, base: "HEAD~1", want: b, shallow: true}
		},
		"sha256": func(t *testing.T) layout {
			src := t.TempDir()
			tgit(t, src, "init", "-q", "--object-format=sha256")
			writeFile(t, filepath.Join(src, "f.txt"), "one\n", 0o644)
			a := commitAll(t, src, "A")
			tgit(t, src, "tag", "-a", "-m", "t", "v1.0")
			writeFile(t, filepath.Join(src, "f.txt"), "two\n", 0o644)
			commitAll(t, src, "B")
			tgit(t, src, "gc", "-q")
			return layout{src: src, base: "v1.0", want: a}
		},
	}
	for name, mk := range layouts {
		t.Run(name, func(t *testing.T) {
			l := mk(t)
			before := snapshot(t, l.src)
			cache := t.TempDir()
			dir, commit, err := Prepare(context.Background(), l.src, l.base, cache)
			if err != nil {
				t.Fatal(err)
			}
			if commit != l.want {
				t.Fatalf("commit = %s, want %s", commit, l.want)
			}
			if got := tgit(t, dir, "rev-parse", "HEAD"); got != l.want {
				t.Errorf("copy's HEAD = %s, want %s", got, l.want)
			}
			if _, err := os.Stat(filepath.Join(dir, ".git", "objects", "info", "alternates")); err == nil {
				t.Error("the copy borrows objects through alternates")
			}
			tgit(t, dir, "fsck", "--full", "--strict", "--no-dangling")
			if st := tgit(t, dir, "status", "--porcelain"); st != "" {
				t.Errorf("git status: %s", st)
			}
			if want := setOf(lines(tgit(t, l.src, "rev-list", "--objects", l.want))); len(want) == 0 {
				t.Fatal("setup: no objects")
			} else {
				got := map[string]bool{}
				for _, line := range lines(tgit(t, dir, "cat-file", "--batch-all-objects", "--batch-check")) {
					got[strings.Fields(line)[0]] = true
				}
				wantIDs := map[string]bool{}
				for k := range want {
					wantIDs[strings.Fields(k)[0]] = true
				}
				if !sameSet(got, wantIDs) {
					t.Errorf("copy holds %d objects, want the %d reachable from base", len(got), len(wantIDs))
				}
			}
			_, err = os.Stat(filepath.Join(dir, ".git", "shallow"))
			if (err == nil) != l.shallow {
				t.Errorf(".git/shallow exists: %v, want %v", err == nil, l.shallow)
			}
			if d := diffSnapshots(before, snapshot(t, l.src)); len(d) > 0 {
				t.Errorf("src changed:\n%s", strings.Join(d, "\n"))
			}

			t.Setenv("PATH", t.TempDir())
			if d, c, err := Prepare(context.Background(), l.src, commit, cache); err != nil || d != dir || c != commit {
				t.Errorf("cached Prepare with no git = %s, %s, %v", d, c, err)
			}
		})
	}
}

// TestPrepareShallowCutsElsewhere: a shallow source cut on another line of
// history gives a copy whose shallow file names only its own commits.
func TestPrepareShallowCutsElsewhere(t *testing.T) {
	requireGit(t)
	src, a, b := simpleRepo(t)
	tgit(t, src, "switch", "-q", "-c", "other", a)
	writeFile(t, filepath.Join(src, "other.txt"), "other\n", 0o644)
	other := commitAll(t, src, "other")
	tgit(t, src, "switch", "-q", "main")
	shallow := filepath.Join(t.TempDir(), "shallow")
	tgit(t, src, "clone", "-q", "--depth", "1", "--no-single-branch", "file://"+src, shallow)
	if s, _ := os.ReadFile(filepath.Join(shallow, ".git", "shallow")); !strings.Contains(string(s), other) {
		t.Fatalf("setup: shallow file %q does not name %s", s, other)
	}
	dir, _, err := Prepare(context.Background(), shallow, "main", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s, _ := os.ReadFile(filepath.Join(dir, ".git", "shallow"))
	if string(s) != b+"\n" {
		t.Errorf("copy's shallow file = %q, want %s only", s, b)
	}
	h := &hostile{forbidden: map[string]string{"other line's commit": other}}
	grepTree(t, dir, h)
}

// TestFindObjectMatchesGit: the pure-Go object lookup agrees with git on
// every object, in full and abbreviated, loose and packed.
func TestFindObjectMatchesGit(t *testing.T) {
	requireGit(t)
	src, _, _ := simpleRepo(t)
	tgit(t, src, "gc", "-q")
	writeFile(t, filepath.Join(src, "loose.txt"), "loose\n", 0o644)
	commitAll(t, src, "loose")
	p1, p2 := collidingBlobs(t, src)
	r, err := openSrc(src)
	if err != nil {
		t.Fatal(err)
	}
	all := lines(tgit(t, src, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"))
	if len(all) < 8 {
		t.Fatalf("setup: %d objects", len(all))
	}
	for _, id := range all {
		for _, n := range []int{40, 12, 7, 4} {
			got, ok := r.findObject(id[:n])
			_, gitErr := tgitErr(src, nil, "rev-parse", "--verify", "--quiet", id[:n])
			if ok && got != id {
				t.Errorf("findObject(%s) = %s, want %s", id[:n], got, id)
			}
			if ok && gitErr != nil {
				t.Errorf("findObject(%s) found %s, git finds it ambiguous", id[:n], got)
			}
			if n >= 7 && !ok && gitErr == nil {
				t.Errorf("findObject(%s) found nothing", id[:n])
			}
		}
	}
	if _, ok := r.findObject(p1[:4]); ok {
		t.Errorf("findObject(%s) took one of %s, %s", p1[:4], p1, p2)
	}
	if _, ok := r.findObject(strings.Repeat("0", 40)); ok {
		t.Error("found the null id")
	}

	// A version-1 pack index is not read: the answer is "unsure", and
	// Prepare asks git instead.
	tgit(t, src, "-c", "pack.indexVersion=1", "repack", "-a", "-d", "-q")
	if _, ok := r.findObject(all[0]); ok {
		t.Error("findObject read a version-1 pack index")
	}
	if _, c, err := Prepare(context.Background(), src, "v1", t.TempDir()); err != nil || c == "" {
		t.Errorf("Prepare with a v1 index: %v", err)
	}
}

func TestValidRefName(t *testing.T) {
	requireGit(t)
	for _, name := range []string{
		"HEAD", "main", "refs/heads/main", "v1.0", "feature/x", "a@b", "refs/tags/v1.0-rc1",
		"", "@", "..", ".", "../x", "refs/../x", "refs/./x", "/abs", "a//b", "a/", "a.", ".hidden", "a/.b",
		"a.lock", "a/b.lock/c", "a..b", "a@{1}", "a b", "a~1", "a^", "a:b", "a?", "a*", "a[", `a\b`, "a\x01",
		"-x", "refs/heads/-x",
	} {
		_, err := tgitErr(t.TempDir(), nil, "check-ref-format", "--allow-onelevel", name)
		if validRefName(name) && err != nil {
			t.Errorf("validRefName(%q) = true; git check-ref-format rejects it", name)
		}
		if validRefName(name) && (strings.Contains(name, "..") || strings.HasPrefix(name, "/") || strings.Contains(name, "/.")) {
			t.Errorf("validRefName(%q) = true: escapes the git dir", name)
		}
	}
}

func TestSplitRev(t *testing.T) {
	for _, tt := range []struct{ in, name, rest string }{
		{"main", "main", ""},
		{"main~2", "main", "~2"},
		{"v1^{commit}", "v1", "^{commit}"},
		{"HEAD@{1}", "HEAD", "@{1}"},
		{"a@b~1", "a@b", "~1"},
		{":/msg", "", ":/msg"},
		{"@{-1}", "", "@{-1}"},
		{"main:path", "main", ":path"},
	} {
		if n, r := splitRev(tt.in); n != tt.name || r != tt.rest {
			t.Errorf("splitRev(%q) = %q, %q; want %q, %q", tt.in, n, r, tt.name, tt.rest)
		}
	}
}

func TestReadExtensions(t *testing.T) {
	for _, tt := range []struct{ cfg, format, refs string }{
		{"[core]\n\trepositoryformatversion = 0\n", "", ""},
		{"[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectFormat = sha256\n", "sha256", ""},
		{"[Extensions]\n\tObjectFormat = \"SHA256\" ; comment\n\trefStorage = reftable\n", "sha256", "reftable"},
		{"[extensions] objectformat = sha1\n[core]\n\tobjectformat = sha256\n", "sha1", ""},
		{"[remote \"extensions\"]\n\tobjectformat = sha256\n", "", ""},
	} {
		p := filepath.Join(t.TempDir(), "config")
		writeFile(t, p, tt.cfg, 0o644)
		f, r, err := readExtensions(p)
		if err != nil || f != tt.format || r != tt.refs {
			t.Errorf("readExtensions(%q) = %q, %q, %v; want %q, %q", tt.cfg, f, r, err, tt.format, tt.refs)
		}
	}
}

package testcorpus

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Git repositories of every shape real tools make, each a copy of one
// upstream project whose later history holds the answer to a task. Every
// shape is made by real git commands at test time; adding a shape is one
// entry in GitShapes.
//
// The upstream project (deterministic: fixed names and dates, so its
// commit ids are the same on every machine):
//
//	v1.0   slug.py (a naive slugify), README.md, tests/test_basic.py: the base
//	v1.1   slug.py with the fix, marked GitMarker in its source; main points here
//	side   a branch off v1.1 holding GitMarker in side.txt
//	       a stash, a note and an annotated tag message holding GitMarker
//
// GitMarker exists only in history later than v1.0 (and in objects not
// reachable from it): a sanitized copy at v1.0 must hold no trace of it.

// GitMarker is the string only later history holds.
const GitMarker = "THE-FIX"

// GitBase is the base every shape is given at, as a task writes it.
const GitBase = "v1.0"

// BaseSlug is slug.py at GitBase; FixedSlug is it after the fix.
const (
	BaseSlug = `"""URL slugs."""


def slugify(text):
    """Return a URL slug for text."""
    return text.lower().replace(" ", "-")
`
	FixedSlug = `"""URL slugs."""

import re


def slugify(text):
    """Return a URL slug for text."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")  # ` + GitMarker + `
`
)

// GitShape is one way a source repository can look on disk.
type GitShape struct {
	Name string
	// Make builds the shape's repository at dst (which does not exist yet)
	// from the upstream project at up; helper repositories it needs (an
	// alternates target, a main repository of a linked worktree) go in
	// t.TempDir(). The repository to give as the workspace is dst itself.
	Make func(t testing.TB, up *Upstream, dst string) Repo
	// Refused is the reason the shape must be refused, "" when a copy must
	// be made: "missing" (objects of the base's history are not in it),
	// "submodule" (a submodule the base records is not there).
	Refused string
	// Submodule is set when the shape has a submodule at "lib" (whose own
	// later history holds GitMarker too).
	Submodule bool
}

// Repo is what a shape's repository holds: the commit GitBase names, and
// the objects later than it that a copy must not hold.
type Repo struct {
	Base  string
	Later map[string]string // what → object id (commits, blobs, tags)
	// Objects, when set, are the ids reachable from Base, for a shape this
	// machine's git cannot open (a reftable repository and git 2.39);
	// otherwise git in the repository says.
	Objects []string
}

// Upstream is the upstream project, made once per test by NewUpstream.
type Upstream struct {
	Dir   string // a plain repository: main at v1.1, a stash, a side branch…
	Base  string // the commit v1.0 names
	Later map[string]string
	// SubDir is the upstream of the submodule "lib", of the same layout;
	// SuperDir a superproject whose v1.0 records lib at lib's v1.0 and
	// whose later commit moves it to lib's fix.
	SubDir, SuperDir string
	SuperBase        string
	SuperLater       map[string]string // the superproject's and lib's later objects
}

// repo is the Repo of a shape copied from Dir.
func (up *Upstream) repo() Repo { return Repo{Base: up.Base, Later: up.Later} }

// Git runs git in dir with a hermetic environment (no system or user
// configuration, fixed identities and dates) and returns its trimmed
// output.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := GitErr(dir, args...)
	if err != nil {
		t.Fatalf("git %s (in %s): %v", strings.Join(args, " "), dir, err)
	}
	return out
}

// GitErr is Git returning the error.
func GitErr(dir string, args ...string) (string, error) { return GitInput(dir, "", args...) }

// GitInput is GitErr with stdin.
func GitInput(dir, stdin string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always",
		"-c", "advice.detachedHead=false", "-c", "gc.auto=0", "-c", "maintenance.auto=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent/proctor-testcorpus-home", "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Upstream", "GIT_AUTHOR_EMAIL=upstream@example.invalid",
		"GIT_COMMITTER_NAME=Upstream", "GIT_COMMITTER_EMAIL=upstream@example.invalid",
		"GIT_AUTHOR_DATE=2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2024-01-01T00:00:00Z",
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func commit(t testing.TB, dir, msg string) string {
	t.Helper()
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "-q", "--allow-empty", "-m", msg)
	return Git(t, dir, "rev-parse", "HEAD")
}

// project makes the slug project at dir and records its later objects.
func project(t testing.TB, dir, prefix string, later map[string]string, variant string, initArgs ...string) (base string) {
	t.Helper()
	Git(t, dir, append([]string{"init", "-q"}, initArgs...)...)
	// A server of partial clones, as hosting services are.
	Git(t, dir, "config", "uploadpack.allowFilter", "true")
	Git(t, dir, "config", "uploadpack.allowAnySHA1InWant", "true")
	writeFile(t, filepath.Join(dir, "slug.py"), BaseSlug)
	writeFile(t, filepath.Join(dir, "README.md"), "Slugs.\n")
	commit(t, dir, "slugify: first version")
	// README.md changes: its first blob is only in the base's history,
	// not in the base's tree (what a blobless clone of the base lacks).
	writeFile(t, filepath.Join(dir, "README.md"), "Slugs for titles.\n"+variant)
	writeFile(t, filepath.Join(dir, "tests", "test_basic.py"), "import unittest\n\nfrom slug import slugify\n\n\nclass Basic(unittest.TestCase):\n    def test_lower(self):\n        self.assertEqual(slugify(\"abc\"), \"abc\")\n")
	base = commit(t, dir, "tests: basic")
	Git(t, dir, "tag", "-a", "-m", "release 1.0", GitBase)
	// A commit dropped by --amend: unreachable, but in the reflog.
	writeFile(t, filepath.Join(dir, "slug.py"), FixedSlug+"# draft\n")
	later[prefix+"amended commit"] = commit(t, dir, "wip")
	writeFile(t, filepath.Join(dir, "slug.py"), FixedSlug)
	Git(t, dir, "commit", "-q", "--amend", "-a", "-m", "slugify: collapse punctuation (the fix)")
	later[prefix+"fix commit"] = Git(t, dir, "rev-parse", "HEAD")
	later[prefix+"fix blob"] = Git(t, dir, "rev-parse", "HEAD:slug.py")
	Git(t, dir, "tag", "-a", "-m", "release 1.1: "+GitMarker, "v1.1")
	later[prefix+"tag object"] = Git(t, dir, "rev-parse", "v1.1")
	Git(t, dir, "switch", "-q", "-c", "side")
	writeFile(t, filepath.Join(dir, "side.txt"), GitMarker+" on a side branch\n")
	later[prefix+"side commit"] = commit(t, dir, "side work")
	Git(t, dir, "switch", "-q", "main")
	Git(t, dir, "notes", "add", "-m", "note: "+GitMarker, "HEAD")
	writeFile(t, filepath.Join(dir, "README.md"), "Slugs for titles.\nstashed "+GitMarker+"\n")
	Git(t, dir, "stash", "push", "-q", "-m", "stashed")
	later[prefix+"stash commit"] = Git(t, dir, "rev-parse", "refs/stash")
	return base
}

// NewUpstream makes the upstream project and its submodule's in
// t.TempDir().
func NewUpstream(t testing.TB) *Upstream { return NewUpstreamVariant(t, "") }

// NewUpstreamVariant is NewUpstream for a project whose commits differ
// from NewUpstream's (its README names the variant): a shape that must be
// refused is given one, so that a copy cached from another shape's
// complete source cannot answer for it (copies are cached by commit).
func NewUpstreamVariant(t testing.TB, variant string) *Upstream {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("needs git in PATH (Debian package git): %v", err)
	}
	root := t.TempDir()
	up := &Upstream{Dir: filepath.Join(root, "up"), SubDir: filepath.Join(root, "lib"), SuperDir: filepath.Join(root, "super"),
		Later: map[string]string{}, SuperLater: map[string]string{}}
	for _, d := range []string{up.Dir, up.SubDir, up.SuperDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	up.Base = project(t, up.Dir, "", up.Later, variant)
	project(t, up.SubDir, "lib ", up.SuperLater, variant)

	// The superproject: lib at its v1.0 in the base, at its fix later.
	s := up.SuperDir
	Git(t, s, "init", "-q")
	Git(t, s, "config", "uploadpack.allowFilter", "true")
	writeFile(t, filepath.Join(s, "slug.py"), BaseSlug)
	writeFile(t, filepath.Join(s, "tests", "test_basic.py"), variant)
	Git(t, s, "submodule", "--quiet", "add", "file://"+up.SubDir, "lib")
	Git(t, filepath.Join(s, "lib"), "checkout", "-q", GitBase)
	up.SuperBase = commit(t, s, "with lib 1.0")
	Git(t, s, "tag", "-a", "-m", "release 1.0", GitBase)
	Git(t, filepath.Join(s, "lib"), "checkout", "-q", "main")
	writeFile(t, filepath.Join(s, "slug.py"), FixedSlug)
	up.SuperLater["super fix commit"] = commit(t, s, "the fix, and lib's")
	up.SuperLater["super fix blob"] = Git(t, s, "rev-parse", "HEAD:slug.py")
	return up
}

// clone runs git clone with args from the upstream's file:// URL into dst.
func (up *Upstream) clone(t testing.TB, dst string, args ...string) {
	t.Helper()
	a := append([]string{"clone", "-q", "--no-local"}, args...)
	Git(t, filepath.Dir(dst), append(a, "file://"+up.Dir, dst)...)
}

// PartialClone makes at dst a partial clone of the repository at src
// (filter "blob:none" or "tree:0"), through a file:// remote as a hosting
// service serves one, and fetches on demand, as git does, every object
// reachable from base that the filter left out: the clone's promisor packs
// then hold objects of later history too.
func PartialClone(t testing.TB, src, dst, filter, base string) {
	t.Helper()
	Git(t, src, "config", "uploadpack.allowFilter", "true")
	Git(t, src, "config", "uploadpack.allowAnySHA1InWant", "true")
	Git(t, filepath.Dir(dst), "clone", "-q", "--no-local", "--filter="+filter, "file://"+src, dst)
	Git(t, dst, "checkout", "-q", base)
	fetchHistoryOf(t, dst, base)
}

// fetchHistory fetches, in a partial clone, every object reachable from
// the base that the filter left out, the way git fetches them on demand
// (a lazy fetch each time a missing object is read, each a promisor pack),
// until nothing reachable is missing.
func fetchHistory(t testing.TB, dir string) { t.Helper(); fetchHistoryOf(t, dir, GitBase) }

func fetchHistoryOf(t testing.TB, dir, base string) {
	t.Helper()
	for round := 0; ; round++ {
		out := Git(t, dir, "rev-list", "--objects", "--missing=print", base)
		var missing []string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "?") {
				missing = append(missing, l[1:])
			}
		}
		switch {
		case len(missing) == 0 && round == 0:
			t.Fatalf("setup: the partial clone at %s lacks nothing", dir)
		case len(missing) == 0:
			return
		case round > 10:
			t.Fatalf("setup: %s still lacks %d objects", dir, len(missing))
		}
		if out, err := GitInput(dir, strings.Join(missing, "\n")+"\n", "cat-file", "--batch-check"); err != nil || strings.Contains(out, "missing") {
			t.Fatalf("setup: fetching the history on demand: %v: %s", err, out)
		}
	}
}

// GitShapes are the shapes of source repository a task's workspace may
// have. Each Make gives a repository whose base (GitBase) is the upstream's.
func GitShapes() []GitShape {
	return []GitShape{
		{Name: "plain", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			// The upstream itself, with its stash, reflog, notes and side
			// branch, as a developer's checkout has them.
			copyDir(t, up.Dir, dst)
			return up.repo()
		}},
		{Name: "full clone", Make: func(t testing.TB, up *Upstream, dst string) Repo { up.clone(t, dst); return up.repo() }},
		{Name: "blobless, history fetched on demand", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			up.clone(t, dst, "--filter=blob:none")
			fetchHistory(t, dst)
			return up.repo()
		}},
		{Name: "blobless, refetched whole", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			up.clone(t, dst, "--filter=blob:none")
			Git(t, dst, "fetch", "-q", "--refetch", "--no-filter", "origin")
			return up.repo()
		}},
		{Name: "blobless, base checked out", Refused: "missing", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			up.clone(t, dst, "--filter=blob:none")
			Git(t, dst, "checkout", "-q", GitBase)
			return up.repo()
		}},
		{Name: "treeless, history fetched on demand", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			up.clone(t, dst, "--filter=tree:0")
			Git(t, dst, "checkout", "-q", GitBase)
			fetchHistory(t, dst)
			return up.repo()
		}},
		{Name: "treeless", Refused: "missing", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			up.clone(t, dst, "--filter=tree:0")
			return up.repo()
		}},
		{Name: "shallow", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			up.clone(t, dst, "--depth=2", "--no-single-branch")
			return up.repo()
		}},
		{Name: "shared (alternates)", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			Git(t, filepath.Dir(dst), "clone", "-q", "--shared", up.Dir, dst)
			return up.repo()
		}},
		{Name: "reference (alternates and own pack)", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			ref := filepath.Join(t.TempDir(), "ref")
			Git(t, filepath.Dir(ref), "clone", "-q", "--bare", up.Dir, ref)
			Git(t, filepath.Dir(dst), "clone", "-q", "--reference", ref, "file://"+up.Dir, dst)
			return up.repo()
		}},
		{Name: "cruft pack", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			copyDir(t, up.Dir, dst)
			Git(t, dst, "reflog", "expire", "--all", "--expire=now", "--expire-unreachable=now")
			Git(t, dst, "gc", "-q", "--cruft", "--prune=never")
			requireFiles(t, dst, ".mtimes")
			return up.repo()
		}},
		{Name: "kept packs", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			up.clone(t, dst)
			Git(t, dst, "repack", "-a", "-d", "-q")
			packs, _ := filepath.Glob(filepath.Join(dst, ".git", "objects", "pack", "pack-*.pack"))
			for _, p := range packs {
				writeFile(t, strings.TrimSuffix(p, ".pack")+".keep", "kept\n")
			}
			requireFiles(t, dst, ".keep")
			return up.repo()
		}},
		{Name: "multi-pack-index, bitmaps, commit-graph", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			copyDir(t, up.Dir, dst)
			Git(t, dst, "repack", "-a", "-d", "-q", "-b", "--write-midx")
			Git(t, dst, "commit-graph", "write", "--reachable", "--changed-paths")
			requireFiles(t, dst, "multi-pack-index", ".bitmap", "commit-graph")
			return up.repo()
		}},
		{Name: "packed refs", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			copyDir(t, up.Dir, dst)
			Git(t, dst, "pack-refs", "--all", "--prune")
			requireFiles(t, dst, "packed-refs")
			return up.repo()
		}},
		{Name: "mirror's refs in a working clone", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			up.clone(t, dst)
			Git(t, dst, "fetch", "-q", "origin", "+refs/*:refs/remotes/mirror/*")
			return up.repo()
		}},
		{Name: "linked worktree", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			main := filepath.Join(t.TempDir(), "main")
			up.clone(t, main)
			Git(t, main, "worktree", "add", "-q", "--detach", dst, GitBase)
			return up.repo()
		}},
		{Name: "separate git dir", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			gd := filepath.Join(t.TempDir(), "git-dir")
			Git(t, filepath.Dir(dst), "clone", "-q", "--separate-git-dir="+gd, "file://"+up.Dir, dst)
			return up.repo()
		}},
		{Name: "replace ref", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			up.clone(t, dst)
			Git(t, dst, "replace", GitBase+"^{commit}", "origin/main")
			return up.repo()
		}},
		{Name: "reftable (git 2.47)", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			reftableClone(t, up.Dir, dst)
			r := up.repo()
			r.Objects = strings.Split(Git(t, up.Dir, "rev-list", "--objects", "--no-object-names", up.Base), "\n")
			return r
		}},
		{Name: "sha256", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			if err := os.Mkdir(dst, 0o755); err != nil {
				t.Fatal(err)
			}
			r := Repo{Later: map[string]string{}}
			r.Base = project(t, dst, "", r.Later, "", "--object-format=sha256")
			Git(t, dst, "gc", "-q")
			return r
		}},
		{Name: "submodule", Submodule: true, Make: func(t testing.TB, up *Upstream, dst string) Repo {
			Git(t, filepath.Dir(dst), "clone", "-q", "--recurse-submodules", "file://"+up.SuperDir, dst)
			// As a developer leaves it: lib checked out at its fix.
			Git(t, filepath.Join(dst, "lib"), "checkout", "-q", "main")
			return Repo{Base: up.SuperBase, Later: up.SuperLater}
		}},
		{Name: "submodule, not initialised", Submodule: true, Refused: "submodule", Make: func(t testing.TB, up *Upstream, dst string) Repo {
			Git(t, filepath.Dir(dst), "clone", "-q", "file://"+up.SuperDir, dst)
			return Repo{Base: up.SuperBase, Later: up.SuperLater}
		}},
	}
}

// requireFiles fails the setup unless the repository at dir holds a file
// whose name ends in each suffix: the shape is what it says.
func requireFiles(t testing.TB, dir string, suffixes ...string) {
	t.Helper()
	for _, s := range suffixes {
		found := false
		filepath.WalkDir(filepath.Join(dir, ".git"), func(p string, d os.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, s) {
				found = true
			}
			return nil
		})
		if !found {
			t.Fatalf("setup: %s has no %s: the shape is not what it claims", dir, s)
		}
	}
}

// copyDir copies a repository with cp -a, as a user moving it would.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if b, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s %s: %v: %s", src, dst, err, b)
	}
}

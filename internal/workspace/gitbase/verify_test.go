package gitbase

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPostConditionRefusesLeaks: whatever the build did, a copy that holds
// one object more than base reaches, or any file in .git that could name or
// hold another, is refused and never published; nothing of it stays in the
// cache, and the next build (without the fault) succeeds. Each fault is
// injected just before the check, as a git that misbehaved would leave it:
// removing the check makes every case fail.
func TestPostConditionRefusesLeaks(t *testing.T) {
	requireGit(t)
	h := hostileRepo(t)
	later := h.forbidden["later commit"]
	objects := filepath.Join(h.src, ".git", "objects")
	faults := map[string]func(t *testing.T, repo string){
		"a loose object base does not reach": func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, "extra.txt"), "not in base\n", 0o644)
			tgit(t, repo, "hash-object", "-w", "extra.txt")
			os.Remove(filepath.Join(repo, "extra.txt"))
		},
		"a later commit's pack": func(t *testing.T, repo string) {
			tgitIn(t, repo, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+objects, "pack-objects", "-q", "--revs", ".git/objects/pack/pack", later+"\n")
		},
		"a .promisor file": func(t *testing.T, repo string) { touchPackSibling(t, repo, ".promisor") },
		"a .keep file":     func(t *testing.T, repo string) { touchPackSibling(t, repo, ".keep") },
		"a .bitmap file":   func(t *testing.T, repo string) { touchPackSibling(t, repo, ".bitmap") },
		"an alternates file": func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, ".git", "objects", "info", "alternates"), objects+"\n", 0o644)
		},
		"a commit-graph": func(t *testing.T, repo string) {
			tgit(t, repo, "commit-graph", "write", "--reachable")
		},
		"a multi-pack-index": func(t *testing.T, repo string) {
			tgit(t, repo, "multi-pack-index", "write")
		},
		"a second ref": func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, ".git", "refs", "tags", "later"), later+"\n", 0o644)
		},
		"packed-refs": func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, ".git", "packed-refs"), later+" refs/tags/v2.0\n", 0o644)
		},
		"a remote in config": func(t *testing.T, repo string) {
			tgit(t, repo, "config", "remote.origin.url", "https://example.invalid/fixed")
		},
		"a shallow file naming a commit not in the copy": func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, ".git", "shallow"), later+"\n", 0o644)
		},
		"a symlink in objects": func(t *testing.T, repo string) {
			if err := os.Symlink(objects, filepath.Join(repo, ".git", "objects", "src")); err != nil {
				t.Fatal(err)
			}
		},
		"a missing object": func(t *testing.T, repo string) {
			packs, _ := filepath.Glob(filepath.Join(repo, ".git", "objects", "pack", "pack-*"))
			for _, p := range packs {
				os.Remove(p)
			}
			writeFile(t, filepath.Join(repo, "f"), "x\n", 0o644)
			tgit(t, repo, "hash-object", "-w", "f") // something, not everything
			os.Remove(filepath.Join(repo, "f"))
		},
	}
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			cache := t.TempDir()
			testHookBeforeVerify = func(repo string) { fault(t, repo) }
			_, _, err := Prepare(context.Background(), h.src, h.base, cache)
			testHookBeforeVerify = nil
			var le *LeakError
			if !errors.As(err, &le) || !errors.Is(err, ErrLeak) {
				t.Fatalf("Prepare = %v, want a *LeakError", err)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "discarded") {
				t.Errorf("message %q", msg)
			}
			ents, _ := os.ReadDir(cache)
			for _, e := range ents {
				if e.Name() != locksDir {
					t.Errorf("left in the cache: %s", e.Name())
				}
			}
			dir, _, err := Prepare(context.Background(), h.src, h.base, cache)
			if err != nil {
				t.Fatalf("the build without the fault: %v", err)
			}
			checkCopy(t, h, dir)
		})
	}
}

// TestPrepareIgnoresOldCacheEntries: a copy in the cache from before the
// post-condition existed (an older marker), however complete it looks, is
// never served: it is rebuilt and checked.
func TestPrepareIgnoresOldCacheEntries(t *testing.T) {
	requireGit(t)
	h := hostileRepo(t)
	cache := t.TempDir()
	dir, _, err := Prepare(context.Background(), h.src, h.base, cache)
	if err != nil {
		t.Fatal(err)
	}
	// Make it what an old build left: every object of src in a promisor
	// pack beside base's, and the old marker.
	later := h.forbidden["later commit"]
	tgitIn(t, dir, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+filepath.Join(h.src, ".git", "objects"), "pack-objects", "-q", "--revs", ".git/objects/pack/pack", later+"\n")
	touchPackSibling(t, dir, ".promisor")
	entry := filepath.Dir(dir)
	writeFile(t, filepath.Join(entry, markerName), "proctor-gitbase-cache 1\ncommit "+h.base+"\n", 0o644)

	again, _, err := Prepare(context.Background(), h.src, h.base, cache)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tgitErr(again, nil, "cat-file", "-t", later); err == nil {
		t.Fatalf("the old entry was served: the later commit is there (%s)", out)
	}
	checkCopy(t, h, again)
}

// touchPackSibling adds a file with ext beside the copy's first pack.
func touchPackSibling(t *testing.T, repo, ext string) {
	t.Helper()
	packs, _ := filepath.Glob(filepath.Join(repo, ".git", "objects", "pack", "pack-*.pack"))
	if len(packs) == 0 {
		t.Fatal("no pack")
	}
	writeFile(t, strings.TrimSuffix(packs[0], ".pack")+ext, "", 0o644)
}

// tgitIn runs git in repo with one more environment entry and stdin.
func tgitIn(t *testing.T, repo, env string, args ...string) {
	t.Helper()
	stdin := args[len(args)-1]
	args = args[:len(args)-1]
	g := newGit(testGitBin, t.TempDir())
	own := []string{"GIT_DIR=" + filepath.Join(repo, ".git"), "GIT_WORK_TREE=" + repo, env}
	if _, err := g.runInput(context.Background(), repo, own, []byte(stdin), args...); err != nil {
		t.Fatal(err)
	}
}

package gitbase

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/testcorpus"
)

// TestPrepareEveryShape builds the source repository in every shape real
// git makes (internal/testcorpus: full, blobless and treeless partial
// clones, shallow, shared and referenced clones, cruft and kept packs, a
// multi-pack-index with bitmaps and commit-graphs, packed refs, linked
// worktrees, separate git dirs, replace refs, SHA-256, submodules), each
// from an upstream whose later history holds the answer, and plays the
// git-mining agent on every copy: nothing of the later history may be
// found, by any command or in any byte. A shape that lacks the base's
// objects, or a submodule, is refused, naming what is missing.
func TestPrepareEveryShape(t *testing.T) {
	requireGit(t)
	up := testcorpus.NewUpstream(t)
	for _, sh := range testcorpus.GitShapes() {
		t.Run(sh.Name, func(t *testing.T) {
			src := filepath.Join(t.TempDir(), "ws")
			repo := sh.Make(t, up, src)
			var want map[string]bool
			switch {
			case repo.Objects != nil:
				want = setOf(repo.Objects)
			case sh.Refused == "":
				want = setOf(lines(testcorpus.Git(t, src, "--no-replace-objects", "rev-list", "--objects", "--no-object-names", repo.Base)))
			}
			before := snapshot(t, src)
			dir, commit, err := Prepare(context.Background(), src, testcorpus.GitBase, t.TempDir())
			if d := diffSnapshots(before, snapshot(t, src)); len(d) > 0 {
				t.Errorf("src changed:\n%s", strings.Join(d, "\n"))
			}
			switch sh.Refused {
			case "missing":
				var me *MissingError
				if !errors.As(err, &me) || me.Repo != src || me.Commit != repo.Base || me.Missing == 0 {
					t.Fatalf("Prepare = %v, want a *MissingError for %s at %s", err, src, repo.Base)
				}
				msg := err.Error()
				for _, s := range []string{src, repo.Base, "fetch --refetch --no-filter", "full clone"} {
					if !strings.Contains(msg, s) || strings.Contains(msg, "\n") {
						t.Errorf("message %q does not name %q on one line", msg, s)
					}
				}
				return
			case "submodule":
				var se *SubmoduleError
				if !errors.As(err, &se) || se.Path != "lib" || !strings.Contains(err.Error(), "submodule update --init lib") {
					t.Fatalf("Prepare = %v, want a *SubmoduleError for lib naming the fix", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if commit != repo.Base {
				t.Fatalf("commit %s, want %s", commit, repo.Base)
			}
			mineGit(t, dir, repo.Later)
			if got := setOf(lines(testcorpus.Git(t, dir, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"))); !sameSet(got, want) {
				t.Errorf("the copy holds %d objects, want exactly the %d reachable from the base", len(got), len(want))
			}
			if st := testcorpus.Git(t, dir, "status", "--porcelain", "--ignore-submodules=none"); st != "" {
				t.Errorf("git status in the copy: %s", st)
			}
			if sh.Submodule {
				lib := filepath.Join(dir, "lib")
				rec := strings.Fields(testcorpus.Git(t, dir, "ls-tree", "HEAD", "lib"))
				if got := testcorpus.Git(t, lib, "rev-parse", "HEAD"); len(rec) < 3 || got != rec[2] {
					t.Errorf("lib is at %s, the base records %v", got, rec)
				}
				if fi, err := os.Lstat(filepath.Join(lib, ".git")); err != nil || !fi.IsDir() {
					t.Errorf("lib/.git is not a directory of its own: %v", err)
				}
				if b, err := os.ReadFile(filepath.Join(lib, "slug.py")); err != nil || string(b) != testcorpus.BaseSlug {
					t.Errorf("lib/slug.py is not lib's base: %q (%v)", b, err)
				}
				mineGit(t, lib, repo.Later)
			}
		})
	}
}

// mineGit is the git-mining agent, run in a copy: every view of history,
// every object, every byte; none may show a later object or the marker.
func mineGit(t *testing.T, dir string, later map[string]string) {
	t.Helper()
	for _, args := range [][]string{
		{"log", "--all", "--reflog", "-p", "--format=%H %T %P %s%n%b%N"},
		{"rev-list", "--all", "--reflog", "--objects"},
		{"fsck", "--unreachable", "--lost-found", "--full", "--no-reflogs"},
		{"fsck", "--dangling", "--full"},
		{"cat-file", "--batch-all-objects", "--batch"},
		{"for-each-ref"},
		{"stash", "list"},
		{"notes", "list"},
		{"count-objects", "-v"},
		{"config", "--list", "--show-origin"},
	} {
		out, err := testcorpus.GitErr(dir, args...)
		if strings.Contains(out, testcorpus.GitMarker) {
			t.Errorf("git %s shows %s", strings.Join(args, " "), testcorpus.GitMarker)
		}
		for what, id := range later {
			if strings.Contains(out, id) {
				t.Errorf("git %s shows the %s %s", strings.Join(args, " "), what, id)
			}
		}
		if args[0] == "fsck" && (strings.Contains(out, "unreachable") || strings.Contains(out, "dangling") || err != nil) {
			t.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	for what, id := range later {
		if out, err := testcorpus.GitErr(dir, "cat-file", "-t", id); err == nil {
			t.Errorf("git cat-file -t %s (the %s) = %s: the object is in the copy", id, what, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".git", "lost-found")); err == nil {
		t.Error("fsck --lost-found found something to save")
	}
	// Every byte of every file, .git included: later ids in hex or binary.
	var needles [][]byte
	for _, id := range later {
		raw, _ := hex.DecodeString(id)
		needles = append(needles, []byte(id), raw)
	}
	needles = append(needles, []byte(testcorpus.GitMarker))
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Error(err)
			return nil
		}
		for _, n := range needles {
			if bytes.Contains(b, n) {
				t.Errorf("%s holds %q", p, n)
			}
		}
		return nil
	})
}

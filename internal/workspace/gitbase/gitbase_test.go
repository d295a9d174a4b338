package gitbase

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Strings that exist in the hostile source only outside base's history. None
// may appear anywhere in a prepared copy.
var secrets = []string{
	"FIX-7f3a9c-the-secret-patch",   // the later commit on main: the fix
	"BRANCH-ONLY-c0ffee",            // another branch
	"STASH-ONLY-5eed5eed",           // a stash
	"AMEND-ONLY-d00dd00d",           // a commit dropped by --amend (dangling, in the reflog)
	"NOTES-ONLY-b0a710ad",           // a note on the later commit
	"TAG-MSG-ONLY-7a9e",             // the message of a tag on the later commit
	"DIRTY-ONLY-beefbeef",           // an uncommitted change in src's working tree
	"UNTRACKED-ONLY-feedfeed",       // an untracked file in src
	"https://example.invalid/fixed", // the remote's URL
}

// hostile is a source repository holding the answer in every place the
// documented cheat looks, with traps armed in its config and hooks.
type hostile struct {
	src       string
	base      string               // the commit to prepare
	forbidden map[string]string    // what → object id that must not be in a copy
	want      map[string]treeEntry // base's tree
	objects   map[string]bool      // every object reachable from base
	trapLog   string               // appended to by any trap that runs
}

func hostileRepo(t *testing.T) *hostile {
	t.Helper()
	h := &hostile{src: filepath.Join(t.TempDir(), "src"), forbidden: map[string]string{}}
	src := h.src
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	tgit(t, src, "init", "-q")
	writeFile(t, filepath.Join(src, "README.md"), "hello\n", 0o644)
	writeFile(t, filepath.Join(src, "bin", "run.sh"), "#!/bin/sh\necho run\n", 0o755)
	writeFile(t, filepath.Join(src, "dir", "nested", "data.txt"), "data\n", 0o644)
	writeFile(t, filepath.Join(src, "name with spaces.txt"), "spaces\n", 0o644)
	// A filter driver named for every file: configured in src (below), so
	// a checkout that read src's config would run it.
	writeFile(t, filepath.Join(src, ".gitattributes"), "* filter=evil diff=evil\n", 0o644)
	if err := os.Symlink("README.md", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../README.md", filepath.Join(src, "dir", "uplink")); err != nil {
		t.Fatal(err)
	}
	h.base = commitAll(t, src, "base")
	tgit(t, src, "tag", "-a", "-m", "base release", "v1.0")

	writeFile(t, filepath.Join(src, "README.md"), "hello\n"+secrets[3]+"\n", 0o644)
	h.forbidden["amended commit"] = commitAll(t, src, "work in progress")
	h.forbidden["amended blob"] = tgit(t, src, "rev-parse", "HEAD:README.md")
	writeFile(t, filepath.Join(src, "README.md"), "hello\n"+secrets[0]+"\n", 0o644)
	tgit(t, src, "commit", "-q", "--amend", "-a", "-m", "fix the bug")
	h.forbidden["later commit"] = tgit(t, src, "rev-parse", "HEAD")
	h.forbidden["fix blob"] = tgit(t, src, "rev-parse", "HEAD:README.md")
	tgit(t, src, "tag", "-a", "-m", secrets[5], "v2.0")
	tgit(t, src, "tag", "v2-light")
	h.forbidden["tag object"] = tgit(t, src, "rev-parse", "v2.0")

	tgit(t, src, "switch", "-q", "-c", "feature", h.base)
	writeFile(t, filepath.Join(src, "feature.txt"), secrets[1]+"\n", 0o644)
	h.forbidden["branch commit"] = commitAll(t, src, "feature")
	tgit(t, src, "switch", "-q", "main")

	// Pack what exists so far (objects in a pack, refs in packed-refs); what
	// follows stays loose. (The fixed commit dates are old: keep the reflog.)
	tgit(t, src, "-c", "gc.reflogExpire=never", "-c", "gc.reflogExpireUnreachable=never", "gc", "-q")

	writeFile(t, filepath.Join(src, "README.md"), "hello\n"+secrets[2]+"\n", 0o644)
	tgit(t, src, "stash", "push", "-q", "-m", "stashed")
	h.forbidden["stash commit"] = tgit(t, src, "rev-parse", "refs/stash")
	h.forbidden["stash index commit"] = tgit(t, src, "rev-parse", "refs/stash^2")
	tgit(t, src, "notes", "add", "-m", secrets[4], "main")
	h.forbidden["notes commit"] = tgit(t, src, "rev-parse", "refs/notes/commits")
	tgit(t, src, "remote", "add", "origin", secrets[8])
	tgit(t, src, "update-ref", "refs/remotes/origin/main", "main")
	writeFile(t, filepath.Join(src, "README.md"), "hello\n"+secrets[6]+"\n", 0o644)
	writeFile(t, filepath.Join(src, "untracked.txt"), secrets[7]+"\n", 0o644)

	if tgit(t, src, "reflog", "show", "--format=%H", "main") == "" {
		t.Fatal("setup: src has no reflog")
	}
	h.want = expectedTree(t, src, h.base)
	h.objects = map[string]bool{}
	for _, l := range lines(tgit(t, src, "rev-list", "--objects", h.base)) {
		h.objects[strings.Fields(l)[0]] = true
	}
	for what, id := range h.forbidden {
		if h.objects[id] {
			t.Fatalf("setup: %s %s is reachable from base", what, id)
		}
	}
	h.armTraps(t)
	return h
}

// armTraps installs, after setup, every hook and every config setting that
// makes git run a command, each logging to h.trapLog if it ever runs.
func (h *hostile) armTraps(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	h.trapLog = filepath.Join(dir, "trap-ran")
	trap := filepath.Join(dir, "trap.sh")
	writeFile(t, trap, fmt.Sprintf("#!/bin/sh\necho \"ran: $0 $*\" >> %q\nexec cat\n", h.trapLog), 0o755)
	hooks := filepath.Join(h.src, ".git", "hooks")
	for _, name := range []string{
		"applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
		"prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout", "post-merge",
		"pre-push", "pre-receive", "update", "proc-receive", "post-receive", "post-update",
		"reference-transaction", "push-to-checkout", "pre-auto-gc", "post-rewrite", "post-index-change",
		"fsmonitor-watchman", "sendemail-validate",
	} {
		writeFile(t, filepath.Join(hooks, name), fmt.Sprintf("#!/bin/sh\n%q hook-%s\n", trap, name), 0o755)
	}
	cfg := fmt.Sprintf(`
[core]
	fsmonitor = %[1]s fsmonitor
	hooksPath = %[2]s
	pager = %[1]s pager
	editor = %[1]s editor
	sshCommand = %[1]s ssh
	askPass = %[1]s askpass
	alternateRefsCommand = %[1]s alternateRefs
[filter "evil"]
	clean = %[1]s clean
	smudge = %[1]s smudge
	required = true
[diff "evil"]
	textconv = %[1]s textconv
[alias]
	st = !%[1]s alias
[uploadpack]
	packObjectsHook = %[1]s packObjectsHook
[credential]
	helper = !%[1]s credential
[protocol]
	allow = always
[gpg]
	program = %[1]s gpg
[remote "evil"]
	url = ext::%[1]s ext
	fetch = +refs/heads/*:refs/remotes/evil/*
`, trap, hooks)
	f, err := os.OpenFile(filepath.Join(h.src, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(cfg); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	// The caller's own environment is hostile too: none of it may reach git.
	home := t.TempDir()
	global := fmt.Sprintf("[core]\n\tfsmonitor = %[1]s global-fsmonitor\n\thooksPath = %[2]s\n[filter \"evil\"]\n\tsmudge = %[1]s global-smudge\n\trequired = true\n", trap, hooks)
	writeFile(t, filepath.Join(home, ".gitconfig"), global, 0o644)
	writeFile(t, filepath.Join(home, ".config", "git", "config"), global, 0o644)
	writeFile(t, filepath.Join(home, ".config", "git", "attributes"), "* filter=evil\n", 0o644)
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_CONFIG_SYSTEM", filepath.Join(home, ".gitconfig"))
	t.Setenv("GIT_CONFIG_PARAMETERS", fmt.Sprintf("'core.fsmonitor'='%s params-fsmonitor'", trap))
	t.Setenv("GIT_DIR", filepath.Join(h.src, ".git"))
	t.Setenv("GIT_WORK_TREE", h.src)
	t.Setenv("GIT_INDEX_FILE", filepath.Join(h.src, ".git", "index"))
	t.Setenv("GIT_ALTERNATE_OBJECT_DIRECTORIES", filepath.Join(h.src, ".git", "objects"))
}

// TestPrepareHostileSource is the cheat the package exists to defeat: after
// Prepare, nothing git can show in the copy reaches past base, no byte of
// the copy holds the fix, nothing configured in src ran, and src is as it was.
func TestPrepareHostileSource(t *testing.T) {
	requireGit(t)
	h := hostileRepo(t)
	before := snapshot(t, h.src)

	dir, commit, err := Prepare(context.Background(), h.src, h.base, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if commit != h.base {
		t.Fatalf("commit = %s, want %s", commit, h.base)
	}
	checkCopy(t, h, dir)

	// Every git view of history, the ones the cheat uses.
	for _, args := range [][]string{
		{"log", "--all", "--format=%H %T %P %s%n%b%N"},
		{"log", "--all", "-p", "--format=%H"},
		{"rev-list", "--all", "--objects"},
		{"fsck", "--lost-found", "--unreachable", "--no-reflogs", "--full"},
		{"fsck", "--unreachable", "--dangling", "--full"},
		{"cat-file", "--batch-all-objects", "--batch-check"},
		{"cat-file", "--batch-all-objects", "--batch"},
		{"stash", "list"},
		{"tag", "-l"},
		{"branch", "-a", "-v"},
		{"reflog", "show", "--all"},
		{"remote", "-v"},
		{"notes", "list"},
		{"for-each-ref"},
		{"show-ref"},
		{"count-objects", "-v"},
		{"config", "--list", "--show-origin"},
	} {
		out, err := tgitErr(dir, nil, args...)
		t.Logf("git %s: %d bytes (err %v)", strings.Join(args, " "), len(out), err)
		for what, id := range h.forbidden {
			if strings.Contains(out, id) {
				t.Errorf("git %s shows the %s %s", strings.Join(args, " "), what, id)
			}
		}
		for _, s := range secrets {
			if strings.Contains(out, s) {
				t.Errorf("git %s shows %q", strings.Join(args, " "), s)
			}
		}
		if args[0] == "fsck" && (strings.Contains(out, "unreachable") || strings.Contains(out, "dangling")) {
			t.Errorf("git %s: %s", strings.Join(args, " "), out)
		}
	}
	if got := lines(tgit(t, dir, "branch", "-a", "--format=%(refname)")); len(got) != 1 || got[0] != "refs/heads/main" {
		t.Errorf("branches: %q, want only refs/heads/main", got)
	}
	if got := tgit(t, dir, "tag", "-l"); got != "" {
		t.Errorf("tags: %q", got)
	}
	if got := tgit(t, dir, "stash", "list"); got != "" {
		t.Errorf("stashes: %q", got)
	}
	want := setOf(lines(tgit(t, h.src, "rev-list", h.base)))
	if got := setOf(lines(tgit(t, dir, "rev-list", "--all", "--reflog"))); !sameSet(got, want) {
		t.Errorf("commits in copy: %v\nwant base and its ancestors: %v", got, want)
	}
	objs := map[string]bool{}
	for _, l := range lines(tgit(t, dir, "cat-file", "--batch-all-objects", "--batch-check")) {
		objs[strings.Fields(l)[0]] = true
	}
	if !sameSet(objs, h.objects) {
		t.Errorf("objects in copy: %d, want exactly the %d reachable from base", len(objs), len(h.objects))
	}
	_, err = os.Stat(filepath.Join(dir, ".git", "lost-found"))
	if err == nil {
		t.Error("fsck --lost-found found something to save")
	}

	// Every byte of the copy, .git included; object ids also in binary, as
	// a pack index holds them.
	grepTree(t, dir, h)

	if _, err := os.Stat(h.trapLog); err == nil {
		b, _ := os.ReadFile(h.trapLog)
		t.Errorf("a command configured in src or in the caller's environment ran:\n%s", b)
	}
	if d := diffSnapshots(before, snapshot(t, h.src)); len(d) > 0 {
		t.Errorf("src changed:\n%s", strings.Join(d, "\n"))
	}

	// Control: the traps are live, so the checks above could fail.
	tgitErr(h.src, nil, "status")
	tgitErr(h.src, nil, "commit", "-q", "--allow-empty", "-m", "control")
	tgitErr(h.src, nil, "checkout", "--", "README.md")
	log, _ := os.ReadFile(h.trapLog)
	for _, want := range []string{"fsmonitor", "hook-pre-commit", "hook-post-commit", "smudge", "hook-post-checkout"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("control: trap %q did not run in src; the test proves nothing:\n%s", want, log)
		}
	}
}

// checkCopy checks the shape of a prepared copy of h at h.base.
func checkCopy(t *testing.T, h *hostile, dir string) {
	t.Helper()
	if got := worktree(t, dir); !equalTrees(got, h.want) {
		t.Errorf("working tree:\n got %v\nwant %v", got, h.want)
	}
	gitDir := filepath.Join(dir, ".git")
	if b, _ := os.ReadFile(filepath.Join(gitDir, "HEAD")); string(b) != "ref: refs/heads/main\n" {
		t.Errorf("HEAD = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(gitDir, "refs", "heads", "main")); string(b) != h.base+"\n" {
		t.Errorf("refs/heads/main = %q, want %s", b, h.base)
	}
	ents, err := os.ReadDir(gitDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !map[string]bool{"HEAD": true, "config": true, "index": true, "objects": true, "refs": true}[e.Name()] {
			t.Errorf(".git/%s should not exist", e.Name())
		}
	}
	for _, p := range []string{"logs", "hooks", "info", "packed-refs", "ORIG_HEAD", "FETCH_HEAD", "objects/info/alternates", "refs/stash", "refs/remotes", "refs/notes"} {
		if _, err := os.Lstat(filepath.Join(gitDir, p)); err == nil {
			t.Errorf(".git/%s exists", p)
		}
	}
	var refs []string
	filepath.WalkDir(filepath.Join(gitDir, "refs"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(gitDir, path)
			refs = append(refs, rel)
		}
		return nil
	})
	if len(refs) != 1 || refs[0] != "refs/heads/main" {
		t.Errorf("ref files: %q", refs)
	}
	cfg := tgit(t, dir, "config", "--file", filepath.Join(gitDir, "config"), "--list")
	if want := "core.repositoryformatversion=0\ncore.filemode=true\ncore.bare=false"; cfg != want {
		t.Errorf(".git/config:\n%s\nwant:\n%s", cfg, want)
	}
	if st := tgit(t, dir, "status", "--porcelain", "--untracked-files=all", "--ignored"); st != "" {
		t.Errorf("git status not clean:\n%s", st)
	}
	if got := tgit(t, dir, "rev-parse", "HEAD"); got != h.base {
		t.Errorf("git rev-parse HEAD = %s, want %s", got, h.base)
	}
	tgit(t, dir, "fsck", "--full", "--strict", "--no-dangling")
	checkModes(t, dir)
}

// checkModes checks that an unprivileged reader can use everything.
func checkModes(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Error(err)
			return err
		}
		info, _ := d.Info()
		m := info.Mode()
		switch {
		case m.IsDir() && m.Perm() != 0o755:
			t.Errorf("%s: mode %v, want drwxr-xr-x", path, m)
		case m.IsRegular() && (m.Perm()&0o444 != 0o444 || m.Perm()&0o022 != 0):
			t.Errorf("%s: mode %v, want readable by all, writable by owner only", path, m)
		case m.IsRegular() && m.Perm()&0o100 != 0 && m.Perm()&0o011 != 0o011:
			t.Errorf("%s: mode %v: executable by owner only", path, m)
		}
		return nil
	})
}

func equalTrees(a, b map[string]treeEntry) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// grepTree fails if any file under dir holds a secret or a forbidden object
// id, in hex or in binary.
func grepTree(t *testing.T, dir string, h *hostile) {
	t.Helper()
	var needles [][]byte
	for _, s := range secrets {
		needles = append(needles, []byte(s))
	}
	for _, id := range h.forbidden {
		raw, _ := hex.DecodeString(id)
		needles = append(needles, []byte(id), raw)
	}
	n := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		for _, needle := range needles {
			if bytes.Contains(b, needle) {
				t.Errorf("%s holds %q", path, needle)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 8 {
		t.Fatalf("grep saw only %d files", n)
	}
}

// TestPrepareBaseForms: every form of base names the right commit, and the
// forms that do not need git are served from the cache with no git in PATH.
func TestPrepareBaseForms(t *testing.T) {
	requireGit(t)
	src, a, b := simpleRepo(t)
	tgit(t, src, "branch", "feature", a)
	tgit(t, src, "update-ref", "refs/remotes/origin/main", b)
	tgit(t, src, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
	tgit(t, src, "tag", "-a", "-m", "tag of tag", "v1.0-again", "v1.0") // a tag pointing at a tag
	tgit(t, src, "pack-refs", "--all")
	tgit(t, src, "branch", "loose-branch", a) // stays a loose ref
	cache := t.TempDir()

	tests := []struct {
		base    string
		want    string
		needGit bool // the form takes one git run on every call
	}{
		{base: b, want: b},
		{base: strings.ToUpper(a), want: a},
		{base: a[:7], want: a},
		{base: a[:4], want: a},
		{base: "HEAD", want: b},
		{base: "@", want: b},
		{base: "main", want: b},
		{base: "refs/heads/main", want: b},
		{base: "feature", want: a},
		{base: "loose-branch", want: a},
		{base: "v1", want: a},
		{base: "v1.0", want: a},
		{base: "refs/tags/v1.0", want: a},
		{base: "v1.0-again", want: a},
		{base: "origin/main", want: b},
		{base: "origin", want: b},
		{base: "HEAD~1", want: a, needGit: true},
		{base: "main^", want: a, needGit: true},
		{base: "v1.0^{commit}", want: a, needGit: true},
		{base: b[:8] + "~1", want: a, needGit: true},
	}
	for _, tt := range tests {
		t.Run(tt.base, func(t *testing.T) {
			dir, commit, err := Prepare(context.Background(), src, tt.base, cache)
			if err != nil {
				t.Fatal(err)
			}
			if commit != tt.want {
				t.Fatalf("commit = %s, want %s", commit, tt.want)
			}
			if got := tgit(t, dir, "rev-parse", "HEAD"); got != tt.want {
				t.Fatalf("copy's HEAD = %s, want %s", got, tt.want)
			}
			if want := filepath.Join(cache, tt.want, "repo"); dir != want {
				t.Fatalf("dir = %s, want %s", dir, want)
			}
		})
	}

	// With no git to run, the cache must answer every form that needs none.
	t.Setenv("PATH", t.TempDir())
	for _, tt := range tests {
		if tt.needGit {
			continue
		}
		dir, commit, err := Prepare(context.Background(), src, tt.base, cache)
		if err != nil || commit != tt.want || dir != filepath.Join(cache, tt.want, "repo") {
			t.Errorf("cached Prepare(%q) = %s, %s, %v; want %s with no git run", tt.base, dir, commit, err, tt.want)
		}
	}
	// And one entry per commit, however named.
	var entries []string
	ents, _ := os.ReadDir(cache)
	for _, e := range ents {
		if len(e.Name()) == 40 {
			entries = append(entries, e.Name())
		}
	}
	if len(entries) != 2 {
		t.Errorf("cache entries %q, want one for each of %s and %s", entries, a, b)
	}
}

// TestPrepareRefErrors: a base that names no commit in src is a *RefError
// naming the ref and the repository, on one line, and builds nothing.
func TestPrepareRefErrors(t *testing.T) {
	requireGit(t)
	src, a, _ := simpleRepo(t)
	blob := tgit(t, src, "rev-parse", a+":f.txt")
	tree := tgit(t, src, "rev-parse", a+"^{tree}")
	// Two blobs whose ids share their first four digits: an ambiguous
	// abbreviation even for ^{commit}, since neither is a commit.
	p1, p2 := collidingBlobs(t, src)

	for _, base := range []string{
		"v9", "no-such-branch", "refs/heads/nope", blob, tree, blob[:10], strings.Repeat("d", 40), "deadbeef",
		"", "-rf", "--all", "main:f.txt", "HEAD@{1}", ":/two", "main..HEAD", "a\nb", "../../etc/passwd", p1[:4],
	} {
		t.Run(fmt.Sprintf("%q", base), func(t *testing.T) {
			cache := t.TempDir()
			_, _, err := Prepare(context.Background(), src, base, cache)
			var re *RefError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v (%T), want *RefError", err, err)
			}
			if re.Ref != base || re.Repo != src || !errors.Is(err, ErrNoCommit) {
				t.Errorf("RefError = %+v", re)
			}
			msg := fmt.Errorf("git_base %w", err).Error()
			if want := fmt.Sprintf("git_base %q: no such commit in %s", base, src); msg != want {
				t.Errorf("message %q, want %q", msg, want)
			}
			ents, _ := os.ReadDir(cache)
			for _, e := range ents {
				t.Errorf("cache holds %s after a failed Prepare", e.Name())
			}
		})
	}
	if p1[:4] != p2[:4] {
		t.Fatal("setup: blobs do not collide")
	}
}

// collidingBlobs writes two blobs whose ids share their first 4 hex digits,
// found by hashing in Go (a blob's id is sha1("blob <size>\0<content>")).
func collidingBlobs(t *testing.T, repo string) (string, string) {
	t.Helper()
	seen := map[string]string{}
	for i := 0; ; i++ {
		content := fmt.Sprintf("collide %d\n", i)
		sum := sha1.Sum([]byte(fmt.Sprintf("blob %d\x00%s", len(content), content)))
		id := hex.EncodeToString(sum[:])
		other, ok := seen[id[:4]]
		if !ok {
			seen[id[:4]] = content
			continue
		}
		var ids []string
		for _, c := range []string{other, content} {
			out, err := tgitErr(repo, []byte(c), "hash-object", "--stdin", "-w")
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, out)
		}
		if ids[1] != id {
			t.Fatalf("setup: git says %s, Go says %s", ids[1], id)
		}
		return ids[0], ids[1]
	}
}

// TestPrepareReadsNoSourceConfig watches src with inotify during a cold
// build: src's config is opened once (by this package, for the object
// format, as data), its index and hooks never, and nothing in src's
// working tree or .git is created, modified or deleted.
func TestPrepareReadsNoSourceConfig(t *testing.T) {
	requireGit(t)
	h := hostileRepo(t)
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		skipOrFail(t, "needs inotify: "+err.Error())
	}
	defer unix.Close(fd)
	const changes = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_MOVED_FROM | unix.IN_MOVED_TO
	dirs := map[int]string{}
	for _, d := range []string{h.src, filepath.Join(h.src, ".git"), filepath.Join(h.src, ".git", "hooks"), filepath.Join(h.src, "bin")} {
		wd, err := unix.InotifyAddWatch(fd, d, unix.IN_OPEN|unix.IN_ACCESS|changes)
		if err != nil {
			t.Fatal(err)
		}
		dirs[wd] = d
	}

	if _, _, err := Prepare(context.Background(), h.src, h.base, t.TempDir()); err != nil {
		t.Fatal(err)
	}

	opened := map[string]int{}
	buf := make([]byte, 1<<16)
	for {
		n, err := unix.Read(fd, buf)
		if n <= 0 || err != nil {
			break
		}
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(bytes.TrimRight(buf[off+unix.SizeofInotifyEvent:off+unix.SizeofInotifyEvent+int(ev.Len)], "\x00"))
			off += unix.SizeofInotifyEvent + int(ev.Len)
			path := filepath.Join(dirs[int(ev.Wd)], name)
			switch {
			case ev.Mask&changes != 0:
				t.Errorf("%s changed (inotify mask %#x)", path, ev.Mask)
			case ev.Mask&unix.IN_OPEN != 0:
				opened[path]++
			}
		}
	}
	t.Logf("opened in src: %v", opened)
	gitDir := filepath.Join(h.src, ".git")
	if n := opened[filepath.Join(gitDir, "config")]; n != 1 {
		t.Errorf("src's config opened %d times, want once (by gitbase itself)", n)
	}
	for path, n := range opened {
		if strings.HasPrefix(path, filepath.Join(gitDir, "hooks")) || path == filepath.Join(gitDir, "index") ||
			!strings.HasPrefix(path, gitDir) {
			t.Errorf("%s opened %d times", path, n)
		}
	}
	// Control: the watch sees git's own reads of src.
	tgitErr(h.src, nil, "status")
	n, _ := unix.Read(fd, buf)
	if n <= 0 {
		t.Error("control: inotify saw nothing of git status in src; the test proves nothing")
	}
}

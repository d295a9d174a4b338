package gitbase

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Prepare returns a directory holding a sanitized copy of the repository at
// src checked out at base: a fresh repository whose only history is base and
// its ancestors, on one branch, main. commit is base's full commit id.
//
// base is a ref name as git completes it ("main", "v1.2", "origin/main",
// "HEAD", "refs/tags/v1"), a full or abbreviated object id, optionally
// followed by ~n, ^n or ^{…} suffixes. Reflog (@{…}) and message-search (:/)
// forms are not supported. If base does not name a commit in src (or a tag
// that peels to one), the error is a *RefError.
//
// The copy is built under cacheDir, in a locked temporary directory renamed
// into place once complete, so concurrent callers and crashed builds never
// see a half-made copy; callers asking for a commit being built wait for it.
// When base is a full id, a ref name or an unambiguous abbreviation and the
// copy exists, Prepare reads a few files of src and of the cache and runs no
// git at all. Otherwise it needs git in PATH (ErrGitNotFound).
//
// The returned directory belongs to the cache and is shared by every caller
// asking for the same commit: it must be treated as read-only (mount it as a
// lower layer, or copy it). Everything in it is readable by all users; a
// cacheDir that Prepare creates is mode 0755, one that exists keeps its
// modes. A base given with a suffix (main~2) costs two git runs (init and
// rev-parse in a scratch repository) on every call, cached or not.
//
// Prepare is safe for concurrent use, also by several processes sharing
// cacheDir.
func Prepare(ctx context.Context, src, base, cacheDir string) (dir, commit string, err error) {
	if cacheDir == "" {
		return "", "", errors.New("gitbase: no cache directory given")
	}
	if cacheDir, err = filepath.Abs(cacheDir); err != nil {
		return "", "", fmt.Errorf("gitbase: %w", err)
	}
	r, err := openSrc(src)
	if err != nil {
		return "", "", err
	}
	for _, d := range []string{r.path, r.gitDir, r.commonDir} {
		if within(cacheDir, d) || within(realPath(cacheDir), realPath(d)) {
			return "", "", fmt.Errorf("gitbase: cache directory %s is inside the source repository %s", cacheDir, d)
		}
	}
	if base == "" || base[0] == '-' || strings.ContainsAny(base, "\x00\n\r") {
		return "", "", &RefError{Ref: base, Repo: r.path}
	}
	shallow, err := r.shallow()
	if err != nil {
		return "", "", fmt.Errorf("gitbase: %s: reading shallow file: %w", r.path, err)
	}

	oid, present, rest := r.quickResolve(base)
	if present && rest == "" {
		if dir, commit, ok := cached(cacheDir, r, oid, shallow); ok {
			return dir, commit, nil
		}
	}
	expr := base
	if oid != "" {
		expr = oid + rest
	}
	dir, commit, err = build(ctx, r, base, expr, shallow, cacheDir)
	if err != nil {
		return "", "", err
	}
	if oid != "" && rest == "" {
		recordPeeled(cacheDir, oid, commit)
	}
	return dir, commit, nil
}

// quickResolve resolves the leading name of base without git: oid is what
// it names ("" when that takes git), present whether that object was found
// in src's object store, rest the suffix after the name ("~2", "^{commit}").
func (r *srcRepo) quickResolve(base string) (oid string, present bool, rest string) {
	name, rest := splitRev(base)
	switch {
	case name == "":
		return "", false, rest
	case len(name) == r.hexLen && isHex(name):
		// Like git, a full id is an id even if a ref has that name.
		oid = strings.ToLower(name)
	default:
		var ok bool
		if oid, ok = r.resolveName(name); !ok {
			if id, ok := r.findObject(name); ok {
				return id, true, rest
			}
			return "", false, rest
		}
	}
	found, ok := r.findObject(oid)
	return oid, ok && found == oid, rest
}

// cached returns the finished copy for oid, itself a commit or an object
// known to peel to one.
func cached(cacheDir string, r *srcRepo, oid string, shallow []byte) (dir, commit string, ok bool) {
	if dir, ok := lookupEntry(cacheDir, cacheKey(oid, shallow), oid); ok {
		return dir, oid, true
	}
	if c, ok := lookupPeeled(cacheDir, oid, r.hexLen); ok {
		if dir, ok := lookupEntry(cacheDir, cacheKey(c, shallow), c); ok {
			return dir, c, true
		}
	}
	return "", "", false
}

// build resolves expr with git against src's objects and, unless the copy
// appeared meanwhile, builds it. The git commands, all run with the
// environment and options of git.go, in order:
//
//	in tmp:      git init --quiet --template= --initial-branch=main [--object-format=sha256] repo
//	in tmp/repo: git rev-parse --verify --quiet --end-of-options <expr>^{commit}  (src's objects lent)
//	             git update-ref refs/heads/main <commit>                           (src's objects lent)
//	             git repack -a -d -q -n                                           (src's objects lent)
//	             git cat-file --batch-check                                       (shallow src only)
//	             git fsck --connectivity-only --no-dangling --no-progress
//	             git read-tree --reset -u <commit>
//	             git update-index -q --refresh                                    (only if modes were fixed)
//
// "src's objects lent" means GIT_ALTERNATE_OBJECT_DIRECTORIES names src's
// object directory; no git command ever runs in src or reads its config.
func build(ctx context.Context, r *srcRepo, base, expr string, shallow []byte, cacheDir string) (dir, commit string, err error) {
	gitPath, err := exec.LookPath("git")
	if err != nil {
		return "", "", fmt.Errorf("gitbase: %w", ErrGitNotFound)
	}
	if err := ctx.Err(); err != nil {
		return "", "", err
	}
	if _, err := os.Stat(cacheDir); os.IsNotExist(err) {
		// Made here, so made searchable by all whatever the umask; an
		// existing directory keeps the modes its owner chose.
		if err := os.MkdirAll(cacheDir, 0o755); err != nil {
			return "", "", fmt.Errorf("gitbase: %w", err)
		}
		if err := os.Chmod(cacheDir, 0o755); err != nil {
			return "", "", fmt.Errorf("gitbase: %w", err)
		}
	}
	removeStale(cacheDir)
	tmp, tmpLock, err := newTmp(cacheDir)
	if err != nil {
		return "", "", fmt.Errorf("gitbase: %w", err)
	}
	published := false
	defer func() {
		if !published {
			os.RemoveAll(tmp)
		}
		tmpLock.Close()
	}()
	home := filepath.Join(tmp, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return "", "", fmt.Errorf("gitbase: %w", err)
	}
	g := newGit(gitPath, home)

	repoDir := filepath.Join(tmp, repoName)
	initArgs := []string{"init", "--quiet", "--template=", "--initial-branch=main"}
	if r.format != "sha1" {
		initArgs = append(initArgs, "--object-format="+r.format)
	}
	if _, err := g.run(ctx, tmp, nil, append(initArgs, repoDir)...); err != nil {
		return "", "", fmt.Errorf("gitbase: creating repository: %w", err)
	}
	own := []string{"GIT_DIR=" + filepath.Join(repoDir, ".git"), "GIT_WORK_TREE=" + repoDir}
	lent := append(append([]string(nil), own...), alternatesEnv(r.objects)...)

	out, err := g.run(ctx, repoDir, lent, "rev-parse", "--verify", "--quiet", "--end-of-options", expr+"^{commit}")
	if err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		// "rev-parse --verify --quiet" exits 1 when the name resolves to no
		// commit; anything else (a damaged object store) is not the
		// task's fault and must not read as one.
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 1 {
			return "", "", &RefError{Ref: base, Repo: r.path, Err: err}
		}
		return "", "", fmt.Errorf("gitbase: resolving %q in %s: %w", base, r.path, err)
	}
	commit = strings.TrimSpace(string(out))
	if len(commit) != r.hexLen || !isHex(commit) {
		return "", "", fmt.Errorf("gitbase: git rev-parse: unexpected output %q", out)
	}
	key := cacheKey(commit, shallow)
	if dir, ok := lookupEntry(cacheDir, key, commit); ok {
		return dir, commit, nil
	}
	keyLock, err := lockKey(ctx, cacheDir, key)
	if err != nil {
		return "", "", fmt.Errorf("gitbase: %w", err)
	}
	defer keyLock.Close()
	if dir, ok := lookupEntry(cacheDir, key, commit); ok {
		return dir, commit, nil // built by someone else while we waited
	}

	if err := fill(ctx, g, repoDir, own, lent, commit, shallow); err != nil {
		return "", "", fmt.Errorf("gitbase: building %s at %s: %w", r.path, commit, err)
	}
	if err := finish(ctx, g, tmp, tmpLock, repoDir, own, commit); err != nil {
		return "", "", fmt.Errorf("gitbase: building %s at %s: %w", r.path, commit, err)
	}
	dir, err = publish(tmp, cacheDir, key, commit)
	if err != nil {
		return "", "", fmt.Errorf("gitbase: %w", err)
	}
	published = true
	return dir, commit, nil
}

// fill gives the new repository base's history and checks it out.
func fill(ctx context.Context, g *git, repoDir string, own, lent []string, commit string, shallow []byte) error {
	gitDir := filepath.Join(repoDir, ".git")
	if shallow != nil {
		// src lacks the parents of these commits; without the list the
		// walk below would fail on them.
		if err := os.WriteFile(filepath.Join(gitDir, "shallow"), shallow, 0o644); err != nil {
			return err
		}
	}
	if _, err := g.run(ctx, repoDir, lent, "update-ref", "refs/heads/main", commit); err != nil {
		return err
	}
	// With src's objects lent, "repack -a" copies every object reachable
	// from main, and nothing else, into one pack of the new repository (as
	// "git clone --dissociate" does).
	if _, err := g.run(ctx, repoDir, lent, "repack", "-a", "-d", "-q", "-n"); err != nil {
		return err
	}
	if shallow != nil {
		if err := trimShallow(ctx, g, repoDir, own, shallow); err != nil {
			return err
		}
	}
	// Without src's objects: the new repository must be complete alone.
	if _, err := g.run(ctx, repoDir, own, "fsck", "--connectivity-only", "--no-dangling", "--no-progress"); err != nil {
		return err
	}
	if _, err := g.run(ctx, repoDir, own, "read-tree", "--reset", "-u", commit); err != nil {
		return err
	}
	return nil
}

// trimShallow keeps in the new repository's shallow file only the commits it
// holds: the others are src's cut points on other lines of history, whose
// ids need not be shown to anyone.
func trimShallow(ctx context.Context, g *git, repoDir string, own []string, shallow []byte) error {
	out, err := g.runInput(ctx, repoDir, own, shallow, "cat-file", "--batch-check")
	if err != nil {
		return err
	}
	var keep bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 3 && f[1] == "commit" {
			keep.WriteString(f[0] + "\n")
		}
	}
	path := filepath.Join(repoDir, ".git", "shallow")
	if keep.Len() == 0 {
		return os.Remove(path)
	}
	return os.WriteFile(path, keep.Bytes(), 0o644)
}

// gitDirKeep is everything the new .git may hold.
var gitDirKeep = map[string]bool{"HEAD": true, "config": true, "index": true, "objects": true, "refs": true, "shallow": true}

// finish removes what does not belong, fixes modes, makes the build durable
// and writes the marker.
func finish(ctx context.Context, g *git, tmp string, tmpLock *os.File, repoDir string, own []string, commit string) error {
	gitDir := filepath.Join(repoDir, ".git")
	ents, err := os.ReadDir(gitDir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !gitDirKeep[e.Name()] {
			if err := os.RemoveAll(filepath.Join(gitDir, e.Name())); err != nil {
				return err
			}
		}
	}
	for _, p := range []string{"objects/info/alternates", "objects/info/packs"} {
		if err := os.Remove(filepath.Join(gitDir, p)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	if err := os.RemoveAll(filepath.Join(tmp, "home")); err != nil {
		return err
	}

	changed, err := makeShareable(repoDir)
	if err != nil {
		return err
	}
	if changed {
		// chmod moved the files' ctimes: refresh the index so git status
		// stays fast, then give the rewritten index its mode back.
		if _, err := g.run(ctx, repoDir, own, "update-index", "-q", "--refresh"); err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(gitDir, "index"), 0o644); err != nil {
			return err
		}
	}

	// The marker must not reach the disk before what it vouches for.
	if err := unix.Syncfs(int(tmpLock.Fd())); err != nil {
		return fmt.Errorf("syncfs: %w", err)
	}
	m := filepath.Join(tmp, markerName)
	if err := os.WriteFile(m, []byte(marker(commit)), 0o644); err != nil {
		return err
	}
	if err := os.Chmod(m, 0o644); err != nil {
		return err
	}
	if f, err := os.Open(m); err == nil {
		f.Sync()
		f.Close()
	}
	return os.Chmod(tmp, 0o755)
}

// within reports whether path is dir or below it (lexically).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// realPath resolves symbolic links in the longest existing leading part of p.
func realPath(p string) string {
	rest := ""
	for dir := p; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest)
		}
		if dir == filepath.Dir(dir) {
			return p
		}
		rest = filepath.Join(filepath.Base(dir), rest)
	}
}

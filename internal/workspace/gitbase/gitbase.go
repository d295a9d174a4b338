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
	return prepare(ctx, src, base, cacheDir, 0)
}

// prepare is Prepare for a repository depth submodules below the one the
// caller named.
func prepare(ctx context.Context, src, base, cacheDir string, depth int) (dir, commit string, err error) {
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
	dir, commit, err = build(ctx, r, base, expr, shallow, cacheDir, depth)
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
//	             git rev-list --objects --missing=print <commit>                  (src's objects lent)
//	             git pack-objects -q --delta-base-offset .git/objects/pack/pack   (src's objects lent)
//	             git update-ref refs/heads/main <commit>
//	             git cat-file --batch-check                                       (shallow src only)
//	             git read-tree --reset -u <commit>
//	             git ls-files --stage -z, git config --blob <commit>:.gitmodules  (submodules, then each built alike)
//	             git update-index -q --refresh                                    (only if modes were fixed)
//	             git config --file .git/config --null --list                      (the post-condition, verify.go)
//	             git rev-list --objects --no-object-names <commit>
//	             git ls-files --stage -z
//
// "src's objects lent" means GIT_ALTERNATE_OBJECT_DIRECTORIES names src's
// object directory; no git command ever runs in src or reads its config.
func build(ctx context.Context, r *srcRepo, base, expr string, shallow []byte, cacheDir string, depth int) (dir, commit string, err error) {
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

	if err := fill(ctx, g, r, repoDir, own, lent, commit, shallow); err != nil {
		var me *MissingError
		if errors.As(err, &me) {
			return "", "", fmt.Errorf("gitbase: %w", err)
		}
		return "", "", fmt.Errorf("gitbase: building %s at %s: %w", r.path, commit, err)
	}
	if err := placeSubmodules(ctx, g, r, repoDir, own, commit, cacheDir, depth); err != nil {
		var se *SubmoduleError
		if errors.As(err, &se) {
			return "", "", fmt.Errorf("gitbase: %s: %w", r.path, err)
		}
		return "", "", fmt.Errorf("gitbase: building %s at %s: %w", r.path, commit, err)
	}
	if err := finish(ctx, g, tmp, tmpLock, repoDir, own, commit, r.hexLen, shallow != nil); err != nil {
		var le *LeakError
		if errors.As(err, &le) {
			return "", "", fmt.Errorf("gitbase: %s at %s: %w", r.path, commit, err)
		}
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
//
// The objects are chosen by one walk from base (rev-list, with src's
// objects lent) and packed from that list alone (pack-objects without
// --revs). Nothing of src's but the objects the walk named can get in:
// not its promisor packs (which "repack -a" keeps whole, reachable or not),
// not its kept or cruft packs, not a pack's unreachable neighbours. An
// object the walk cannot find is never fetched: the build stops with a
// *MissingError naming it.
func fill(ctx context.Context, g *git, r *srcRepo, repoDir string, own, lent []string, commit string, shallow []byte) error {
	gitDir := filepath.Join(repoDir, ".git")
	if shallow != nil {
		// src lacks the parents of these commits; without the list the
		// walk below would fail on them.
		if err := os.WriteFile(filepath.Join(gitDir, "shallow"), shallow, 0o644); err != nil {
			return err
		}
	}
	out, err := g.run(ctx, repoDir, lent, "rev-list", "--objects", "--missing=print", commit)
	if err != nil {
		return err
	}
	list, missing, first, err := objectList(out, r.hexLen)
	if err != nil {
		return err
	}
	if missing > 0 {
		return &MissingError{Repo: r.path, Commit: commit, Missing: missing, First: first}
	}
	if _, err := g.runInput(ctx, repoDir, lent, list, "pack-objects", "-q", "--delta-base-offset",
		filepath.Join(gitDir, "objects", "pack", "pack")); err != nil {
		return err
	}
	// From here on, without src's objects: the new repository must be
	// complete alone (verifyCopy checks it is, and holds nothing more).
	if _, err := g.run(ctx, repoDir, own, "update-ref", "refs/heads/main", commit); err != nil {
		return err
	}
	if shallow != nil {
		if err := trimShallow(ctx, g, repoDir, own, shallow); err != nil {
			return err
		}
	}
	if _, err := g.run(ctx, repoDir, own, "read-tree", "--reset", "-u", commit); err != nil {
		return err
	}
	return nil
}

// objectList reads the output of rev-list --objects --missing=print: the
// ids of the objects found (one a line, for pack-objects, with the path git
// prints beside them), how many are missing and the first of those. A line
// that is neither is an error: nothing git did not name may be packed.
func objectList(out []byte, hexLen int) (list []byte, missing int, first string, err error) {
	var b bytes.Buffer
	for _, l := range bytes.Split(out, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		if l[0] == '?' {
			if id := string(l[1:]); len(id) == hexLen && isHex(id) {
				if missing++; first == "" {
					first = id
				}
				continue
			}
		} else if len(l) >= hexLen && isHex(string(l[:hexLen])) && (len(l) == hexLen || l[hexLen] == ' ') {
			b.Write(l)
			b.WriteByte('\n')
			continue
		}
		return nil, 0, "", fmt.Errorf("git rev-list: unexpected line %q", l)
	}
	return b.Bytes(), missing, first, nil
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

// testHookBeforeVerify lets a test change a copy just before the
// post-condition is checked.
var testHookBeforeVerify func(repoDir string)

// gitDirKeep is everything the new .git may hold.
var gitDirKeep = map[string]bool{"HEAD": true, "config": true, "index": true, "objects": true, "refs": true, "shallow": true}

// finish removes what does not belong, fixes modes, makes the build durable
// and writes the marker.
func finish(ctx context.Context, g *git, tmp string, tmpLock *os.File, repoDir string, own []string, commit string, hexLen int, shallow bool) error {
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

	// The post-condition, last, on the copy as it will be published.
	if testHookBeforeVerify != nil {
		testHookBeforeVerify(repoDir)
	}
	if err := verifyCopy(ctx, g, repoDir, own, commit, hexLen, shallow); err != nil {
		return err
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

package gitbase

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Submodules. A submodule's later history is later history too: a gitlink
// in base's tree gets, at its path, a sanitized copy of the submodule's
// repository at the commit base records (built, cached and checked as any
// copy is, recursively), with its .git a directory of its own. The
// submodule's repository is looked for where git keeps it: the absorbed git
// dir modules/<name> (of the worktree's git dir, then of the common dir),
// else <path>/.git in src's working tree. What src has checked out there is
// never read. A submodule that cannot be given at its commit (not
// initialised in src, or lacking the commit) is a *SubmoduleError: the copy
// is refused, not built with an empty directory where the code should be.

// maxSubmoduleDepth bounds submodules of submodules; maxSubmodules the
// repositories one copy may hold below its own, nested ones included (each
// is a whole copy: a few gitlinks a level would otherwise multiply them
// level after level).
const (
	maxSubmoduleDepth = 8
	maxSubmodules     = 64
)

// gitlink is one submodule entry of base's tree.
type gitlink struct{ path, commit string }

// gitlinks lists the submodule entries of the copy's index.
func gitlinks(ctx context.Context, g *git, repoDir string, own []string) ([]gitlink, error) {
	out, err := g.run(ctx, repoDir, own, "ls-files", "--stage", "-z")
	if err != nil {
		return nil, err
	}
	var links []gitlink
	for _, rec := range strings.Split(string(out), "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if f := strings.Fields(meta); ok && len(f) == 3 && f[0] == "160000" {
			links = append(links, gitlink{path: path, commit: f[1]})
		}
	}
	return links, nil
}

// placeSubmodules puts the copy of every submodule of the copy at repoDir
// in place.
func placeSubmodules(ctx context.Context, g *git, r *srcRepo, repoDir string, own []string, commit, cacheDir string, depth int) error {
	links, err := gitlinks(ctx, g, repoDir, own)
	if err != nil || len(links) == 0 {
		return err
	}
	names, err := submoduleNames(ctx, g, repoDir, own, commit)
	if err != nil {
		return err
	}
	total := 0
	for _, l := range links {
		fail := func(err error) error { return &SubmoduleError{Repo: r.path, Path: l.path, Commit: l.commit, Err: err} }
		if depth+1 > maxSubmoduleDepth {
			return fail(fmt.Errorf("submodules nested more than %d deep", maxSubmoduleDepth))
		}
		name, ok := names[l.path]
		if !ok {
			name = l.path // git's own fallback when .gitmodules does not say
		}
		sub, err := r.submoduleRepo(name, l.path)
		if err != nil {
			return fail(err)
		}
		dir, _, err := prepare(ctx, sub, l.commit, cacheDir, depth+1)
		if err != nil {
			var re *RefError
			if errors.As(err, &re) {
				return fail(fmt.Errorf("%s lacks the commit: fetch it there (git -C %s fetch), or update the submodule", sub, sub))
			}
			return fail(err)
		}
		n, err := countRepos(dir)
		if err != nil {
			return err
		}
		if total += n; total > maxSubmodules {
			return fail(fmt.Errorf("more than %d submodule repositories, nested ones included", maxSubmodules))
		}
		dst := filepath.Join(repoDir, filepath.FromSlash(l.path))
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if err := copyTree(dir, dst); err != nil {
			return fmt.Errorf("copying submodule %s: %w", l.path, err)
		}
		// The copied files have new ctimes: refresh the submodule's index
		// so that git status there stays fast.
		subOwn := []string{"GIT_DIR=" + filepath.Join(dst, ".git"), "GIT_WORK_TREE=" + dst}
		if _, err := g.run(ctx, dst, subOwn, "update-index", "-q", "--refresh"); err != nil {
			return err
		}
	}
	return nil
}

// countRepos counts the repositories of a finished copy: its own and every
// submodule's below it.
func countRepos(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			n++
			return filepath.SkipDir
		}
		return nil
	})
	return n, err
}

// submoduleNames maps each submodule path of base's .gitmodules to its
// name. The file is read by git config as a blob of the copy: data, with
// no include followed.
func submoduleNames(ctx context.Context, g *git, repoDir string, own []string, commit string) (map[string]string, error) {
	names := map[string]string{}
	out, err := g.run(ctx, repoDir, own, "cat-file", "-t", commit+":.gitmodules")
	if err != nil || strings.TrimSpace(string(out)) != "blob" {
		return names, nil // no .gitmodules: names are paths
	}
	out, err = g.run(ctx, repoDir, own, "config", "--blob", commit+":.gitmodules", "--null", "--get-regexp", `^submodule\..*\.path$`)
	if err != nil {
		var ge *GitError
		if errors.As(err, &ge) && ge.Stderr == "" {
			return names, nil // exit 1: no path keys
		}
		return nil, err
	}
	for _, kv := range strings.Split(string(out), "\x00") {
		k, v, ok := strings.Cut(kv, "\n")
		if !ok {
			continue
		}
		name := strings.TrimSuffix(strings.TrimPrefix(k, "submodule."), ".path")
		names[strings.Trim(v, "/")] = name
	}
	return names, nil
}

// submoduleRepo finds the repository of the submodule name at path. It
// must lie inside src (its git directory or its working tree), symlinks
// resolved: a crafted modules/NAME, or a gitfile, must not lend the copy
// the objects of another repository of this machine.
func (r *srcRepo) submoduleRepo(name, path string) (string, error) {
	if !safeRel(name) || !safeRel(path) {
		return "", fmt.Errorf("unsafe submodule name %q or path %q", name, path)
	}
	inside := func(sub string) error {
		s, err := openSrc(sub)
		if err != nil {
			return err
		}
		for _, d := range []string{s.gitDir, s.commonDir} {
			real := realPath(d)
			if !within(real, realPath(r.commonDir)) && !within(real, realPath(r.gitDir)) && (r.path == r.gitDir || !within(real, realPath(r.path))) {
				return fmt.Errorf("its repository %s lies outside %s", real, r.path)
			}
		}
		return nil
	}
	var tried []string
	for _, base := range []string{r.gitDir, r.commonDir} {
		dir := filepath.Join(base, "modules", filepath.FromSlash(name))
		if isGitDir(dir) {
			return dir, inside(dir)
		}
		tried = append(tried, dir)
	}
	if r.path != r.gitDir { // a working tree
		wt := filepath.Join(r.path, filepath.FromSlash(path))
		if _, err := os.Lstat(filepath.Join(wt, ".git")); err == nil {
			if _, err := openSrc(wt); err == nil {
				return wt, inside(wt)
			}
		}
		tried = append(tried, filepath.Join(wt, ".git"))
	}
	return "", fmt.Errorf("its repository is not in %s (looked at %s): initialise it (git -C %s submodule update --init %s) or give the task a repository without it",
		r.path, strings.Join(tried, ", "), r.path, path)
}

func isGitDir(dir string) bool {
	return isFile(filepath.Join(dir, "HEAD")) && isDir(filepath.Join(dir, "objects")) && isDir(filepath.Join(dir, "refs"))
}

// safeRel reports whether p is a relative slash path with no "..", "."
// or empty component.
func safeRel(p string) bool {
	if p == "" || strings.HasPrefix(p, "/") || strings.ContainsRune(p, 0) {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." {
			return false
		}
	}
	return true
}

// copyTree copies the tree at src (a finished copy: directories, regular
// files and symbolic links only) into the existing directory dst.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		to := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch m := info.Mode(); {
		case m.IsDir():
			if err := os.Mkdir(to, m.Perm()); err != nil {
				return err
			}
			return os.Chmod(to, m.Perm()) // past the umask
		case m&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case m.IsRegular():
			return copyFileMode(p, to, m.Perm())
		default:
			return fmt.Errorf("%s: unexpected file type %v", p, m.Type())
		}
	})
}

func copyFileMode(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Chmod(mode); err != nil { // past the umask
		out.Close()
		return err
	}
	return out.Close()
}

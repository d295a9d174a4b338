package imagebuild

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"golang.org/x/sys/unix"
)

// resolveBeneath: every open of a context or layer path stays beneath its
// root and follows no symlink and no magic link.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// maxSymlinks bounds the symlinks followed resolving one source path.
const maxSymlinks = 40

// entry is one file of a source tree, as lstat saw it: nothing is followed.
type entry struct {
	rel   string // slash-separated, relative to the tree's root; "." for the root
	mode  uint32 // st_mode: type and permission bits
	size  int64
	mtime unix.Timespec
	link  string   // a symlink's target
	sum   [32]byte // a regular file's sha256 (context trees only)
}

func (e *entry) typ() uint32  { return e.mode & unix.S_IFMT }
func (e *entry) isDir() bool  { return e.typ() == unix.S_IFDIR }
func (e *entry) isLink() bool { return e.typ() == unix.S_IFLNK }
func (e *entry) isReg() bool  { return e.typ() == unix.S_IFREG }

// tree is a source of COPY: the build context, or a stage's or an image's
// root filesystem.
type tree interface {
	// lookup returns the entry at rel (clean, relative), following
	// nothing; nil and no error when there is none.
	lookup(rel string) (*entry, error)
	// list returns the children of directory rel, sorted by name.
	list(rel string) ([]*entry, error)
	// open opens regular file e for reading, through no symlink.
	open(e *entry) (*os.File, error)
	// rooted says how an absolute or escaping symlink resolves: within
	// the tree as if it were "/" (an image), or not at all (the context).
	rooted() bool
	// name is how messages call the tree.
	name() string
}

// buildContext is the build context directory, indexed and hashed once
// per build, .dockerignore applied: the entries it excludes do not exist.
type buildContext struct {
	dir     string
	root    int // O_RDONLY|O_DIRECTORY of dir
	entries map[string]*entry
	kids    map[string][]*entry
	digest  string
	ignored *patternmatcher.PatternMatcher
}

// openContext indexes dir. dockerfile is the Dockerfile's path: an ignore
// file named after it (Dockerfile.dockerignore) beside it is preferred to
// dir's .dockerignore, as BuildKit does.
func openContext(dir, dockerfile string) (*buildContext, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	root, err := unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the build context %s: %w", abs, err)
	}
	c := &buildContext{dir: abs, root: root, entries: map[string]*entry{}, kids: map[string][]*entry{}}
	patterns, err := readIgnore(root, abs, dockerfile)
	if err != nil {
		c.close()
		return nil, err
	}
	if c.ignored, err = patternmatcher.New(patterns); err != nil {
		c.close()
		return nil, fmt.Errorf(".dockerignore: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(root, &st); err != nil {
		c.close()
		return nil, err
	}
	c.entries["."] = &entry{rel: ".", mode: st.Mode, mtime: st.Mtim}
	if err := c.walk(root, ".", patternmatcher.MatchInfo{}); err != nil {
		c.close()
		return nil, fmt.Errorf("reading the build context %s: %w", abs, err)
	}
	c.digest = c.treeDigest(".", true)
	return c, nil
}

func (c *buildContext) close() { unix.Close(c.root) }

// readIgnore returns the ignore patterns for the build.
func readIgnore(root int, dir, dockerfile string) ([]string, error) {
	var candidates []string
	if dockerfile != "" {
		if rel, err := filepath.Rel(dir, dockerfile+".dockerignore"); err == nil && !strings.HasPrefix(rel, "..") {
			candidates = append(candidates, filepath.ToSlash(rel))
		}
	}
	candidates = append(candidates, ".dockerignore")
	for _, p := range candidates {
		fd, err := unix.Openat2(root, p, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_CLOEXEC, Resolve: resolveBeneath})
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
		f := os.NewFile(uintptr(fd), p)
		pats, err := ignorefile.ReadAll(io.LimitReader(f, 1<<20))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
		return pats, nil
	}
	return nil, nil
}

// walk indexes directory dfd (at rel) and what lies beneath it, hashing
// every regular file; a directory the ignore file excludes is still
// walked when an exception ("!pattern") could bring back something under
// it, and is kept only if something is.
func (c *buildContext) walk(dfd int, rel string, parent patternmatcher.MatchInfo) error {
	names, err := readNames(dfd)
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, n := range names {
		p := n
		if rel != "." {
			p = rel + "/" + n
		}
		ign, info, err := c.ignored.MatchesUsingParentResults(p, parent)
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		e := &entry{rel: p, mode: st.Mode, size: st.Size, mtime: st.Mtim}
		switch e.typ() {
		case unix.S_IFDIR:
			if ign && !c.ignored.Exclusions() {
				continue
			}
			sub, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			before := len(c.entries)
			c.entries[p] = e
			err = c.walk(sub, p, info)
			unix.Close(sub)
			if err != nil {
				return err
			}
			if ign && len(c.entries) == before+1 {
				delete(c.entries, p) // nothing brought back beneath it
				continue
			}
			e.size = 0
		case unix.S_IFREG:
			if ign {
				continue
			}
			if err := c.hash(dfd, n, e); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		case unix.S_IFLNK:
			if ign {
				continue
			}
			buf := make([]byte, 4096)
			k, err := unix.Readlinkat(dfd, n, buf)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			e.link = string(buf[:k])
		default:
			if ign {
				continue
			}
			e.size = 0 // fifos, sockets, devices: indexed, never opened; refused if copied
		}
		c.entries[p] = e
		c.kids[rel] = append(c.kids[rel], e)
	}
	return nil
}

// hash reads regular file n of dfd (opened without following, checked to
// be the file lstat saw) into e.sum.
func (c *buildContext) hash(dfd int, n string, e *entry) error {
	fd, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), n)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("%w: changed type while read", ErrContextChanged)
	}
	h := sha256.New()
	k, err := io.Copy(h, f)
	if err != nil {
		return err
	}
	e.size = k
	copy(e.sum[:], h.Sum(nil))
	return nil
}

// treeDigest is the digest of the entries at and beneath rel: path
// (relative to rel), type and permission bits, size, content hash,
// symlink target. Owners and times are not part of it: COPY sets owners,
// and BuildKit's cache ignores times too. withRoot includes rel's own
// entry.
func (c *buildContext) treeDigest(rel string, withRoot bool) string {
	h := sha256.New()
	var walk func(e *entry)
	walk = func(e *entry) {
		name := "."
		if rel != "." && e.rel != rel {
			name = strings.TrimPrefix(e.rel, rel+"/")
		} else if rel == "." && e.rel != "." {
			name = e.rel
		}
		if e.rel != rel || withRoot {
			fmt.Fprintf(h, "%q %o %d %x %q\n", name, e.mode&(unix.S_IFMT|0o7777), e.size, e.sum, e.link)
		}
		for _, k := range c.kids[e.rel] {
			walk(k)
		}
	}
	if e := c.entries[rel]; e != nil {
		walk(e)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

func (c *buildContext) lookup(rel string) (*entry, error) { return c.entries[rel], nil }
func (c *buildContext) list(rel string) ([]*entry, error) { return c.kids[rel], nil }
func (c *buildContext) rooted() bool                      { return false }
func (c *buildContext) name() string                      { return "the build context" }

// open opens e beneath the context root through no symlink and checks it
// is still the regular file indexed.
func (c *buildContext) open(e *entry) (*os.File, error) {
	fd, err := unix.Openat2(c.root, e.rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC, Resolve: resolveBeneath})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.rel, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", e.rel, ErrContextChanged)
	}
	return os.NewFile(uintptr(fd), e.rel), nil
}

// dirTree is a root filesystem directory (a stage's merged view, an
// image's rootfs): looked up with the kernel, never followed, symlinks in
// source paths resolved as inside that root.
type dirTree struct {
	root  int
	label string
}

func (d *dirTree) rooted() bool { return true }
func (d *dirTree) name() string { return d.label }

func (d *dirTree) lookup(rel string) (*entry, error) {
	dir, base := ".", rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		dir, base = rel[:i], rel[i+1:]
	}
	var st unix.Stat_t
	if rel == "." {
		if err := unix.Fstat(d.root, &st); err != nil {
			return nil, err
		}
		return &entry{rel: ".", mode: st.Mode, mtime: st.Mtim}, nil
	}
	dfd, err := openDirBeneath(d.root, dir)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	defer unix.Close(dfd)
	if err := unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	e := &entry{rel: rel, mode: st.Mode, size: st.Size, mtime: st.Mtim}
	if e.isLink() {
		buf := make([]byte, 4096)
		k, err := unix.Readlinkat(dfd, base, buf)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", rel, err)
		}
		e.link = string(buf[:k])
	}
	return e, nil
}

func (d *dirTree) list(rel string) ([]*entry, error) {
	dfd, err := openDirBeneath(d.root, rel)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	names, err := readNames(dfd)
	unix.Close(dfd)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []*entry
	for _, n := range names {
		p := n
		if rel != "." {
			p = rel + "/" + n
		}
		e, err := d.lookup(p)
		if err != nil {
			return nil, err
		}
		if e != nil {
			out = append(out, e)
		}
	}
	return out, nil
}

func (d *dirTree) open(e *entry) (*os.File, error) {
	fd, err := unix.Openat2(d.root, e.rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC, Resolve: resolveBeneath})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.rel, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: not a regular file", e.rel)
	}
	return os.NewFile(uintptr(fd), e.rel), nil
}

// openDirBeneath opens directory rel beneath root, following nothing.
func openDirBeneath(root int, rel string) (int, error) {
	if rel == "." || rel == "" {
		return unix.Dup(root)
	}
	how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveBeneath}
	for range 16 {
		fd, err := unix.Openat2(root, rel, how)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		return fd, err
	}
	return -1, unix.EAGAIN
}

// readNames lists directory fd, not closing it.
func readNames(fd int) ([]string, error) {
	d, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(d), "dir")
	defer f.Close()
	if _, err := unix.Seek(d, 0, io.SeekStart); err != nil {
		return nil, err
	}
	return f.Readdirnames(-1)
}

// resolve follows the symlinks of a source path in t, component by
// component, and returns the entry it names. In the context, an absolute
// symlink or one that climbs above the root is refused (ErrEscape); in an
// image's root it resolves as the kernel would with that root as "/".
func resolve(t tree, rel string) (*entry, error) {
	parts := splitRel(rel)
	cur := "."
	hops := 0
	for len(parts) > 0 {
		p := parts[0]
		parts = parts[1:]
		next := p
		if cur != "." {
			next = cur + "/" + p
		}
		e, err := t.lookup(next)
		if err != nil {
			return nil, err
		}
		if e == nil {
			return nil, fmt.Errorf("%q: %w", rel, os.ErrNotExist)
		}
		if !e.isLink() {
			if len(parts) > 0 && !e.isDir() {
				return nil, fmt.Errorf("%q: %s is not a directory", rel, next)
			}
			cur = next
			continue
		}
		if hops++; hops > maxSymlinks {
			return nil, fmt.Errorf("%q: too many levels of symbolic links", rel)
		}
		target := e.link
		var resolved string
		switch {
		case path.IsAbs(target) && !t.rooted():
			return nil, fmt.Errorf("%q: symlink %s -> %s: %w", rel, next, target, ErrEscape)
		case path.IsAbs(target):
			resolved = target
		case !t.rooted() && escapes(cur, target):
			return nil, fmt.Errorf("%q: symlink %s -> %s: %w", rel, next, target, ErrEscape)
		default:
			resolved = path.Join("/"+cur, target)
		}
		parts = append(splitRel(resolved), parts...)
		cur = "."
	}
	return t.lookup(cur)
}

// splitRel splits a clean relative path into components, clamping ".."
// at the root (callers refuse escapes before).
func splitRel(p string) []string {
	p = path.Clean("/" + p)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// escapes reports whether symlink target, relative to directory dir
// (relative to the root), climbs above the root.
func escapes(dir, target string) bool {
	depth := len(splitRel(dir))
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}

// cleanSource checks a COPY or ADD source path (already expanded) and
// returns it clean and relative to the source's root. A path that climbs
// out of its root ("../x") is refused.
func cleanSource(src string) (string, error) {
	if strings.IndexByte(src, 0) >= 0 {
		return "", errors.New("source path contains NUL")
	}
	rel := strings.TrimPrefix(src, "/")
	if escapes(".", rel) {
		return "", fmt.Errorf("%q: %w", src, ErrEscape)
	}
	rel = path.Clean(rel)
	if rel == "" {
		rel = "."
	}
	return rel, nil
}

// hasWildcards reports whether a source path is a pattern.
func hasWildcards(p string) bool { return strings.ContainsAny(p, "*?[") }

// glob returns the entries of t whose paths match pattern, component by
// component (path.Match), sorted, symlinks along the way not followed.
func glob(t tree, pattern string) ([]*entry, error) {
	parts := splitRel(pattern)
	cur := []string{"."}
	for i, p := range parts {
		var next []string
		for _, dir := range cur {
			if !hasWildcards(p) {
				q := p
				if dir != "." {
					q = dir + "/" + p
				}
				if e, err := t.lookup(q); err != nil {
					return nil, err
				} else if e != nil && (i == len(parts)-1 || e.isDir()) {
					next = append(next, q)
				}
				continue
			}
			if e, err := t.lookup(dir); err != nil || e == nil || !e.isDir() {
				continue
			}
			kids, err := t.list(dir)
			if err != nil {
				return nil, err
			}
			for _, k := range kids {
				ok, err := path.Match(p, path.Base(k.rel))
				if err != nil {
					return nil, fmt.Errorf("pattern %q: %w", pattern, err)
				}
				if ok && (i == len(parts)-1 || k.isDir()) {
					next = append(next, k.rel)
				}
			}
		}
		cur = next
	}
	slices.Sort(cur)
	var out []*entry
	for _, r := range cur {
		e, err := t.lookup(r)
		if err != nil {
			return nil, err
		}
		if e != nil {
			out = append(out, e)
		}
	}
	return out, nil
}

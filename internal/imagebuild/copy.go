package imagebuild

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"strings"

	"github.com/moby/patternmatcher"
	"golang.org/x/sys/unix"
)

// copySpec is one COPY or ADD, resolved: what to copy, from which tree,
// to where, as whom.
type copySpec struct {
	src      tree
	items    []*entry // resolved sources (files or directories of src)
	names    []string // the name each item takes inside a destination directory
	inline   []inlineFile
	dest     string // absolute path inside the image
	destDir  bool   // the destination is a directory (ends with "/", several sources, a pattern)
	uid, gid int
	chmod    *uint32
	exclude  *patternmatcher.PatternMatcher
	verify   bool // check each file against the context's index while copying
}

// inlineFile is a file whose content is in the build itself: a
// here-document or a downloaded URL.
type inlineFile struct {
	name  string
	data  io.Reader
	mode  uint32
	mtime unix.Timespec
}

// copyInto performs c in the writable view whose root is root. Paths in
// the view are resolved with the view as "/" (RESOLVE_IN_ROOT: symlinks
// in the destination lead where they would inside the image, never out
// of it); entries are created with *at calls, nothing from the source is
// followed.
func copyInto(root int, c *copySpec) error {
	n := len(c.items) + len(c.inline)
	single := n == 1 && !c.destDir
	if single && len(c.items) == 1 && c.items[0].isDir() {
		single = false // a directory's content goes into dest
	}
	if single {
		// One file: into dest when dest is a directory, else as dest.
		if fd, err := openInRoot(root, c.dest); err == nil {
			var st unix.Stat_t
			isDir := unix.Fstat(fd, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR
			unix.Close(fd)
			single = !isDir
		}
	}
	if single {
		dir, base := path.Split(c.dest)
		if base == "" {
			return fmt.Errorf("destination %q names no file", c.dest)
		}
		dfd, err := mkdirAllInRoot(root, dir, c.uid, c.gid)
		if err != nil {
			return fmt.Errorf("destination %s: %w", dir, err)
		}
		defer unix.Close(dfd)
		if len(c.items) == 1 {
			return c.place(dfd, base, c.items[0], "")
		}
		return c.placeInline(dfd, base, c.inline[0])
	}
	dfd, err := mkdirAllInRoot(root, c.dest, c.uid, c.gid)
	if err != nil {
		return fmt.Errorf("destination %s: %w", c.dest, err)
	}
	defer unix.Close(dfd)
	for i, e := range c.items {
		if e.isDir() {
			if err := c.children(dfd, e, ""); err != nil {
				return err
			}
			continue
		}
		if err := c.place(dfd, c.names[i], e, ""); err != nil {
			return err
		}
	}
	for _, f := range c.inline {
		if err := c.placeInline(dfd, f.name, f); err != nil {
			return err
		}
	}
	return nil
}

// children copies the entries of directory e into directory dfd; rel is
// e's path relative to the copied item (for --exclude).
func (c *copySpec) children(dfd int, e *entry, rel string) error {
	kids, err := c.src.list(e.rel)
	if err != nil {
		return err
	}
	for _, k := range kids {
		name := path.Base(k.rel)
		if err := c.place(dfd, name, k, path.Join(rel, name)); err != nil {
			return err
		}
	}
	return nil
}

// place creates entry e as name in dfd, replacing what is there unless
// both are directories (then they merge).
func (c *copySpec) place(dfd int, name string, e *entry, rel string) error {
	if c.exclude != nil && rel != "" {
		if ex, err := c.exclude.MatchesOrParentMatches(rel); err != nil {
			return err
		} else if ex {
			return nil
		}
	}
	mode := e.mode & 0o7777
	if c.chmod != nil {
		mode = *c.chmod
	}
	ts := []unix.Timespec{e.mtime, e.mtime}
	switch e.typ() {
	case unix.S_IFDIR:
		var st unix.Stat_t
		err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			if err := removeEntry(dfd, name); err != nil {
				return err
			}
		}
		if err := unix.Mkdirat(dfd, name, 0o700); err != nil && err != unix.EEXIST {
			return fmt.Errorf("%s: %w", e.rel, err)
		}
		sub, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", e.rel, err)
		}
		defer unix.Close(sub)
		if err := c.children(sub, e, rel); err != nil {
			return err
		}
		if err := unix.Fchown(sub, c.uid, c.gid); err != nil {
			return err
		}
		if err := unix.Fchmod(sub, mode); err != nil {
			return err
		}
		return unix.UtimesNanoAt(sub, ".", ts, 0)
	case unix.S_IFREG:
		f, err := c.src.open(e)
		if err != nil {
			return err
		}
		defer f.Close()
		var h hash.Hash
		var r io.Reader = f
		if c.verify {
			h = sha256.New()
			r = io.TeeReader(f, h)
		}
		if err := writeFile(dfd, name, r, e.size, c.uid, c.gid, mode, ts); err != nil {
			return fmt.Errorf("%s: %w", e.rel, err)
		}
		if h != nil && !bytes.Equal(h.Sum(nil), e.sum[:]) {
			return fmt.Errorf("%s: %w", e.rel, ErrContextChanged)
		}
		return nil
	case unix.S_IFLNK:
		if err := removeEntry(dfd, name); err != nil {
			return err
		}
		if err := unix.Symlinkat(e.link, dfd, name); err != nil {
			return fmt.Errorf("%s: %w", e.rel, err)
		}
		if err := unix.Fchownat(dfd, name, c.uid, c.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		return unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
	}
	return unsupported("copying %s from %s: a %s", e.rel, c.src.name(), typeName(e.mode))
}

func (c *copySpec) placeInline(dfd int, name string, f inlineFile) error {
	mode := f.mode
	if c.chmod != nil {
		mode = *c.chmod
	}
	if err := writeFile(dfd, name, f.data, -1, c.uid, c.gid, mode, []unix.Timespec{f.mtime, f.mtime}); err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	return nil
}

// writeFile creates regular file name in dfd (replacing a non-directory)
// with r's content (size bytes, or all of r when size < 0).
func writeFile(dfd int, name string, r io.Reader, size int64, uid, gid int, mode uint32, ts []unix.Timespec) error {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return fmt.Errorf("cannot replace directory %s with a file", name)
	}
	if err := removeEntry(dfd, name); err != nil {
		return err
	}
	fd, err := unix.Openat(dfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	if size >= 0 {
		r = io.LimitReader(r, size)
	}
	k, err := io.Copy(struct{ io.Writer }{f}, r)
	if err != nil {
		return err
	}
	if size >= 0 && k != size {
		return fmt.Errorf("%w: %d bytes read, %d expected", ErrContextChanged, k, size)
	}
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, mode); err != nil {
		return err
	}
	return unix.Futimes(fd, []unix.Timeval{unix.NsecToTimeval(ts[0].Nano()), unix.NsecToTimeval(ts[1].Nano())})
}

// removeEntry removes a non-directory name in dfd; a missing one is fine.
func removeEntry(dfd int, name string) error {
	err := unix.Unlinkat(dfd, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err == unix.EISDIR {
		return fmt.Errorf("cannot replace directory %s", name)
	}
	return err
}

// openInRoot opens directory or file p (absolute inside the view) with
// the view's root as "/".
func openInRoot(root int, p string) (int, error) {
	rel := strings.TrimPrefix(path.Clean("/"+p), "/")
	if rel == "" {
		return unix.Dup(root)
	}
	return unix.Openat2(root, rel, &unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
}

// mkdirAllInRoot opens directory p inside the view, creating what is
// missing (mode 0755, owned by uid:gid) as BuildKit does for a COPY's
// destination.
func mkdirAllInRoot(root int, p string, uid, gid int) (int, error) {
	clean := strings.TrimPrefix(path.Clean("/"+p), "/")
	how := &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	if clean == "" {
		return unix.Dup(root)
	}
	if fd, err := unix.Openat2(root, clean, how); err == nil {
		return fd, nil
	} else if !errors.Is(err, unix.ENOENT) {
		return -1, err
	}
	parts := strings.Split(clean, "/")
	cur, err := unix.Dup(root)
	if err != nil {
		return -1, err
	}
	for i, comp := range parts {
		next, err := unix.Openat2(root, strings.Join(parts[:i+1], "/"), how)
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(cur, comp, 0o755); err == nil || err == unix.EEXIST {
				if err == nil {
					err = unix.Fchownat(cur, comp, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
				}
				if err == nil {
					err = unix.Fchmodat(cur, comp, 0o755, 0)
				}
				if err == nil {
					next, err = unix.Openat2(root, strings.Join(parts[:i+1], "/"), how)
				}
			}
		}
		unix.Close(cur)
		if err != nil {
			return -1, fmt.Errorf("/%s: %w", strings.Join(parts[:i+1], "/"), err)
		}
		cur = next
	}
	return cur, nil
}

func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	}
	return "special file"
}

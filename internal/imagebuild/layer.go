package imagebuild

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

// Overlay markers, as overlayfs writes them in an upper directory mounted by
// the host's root: a deleted entry is a 0:0 character device, a directory
// that replaced a lower one carries trusted.overlay.opaque = "y".
const (
	xattrOpaque  = "trusted.overlay.opaque"
	xattrOverlay = "trusted.overlay."
)

// OCI whiteout names (image-spec layer.md).
const (
	whiteoutPrefix = ".wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// normalize turns the upper directory of a step into a layer directory in
// image form, in place: owners shifted down by shift (a RUN step's files
// belong to the sandbox's host ids, IDMapBase and up; a COPY step's are
// written as image ids, shift 0), set-id bits restored after the chown,
// and every overlay xattr but the opaque marker removed. An owner outside
// the sandbox's ids is an error. It reports whether the layer is empty.
// Nothing is followed; the root directory itself is not part of a layer.
func normalize(dir string, shift uint32) (empty bool, err error) {
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(root)
	n := 0
	err = normalizeDir(root, "", shift, &n)
	return n == 0, err
}

func normalizeDir(dfd int, rel string, shift uint32, n *int) error {
	names, err := readNames(dfd)
	if err != nil {
		return err
	}
	for _, name := range names {
		*n++
		p := rel + name
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		typ := st.Mode & unix.S_IFMT
		if typ == unix.S_IFCHR && st.Rdev == 0 {
			continue // a whiteout: its owner means nothing
		}
		uid, gid := st.Uid, st.Gid
		if shift != 0 {
			in := func(id uint32) bool { return id >= shift && id < shift+sandbox.IDMapSize }
			if !in(uid) || !in(gid) {
				return fmt.Errorf("/%s is owned by host ids %d:%d, outside the sandbox's", p, uid, gid)
			}
			uid, gid = uid-shift, gid-shift
			if err := unix.Fchownat(dfd, name, int(uid), int(gid), unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return fmt.Errorf("/%s: %w", p, err)
			}
			if typ != unix.S_IFLNK && st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
				// chown cleared the set-id bits: the entry is no symlink
				// (lstat said so, and nothing else writes the upper now).
				if err := unix.Fchmodat(dfd, name, st.Mode&0o7777, 0); err != nil {
					return fmt.Errorf("/%s: %w", p, err)
				}
			}
		}
		if typ != unix.S_IFDIR && typ != unix.S_IFREG {
			continue
		}
		flags := unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC
		if typ == unix.S_IFDIR {
			flags |= unix.O_DIRECTORY
		}
		fd, err := unix.Openat(dfd, name, flags, 0)
		if err != nil {
			return fmt.Errorf("/%s: %w", p, err)
		}
		err = stripOverlayXattrs(fd)
		if err == nil && typ == unix.S_IFDIR {
			err = normalizeDir(fd, p+"/", shift, n)
		}
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("/%s: %w", p, err)
		}
	}
	return nil
}

// stripOverlayXattrs removes overlayfs's private xattrs (origin, impure,
// …) except the opaque marker, which a layer keeps.
func stripOverlayXattrs(fd int) error {
	names, err := listXattrs(fd)
	if err != nil {
		return err
	}
	for _, x := range names {
		if strings.HasPrefix(x, xattrOverlay) && x != xattrOpaque {
			if err := unix.Fremovexattr(fd, x); err != nil && !errors.Is(err, unix.ENODATA) {
				return fmt.Errorf("removing %s: %w", x, err)
			}
		}
	}
	return nil
}

func listXattrs(fd int) ([]string, error) {
	sz, err := unix.Flistxattr(fd, nil)
	if err != nil || sz == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		return nil, err
	}
	buf := make([]byte, sz)
	sz, err = unix.Flistxattr(fd, buf)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, x := range strings.Split(string(buf[:sz]), "\x00") {
		if x != "" {
			out = append(out, x)
		}
	}
	return out, nil
}

// isOpaque reports whether directory fd is marked opaque.
func isOpaque(fd int) bool {
	buf := make([]byte, 8)
	n, err := unix.Fgetxattr(fd, xattrOpaque, buf)
	return err == nil && n == 1 && buf[0] == 'y'
}

// writeLayer writes the layer directory dir as an OCI layer tar stream
// (uncompressed): sorted, parents first, owners and modes as on disk,
// whiteout devices as ".wh.NAME" and opaque directories with a
// ".wh..wh..opq" entry, hard links within the layer as links. It returns
// the stream's sha256 (the layer's diff ID) and size.
func writeLayer(dir string, w io.Writer) (string, int64, error) {
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", 0, err
	}
	defer unix.Close(root)
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(w, h)}
	lw := &layerWriter{tw: tar.NewWriter(cw), links: map[[2]uint64]string{}, buf: make([]byte, 1<<20)}
	if err := lw.dir(root, ""); err != nil {
		return "", 0, err
	}
	if err := lw.tw.Close(); err != nil {
		return "", 0, err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), cw.n, nil
}

type layerWriter struct {
	tw    *tar.Writer
	links map[[2]uint64]string // (dev, ino) of a multiply linked file → its first name
	buf   []byte
}

func (lw *layerWriter) dir(dfd int, rel string) error {
	names, err := readNames(dfd)
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		p := rel + name
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		hdr := &tar.Header{Name: p, Mode: int64(st.Mode & 0o7777), Uid: int(st.Uid), Gid: int(st.Gid),
			ModTime: time.Unix(st.Mtim.Unix()).UTC()}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFCHR:
			if st.Rdev == 0 {
				hdr = &tar.Header{Name: rel + whiteoutPrefix + name, Typeflag: tar.TypeReg, Mode: 0o644, ModTime: hdr.ModTime}
			} else {
				hdr.Typeflag = tar.TypeChar
				hdr.Devmajor, hdr.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
			}
			if err := lw.tw.WriteHeader(hdr); err != nil {
				return err
			}
		case unix.S_IFBLK:
			hdr.Typeflag = tar.TypeBlock
			hdr.Devmajor, hdr.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
			if err := lw.tw.WriteHeader(hdr); err != nil {
				return err
			}
		case unix.S_IFIFO:
			hdr.Typeflag = tar.TypeFifo
			if err := lw.tw.WriteHeader(hdr); err != nil {
				return err
			}
		case unix.S_IFSOCK:
			// A socket left by a step: tar has no type for it.
		case unix.S_IFLNK:
			buf := make([]byte, 4096)
			k, err := unix.Readlinkat(dfd, name, buf)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, string(buf[:k])
			if err := lw.tw.WriteHeader(hdr); err != nil {
				return err
			}
		case unix.S_IFREG:
			if err := lw.file(dfd, name, hdr, &st); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
		case unix.S_IFDIR:
			fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
			err = lw.tw.WriteHeader(hdr)
			if err == nil && isOpaque(fd) {
				err = lw.tw.WriteHeader(&tar.Header{Name: p + "/" + whiteoutOpaque, Typeflag: tar.TypeReg, Mode: 0o644, ModTime: hdr.ModTime})
			}
			if err == nil {
				err = lw.dir(fd, p+"/")
			}
			unix.Close(fd)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (lw *layerWriter) file(dfd int, name string, hdr *tar.Header, st *unix.Stat_t) error {
	if st.Nlink > 1 {
		key := [2]uint64{st.Dev, st.Ino}
		if first, ok := lw.links[key]; ok {
			hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
			return lw.tw.WriteHeader(hdr)
		}
		lw.links[key] = hdr.Name
	}
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil {
		return err
	}
	if now.Ino != st.Ino || now.Size != st.Size {
		return errors.New("changed while read")
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
	if err := lw.tw.WriteHeader(hdr); err != nil {
		return err
	}
	k, err := io.CopyBuffer(lw.tw, io.LimitReader(onlyReader{f}, st.Size), lw.buf)
	if err == nil && k != st.Size {
		err = io.ErrUnexpectedEOF
	}
	return err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// onlyReader hides WriterTo so io.CopyBuffer uses the buffer.
type onlyReader struct{ io.Reader }

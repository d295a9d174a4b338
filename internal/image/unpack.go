package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// maxPathLen is the longest entry name or link target accepted (PATH_MAX).
const maxPathLen = 4096

// Whiteout markers of the OCI image spec (layer.md, "Whiteouts").
const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	whiteoutOpaque = ".wh..wh..opq"
)

// resolveBeneath are the openat2 resolve flags of every lookup in a rootfs:
// stay beneath the root, and follow no symlink and no /proc magic link.
const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// limits bound one unpack.
type limits struct {
	maxBytes   int64 // file content bytes, all layers together
	maxEntries int64 // tar entries, all layers together
}

// unpacker applies layers, in order, to one rootfs directory. It is used by
// one goroutine and is the only writer of its rootfs while it runs.
type unpacker struct {
	root    int // the rootfs, O_RDONLY|O_DIRECTORY
	lim     limits
	bytes   int64
	entries int64
	dropped []string
	// dirTimes holds each directory's times from its header, applied after
	// the last layer (creating entries inside a directory changes its mtime).
	dirTimes map[string][2]unix.Timespec
	layer    string              // digest of the layer being applied
	seen     map[string]struct{} // paths this layer wrote, with their parents
	hook     func(entries int64) error
	buf      []byte
}

// unpackImage writes img's flattened filesystem into rootfs, an existing empty
// directory, and returns the file content bytes written and the entries dropped.
func unpackImage(img v1.Image, rootfs string, lim limits, hook func(int64) error) (int64, []string, error) {
	return unpackFrom(img, rootfs, lim, hook, 0)
}

// unpackFrom applies img's layers after the first skip, which rootfs
// already holds applied, to rootfs.
func unpackFrom(img v1.Image, rootfs string, lim limits, hook func(int64) error, skip int) (int64, []string, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, nil, fmt.Errorf("reading layers: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return 0, nil, fmt.Errorf("reading image config: %w", err)
	}
	if len(cfg.RootFS.DiffIDs) != len(layers) {
		return 0, nil, fmt.Errorf("image config lists %d diff IDs for %d layers", len(cfg.RootFS.DiffIDs), len(layers))
	}
	if skip < 0 || skip > len(layers) {
		return 0, nil, fmt.Errorf("image has %d layers, %d of them already applied", len(layers), skip)
	}
	root, err := unix.Open(rootfs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, nil, fmt.Errorf("opening %s: %w", rootfs, err)
	}
	defer unix.Close(root)
	u := &unpacker{root: root, lim: lim, hook: hook, dirTimes: map[string][2]unix.Timespec{}, buf: make([]byte, 1<<20)}
	for i, l := range layers {
		if i < skip {
			continue
		}
		d, err := l.Digest()
		if err != nil {
			return 0, nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if err := u.layerFrom(l, d.String(), cfg.RootFS.DiffIDs[i].String()); err != nil {
			return 0, nil, err
		}
	}
	u.applyDirTimes()
	return u.bytes, u.dropped, nil
}

// layerFrom applies one layer, checking its content against the diff ID.
func (u *unpacker) layerFrom(l v1.Layer, digest, diffID string) error {
	rc, err := l.Uncompressed()
	if err != nil {
		return fmt.Errorf("layer %s: %w", digest, err)
	}
	defer rc.Close()
	h := sha256.New()
	r := io.TeeReader(rc, h)
	if err := u.applyLayer(digest, r); err != nil {
		return err
	}
	// Read to the end, so the hash covers the whole stream and the library
	// checks the compressed digest; bound it like file content.
	n, err := io.CopyN(io.Discard, r, u.lim.maxBytes-u.bytes+1)
	if err != nil && err != io.EOF {
		return fmt.Errorf("layer %s: %w", digest, err)
	}
	if u.bytes+n > u.lim.maxBytes {
		return fmt.Errorf("layer %s: %w: more than %d bytes", digest, ErrLimit, u.lim.maxBytes)
	}
	if err := rc.Close(); err != nil {
		return fmt.Errorf("layer %s: %w", digest, err)
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != diffID {
		return &TamperedError{Layer: digest, Want: diffID, Got: got}
	}
	return nil
}

// applyLayer applies one layer's uncompressed tar stream.
func (u *unpacker) applyLayer(digest string, r io.Reader) error {
	u.layer = digest
	u.seen = map[string]struct{}{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("layer %s: reading tar: %w", digest, err)
		}
		u.entries++
		if u.entries > u.lim.maxEntries {
			return fmt.Errorf("layer %s: %w: more than %d entries", digest, ErrLimit, u.lim.maxEntries)
		}
		if u.hook != nil {
			if err := u.hook(u.entries); err != nil {
				return err
			}
		}
		if err := u.apply(hdr, tr); err != nil {
			return err
		}
	}
}

// cleanName checks a tar entry name or hard link target and returns it
// cleaned and relative, or the reason it is refused.
func cleanName(name string) (string, string) {
	switch {
	case name == "":
		return "", "empty name"
	case strings.IndexByte(name, 0) >= 0:
		return "", "name contains NUL"
	case len(name) > maxPathLen:
		return "", "name longer than 4096 bytes"
	case strings.HasPrefix(name, "/"):
		return "", "absolute path"
	}
	for _, c := range strings.Split(name, "/") {
		if c == ".." {
			return "", "path has a .. component"
		}
	}
	return path.Clean(name), ""
}

func (u *unpacker) unsafe(hdr *tar.Header, reason string) error {
	return &UnsafeEntryError{Layer: u.layer, Entry: hdr.Name, Reason: reason}
}

// fail turns a system call error into an error naming the entry; errors that
// mean "this would leave the root" become UnsafeEntryErrors.
func (u *unpacker) fail(hdr *tar.Header, what string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP):
		return u.unsafe(hdr, what+": path goes through a symlink")
	case errors.Is(err, unix.EXDEV):
		return u.unsafe(hdr, what+": path escapes the root")
	case errors.Is(err, unix.ENOTDIR):
		return u.unsafe(hdr, what+": a parent is not a directory")
	}
	return fmt.Errorf("layer %s: entry %q: %s: %w", u.layer, hdr.Name, what, err)
}

// markSeen records p and its parents as written by the current layer.
func (u *unpacker) markSeen(p string) {
	for p != "." && p != "/" {
		if _, ok := u.seen[p]; ok {
			return
		}
		u.seen[p] = struct{}{}
		p = path.Dir(p)
	}
}

// apply applies one entry.
func (u *unpacker) apply(hdr *tar.Header, tr io.Reader) error {
	p, reason := cleanName(hdr.Name)
	if reason != "" {
		return u.unsafe(hdr, reason)
	}
	for k := range hdr.PAXRecords {
		if x, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok {
			u.dropped = append(u.dropped, fmt.Sprintf("/%s: xattr %s", p, x))
		}
	}
	if p == "." {
		if hdr.Typeflag != tar.TypeDir {
			return u.unsafe(hdr, "the root must be a directory")
		}
		return u.setMeta(hdr, u.root, ".", p, true)
	}
	dir, base := path.Dir(p), path.Base(p)
	if strings.HasPrefix(base, whiteoutPrefix) {
		return u.whiteout(hdr, dir, base)
	}
	switch hdr.Typeflag {
	case tar.TypeChar, tar.TypeBlock:
		u.dropped = append(u.dropped, "/"+p+": device")
		return nil
	case tar.TypeXGlobalHeader:
		return nil
	case tar.TypeDir, tar.TypeReg, tar.TypeSymlink, tar.TypeLink, tar.TypeFifo:
	default:
		return u.unsafe(hdr, fmt.Sprintf("unsupported entry type %q", hdr.Typeflag))
	}
	pfd, err := u.openDir(dir, true)
	if err != nil {
		return u.fail(hdr, "opening parent", err)
	}
	defer u.closeDir(pfd)
	u.markSeen(p)

	switch hdr.Typeflag {
	case tar.TypeDir:
		err := unix.Mkdirat(pfd, base, 0o700)
		if err == unix.EEXIST {
			var st unix.Stat_t
			if err = unix.Fstatat(pfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFDIR {
				if err = removeAt(pfd, base); err == nil {
					err = unix.Mkdirat(pfd, base, 0o700)
				}
			}
		}
		if err != nil {
			return u.fail(hdr, "creating directory", err)
		}
		return u.setMeta(hdr, pfd, base, p, true)

	case tar.TypeReg:
		if hdr.Size < 0 {
			return u.unsafe(hdr, "negative size")
		}
		if u.bytes+hdr.Size > u.lim.maxBytes {
			return fmt.Errorf("layer %s: entry %q: %w: more than %d bytes", u.layer, hdr.Name, ErrLimit, u.lim.maxBytes)
		}
		if err := removeAt(pfd, base); err != nil {
			return u.fail(hdr, "replacing", err)
		}
		fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return u.fail(hdr, "creating file", err)
		}
		f := os.NewFile(uintptr(fd), p)
		n, err := io.CopyBuffer(writerOnly{f}, io.LimitReader(tr, hdr.Size), u.buf)
		u.bytes += n
		if err == nil && n != hdr.Size {
			err = io.ErrUnexpectedEOF
		}
		if err == nil {
			err = unix.Fchown(fd, hdr.Uid, hdr.Gid)
		}
		if err == nil {
			err = unix.Fchmod(fd, uint32(hdr.Mode)&0o7777)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return u.fail(hdr, "writing file", err)
		}
		return u.setTimes(hdr, pfd, base)

	case tar.TypeSymlink:
		if hdr.Linkname == "" || len(hdr.Linkname) > maxPathLen || strings.IndexByte(hdr.Linkname, 0) >= 0 {
			return u.unsafe(hdr, "symlink target empty, too long or with NUL")
		}
		if err := removeAt(pfd, base); err != nil {
			return u.fail(hdr, "replacing", err)
		}
		if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
			return u.fail(hdr, "creating symlink", err)
		}
		if err := unix.Fchownat(pfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return u.fail(hdr, "chown", err)
		}
		return u.setTimes(hdr, pfd, base)

	case tar.TypeLink:
		t, reason := cleanName(hdr.Linkname)
		if reason != "" {
			return u.unsafe(hdr, "hard link target: "+reason)
		}
		if t == "." || t == p {
			return u.unsafe(hdr, "hard link to the root or to itself")
		}
		tfd, err := u.openDir(path.Dir(t), false)
		if err == unix.ENOENT {
			return u.unsafe(hdr, "hard link target is not an entry of the rootfs")
		}
		if err != nil {
			return u.fail(hdr, "opening hard link target", err)
		}
		defer u.closeDir(tfd)
		var st unix.Stat_t
		if err := unix.Fstatat(tfd, path.Base(t), &st, unix.AT_SYMLINK_NOFOLLOW); err == unix.ENOENT {
			return u.unsafe(hdr, "hard link target is not an entry of the rootfs")
		} else if err != nil {
			return u.fail(hdr, "hard link target", err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return u.unsafe(hdr, "hard link to a directory")
		}
		if err := removeAt(pfd, base); err != nil {
			return u.fail(hdr, "replacing", err)
		}
		// Flags 0: a symlink target is linked itself, never followed.
		if err := unix.Linkat(tfd, path.Base(t), pfd, base, 0); err != nil {
			return u.fail(hdr, "creating hard link", err)
		}
		return nil

	default: // tar.TypeFifo
		if err := removeAt(pfd, base); err != nil {
			return u.fail(hdr, "replacing", err)
		}
		if err := unix.Mknodat(pfd, base, unix.S_IFIFO|0o600, 0); err != nil {
			return u.fail(hdr, "creating fifo", err)
		}
		return u.setMeta(hdr, pfd, base, p, false)
	}
}

// setMeta sets owner, mode and times of the entry base in dirfd, which the
// unpacker has just created and knows is not a symlink.
func (u *unpacker) setMeta(hdr *tar.Header, dirfd int, base, p string, isDir bool) error {
	if err := unix.Fchownat(dirfd, base, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return u.fail(hdr, "chown", err)
	}
	// After chown, which clears set-id bits.
	mode := uint32(hdr.Mode) & 0o7777
	err := unix.Fchmodat(dirfd, base, mode, unix.AT_SYMLINK_NOFOLLOW)
	if err == unix.EOPNOTSUPP { // no fchmodat2 (Linux < 6.6): check, then plain fchmodat
		var st unix.Stat_t
		if err = unix.Fstatat(dirfd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil {
			if st.Mode&unix.S_IFMT == unix.S_IFLNK {
				return u.unsafe(hdr, "entry became a symlink")
			}
			err = unix.Fchmodat(dirfd, base, mode, 0)
		}
	}
	if err != nil {
		return u.fail(hdr, "chmod", err)
	}
	if isDir {
		u.dirTimes[p] = headerTimes(hdr)
		return nil
	}
	return u.setTimes(hdr, dirfd, base)
}

func headerTimes(hdr *tar.Header) [2]unix.Timespec {
	m := unix.NsecToTimespec(hdr.ModTime.UnixNano())
	a := m
	if !hdr.AccessTime.IsZero() {
		a = unix.NsecToTimespec(hdr.AccessTime.UnixNano())
	}
	return [2]unix.Timespec{a, m}
}

func (u *unpacker) setTimes(hdr *tar.Header, dirfd int, base string) error {
	ts := headerTimes(hdr)
	if err := unix.UtimesNanoAt(dirfd, base, ts[:], unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return u.fail(hdr, "setting times", err)
	}
	return nil
}

// applyDirTimes sets each directory's times from its last header. Entries
// that are gone or no longer directories are skipped.
func (u *unpacker) applyDirTimes() {
	for p, ts := range u.dirTimes {
		dfd, err := u.openDir(path.Dir(p), false)
		if err != nil {
			continue
		}
		base := path.Base(p)
		var st unix.Stat_t
		if unix.Fstatat(dfd, base, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			_ = unix.UtimesNanoAt(dfd, base, ts[:], unix.AT_SYMLINK_NOFOLLOW)
		}
		u.closeDir(dfd)
	}
}

// whiteout applies a ".wh." entry of directory dir.
func (u *unpacker) whiteout(hdr *tar.Header, dir, base string) error {
	if base == whiteoutOpaque {
		fd := u.root
		if dir != "." {
			var err error
			fd, err = openBeneathFlags(u.root, dir, unix.O_RDONLY)
			if errors.Is(err, unix.ENOENT) {
				return nil
			}
			if err != nil {
				return u.fail(hdr, "opening opaque directory", err)
			}
			defer u.closeDir(fd)
		}
		if err := u.clearLower(fd, dir); err != nil {
			return u.fail(hdr, "clearing opaque directory", err)
		}
		return nil
	}
	if strings.HasPrefix(base, whiteoutMeta) {
		return nil // other AUFS metadata (.wh..wh.plnk, …): nothing to apply
	}
	name := strings.TrimPrefix(base, whiteoutPrefix)
	if name == "" || name == "." || name == ".." {
		return u.unsafe(hdr, "whiteout names no entry of its directory")
	}
	if _, ok := u.seen[path.Join(dir, name)]; ok {
		return nil // added by this layer: whiteouts apply to lower layers
	}
	fd, err := u.openDir(dir, false)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return u.fail(hdr, "opening whiteout directory", err)
	}
	defer u.closeDir(fd)
	if err := removeAt(fd, name); err != nil {
		return u.fail(hdr, "applying whiteout", err)
	}
	return nil
}

// clearLower removes from directory fd (at path p) every entry the current
// layer did not write; directories it wrote are cleared the same way.
func (u *unpacker) clearLower(fd int, p string) error {
	names, err := readNames(fd)
	if err != nil {
		return err
	}
	for _, n := range names {
		cp := path.Join(p, n)
		if _, ok := u.seen[cp]; !ok {
			if err := removeAt(fd, n); err != nil {
				return err
			}
			continue
		}
		sub, err := unix.Openat(fd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.ENOTDIR || err == unix.ELOOP {
			continue
		}
		if err != nil {
			return err
		}
		err = u.clearLower(sub, cp)
		unix.Close(sub)
		if err != nil {
			return err
		}
	}
	return nil
}

// openDir opens directory p of the rootfs beneath the root, through no
// symlink; with create, missing directories are made (0755, root-owned).
// The result is closed with closeDir.
func (u *unpacker) openDir(p string, create bool) (int, error) {
	if p == "." {
		return u.root, nil
	}
	fd, err := openBeneath(u.root, p)
	if err != unix.ENOENT || !create {
		return fd, err
	}
	cur := u.root
	defer func() { u.closeDir(cur) }()
	for _, c := range strings.Split(p, "/") {
		if err := unix.Mkdirat(cur, c, 0o755); err != nil && err != unix.EEXIST {
			return -1, err
		}
		next, err := openBeneath(cur, c)
		if err != nil {
			return -1, err
		}
		u.closeDir(cur)
		cur = next
	}
	fd, cur = cur, u.root
	return fd, nil
}

func (u *unpacker) closeDir(fd int) {
	if fd != u.root && fd >= 0 {
		unix.Close(fd)
	}
}

// openBeneath opens directory p beneath dirfd with openat2, refusing
// symlinks, magic links and escapes.
func openBeneath(dirfd int, p string) (int, error) {
	return openBeneathFlags(dirfd, p, unix.O_PATH)
}

// openBeneathFlags is openBeneath with O_PATH or O_RDONLY.
func openBeneathFlags(dirfd int, p string, flags int) (int, error) {
	how := &unix.OpenHow{Flags: uint64(flags | unix.O_DIRECTORY | unix.O_CLOEXEC), Resolve: resolveBeneath}
	for range 16 {
		fd, err := unix.Openat2(dirfd, p, how)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		return fd, err
	}
	return -1, unix.EAGAIN
}

// removeAt removes name in dirfd, recursively if it is a directory, without
// following symlinks. A missing name is not an error.
func removeAt(dirfd int, name string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	if err == nil || err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR {
		return err
	}
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	names, err := readNames(fd)
	for _, n := range names {
		if err == nil {
			err = removeAt(fd, n)
		}
	}
	unix.Close(fd)
	if err != nil {
		return err
	}
	return unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
}

// readNames lists directory fd (not closing it).
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

// writerOnly hides ReadFrom so io.CopyBuffer uses the unpacker's buffer.
type writerOnly struct{ io.Writer }

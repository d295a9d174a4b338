package workspace

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"sort"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Layer is one overlay of a sandbox: its mount point inside (Dst, absolute,
// clean) and its upper directory on the host. A Layer is a plain value; the
// package never keeps it.
type Layer struct {
	Dst   string   // "/" for the root layer
	Upper string   // host path of the overlay upperdir
	Hide  []string // absolute paths inside, read from neither this layer nor below them: mount points of other layers or of the harness (e.g. "/proc", "/app" in the root layer)
}

// Limits bound a changeset. A zero field means its default (DefaultLimits); a
// negative one is an error.
type Limits struct {
	MaxFiles   int   // entries of any kind, dropped ones included
	MaxBytes   int64 // total content bytes of files
	MaxDepth   int   // path components of an entry's absolute path ("/a/b" is 2)
	MaxPathLen int   // bytes of an entry's absolute path, and of a symlink target
}

// DefaultLimits returns 20,000 entries, 1 GiB, 64 levels, 4096 bytes.
func DefaultLimits() Limits {
	return Limits{MaxFiles: 20_000, MaxBytes: 1 << 30, MaxDepth: 64, MaxPathLen: 4096}
}

func (l Limits) resolve() (Limits, error) {
	if l.MaxFiles < 0 || l.MaxBytes < 0 || l.MaxDepth < 0 || l.MaxPathLen < 0 {
		return l, fmt.Errorf("%w: %+v", ErrLimits, l)
	}
	d := DefaultLimits()
	if l.MaxFiles == 0 {
		l.MaxFiles = d.MaxFiles
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxPathLen == 0 {
		l.MaxPathLen = d.MaxPathLen
	}
	return l, nil
}

// unlimited is used where another bound applies (Apply checks every entry
// against the expected changeset before it reads a byte of content).
var unlimited = Limits{MaxFiles: math.MaxInt, MaxBytes: math.MaxInt64, MaxDepth: math.MaxInt, MaxPathLen: math.MaxInt}

// Kind is the type of an Entry.
type Kind string

const (
	KindFile     Kind = "file"
	KindDir      Kind = "dir"
	KindSymlink  Kind = "symlink"
	KindWhiteout Kind = "whiteout" // the path was deleted
)

// Entry is one changed path. It is a plain value.
type Entry struct {
	Path   string // absolute inside the sandbox, clean, e.g. "/app/main.py"
	Kind   Kind
	Mode   uint32 // permission bits and sticky (setuid and setgid always cleared); 0777 for symlinks; 0 for whiteouts
	Size   int64  // files
	SHA256 string // files: hex of content
	Link   string // symlinks: the target, verbatim
	Opaque bool   // dirs: replaced, not merged (the lower's content is hidden)
}

// Dropped is an entry of an upper that Extract left out of the changeset.
type Dropped struct{ Path, Reason string }

// Changeset describes an archive. Entries are sorted by Path (byte order);
// Dropped is sorted by Path and only filled by Extract (it is not in the
// archive). A Changeset is a plain value, safe to share once returned.
type Changeset struct {
	Entries []Entry
	Dropped []Dropped
	Files   int    // number of file entries
	Bytes   int64  // total content bytes
	Digest  string // "sha256:" + hex of the archive bytes
}

// The archive.
//
// A tar stream in the order of Entry.Path (byte order), every header with
// uid/gid 0, no user or group names, mtime 0 and no other times, no xattrs.
// Names are relative to "/" ("app/main.py"); directories end in "/". Each
// header is USTAR when USTAR can hold it, else PAX with only the records
// needed (path, linkpath, size), decided per header by writeHeader. Types:
//
//	file       regular file, its mode and content
//	dir        directory, its mode; if Opaque, immediately followed by the
//	           empty mode-0 regular file "dir/.wh..wh..opq" (OCI opaque marker)
//	symlink    symlink, mode 0777, the target verbatim
//	whiteout   empty mode-0 regular file "dir/.wh.NAME" (OCI whiteout),
//	           sorted by its Entry.Path "/dir/NAME", not by its tar name
//
// The opaque marker is not an Entry: it belongs to the directory header just
// before it, and ReadArchive refuses it anywhere else. No entry of an upper
// named ".wh.*" is ever written (Dropped), so the two markers are unambiguous.
// The root directory of a layer is never an entry: it belongs to the harness.
const (
	whPrefix      = ".wh."
	opaqueMarker  = ".wh..wh..opq"
	overlayPrefix = "trusted.overlay."
	xattrOpaque   = overlayPrefix + "opaque"
	permMask      = 0o1777 // rwx for all plus sticky; never setuid or setgid
)

var epoch = time.Unix(0, 0)

// archiveName is the tar name of e (for a dir, without the opaque marker).
func archiveName(e *Entry) string {
	rel := e.Path[1:]
	switch e.Kind {
	case KindDir:
		return rel + "/"
	case KindWhiteout:
		dir, base := path.Split(rel)
		return dir + whPrefix + base
	}
	return rel
}

// writeHeaders writes the header(s) of e: the one header, plus the opaque
// marker after an opaque dir. The content of a file follows.
func writeHeaders(tw *tar.Writer, e *Entry) error {
	h := &tar.Header{Name: archiveName(e), ModTime: epoch}
	switch e.Kind {
	case KindFile:
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, int64(e.Mode), e.Size
	case KindDir:
		h.Typeflag, h.Mode = tar.TypeDir, int64(e.Mode)
	case KindSymlink:
		h.Typeflag, h.Mode, h.Linkname = tar.TypeSymlink, 0o777, e.Link
	case KindWhiteout:
		h.Typeflag = tar.TypeReg
	default:
		return fmt.Errorf("entry %q: unknown kind %q", e.Path, e.Kind)
	}
	if err := writeHeader(tw, h); err != nil {
		return err
	}
	if e.Kind == KindDir && e.Opaque {
		return writeHeader(tw, &tar.Header{Name: h.Name + opaqueMarker, Typeflag: tar.TypeReg, ModTime: epoch})
	}
	return nil
}

// writeHeader writes h as USTAR if archive/tar can, else as PAX. The format is
// always set explicitly, so the choice is ours and not the writer's default.
func writeHeader(tw *tar.Writer, h *tar.Header) error {
	h.Format = tar.FormatUSTAR
	if tar.NewWriter(io.Discard).WriteHeader(h) != nil {
		h.Format = tar.FormatPAX
	}
	return tw.WriteHeader(h)
}

// Extract reads the uppers of layers and writes the canonical archive to w.
// Every process that could write to the uppers must be dead. Extract never
// follows a symlink, never opens anything but directories and regular files
// (chosen from lstat and re-checked by fstat on the open descriptor), and
// stops at the first limit passed with a *LimitError. On error, what was
// written to w is garbage.
func Extract(layers []Layer, lim Limits, w io.Writer) (*Changeset, error) {
	lim, err := lim.resolve()
	if err != nil {
		return nil, err
	}
	if err := checkLayers(layers); err != nil {
		return nil, err
	}
	x := &extractor{lim: lim, layers: layers, lastDir: -1}
	defer x.close()
	for i := range layers {
		if err := x.walkLayer(i); err != nil {
			return nil, err
		}
	}
	sort.Slice(x.items, func(i, j int) bool { return x.items[i].Path < x.items[j].Path })
	sort.Slice(x.dropped, func(i, j int) bool { return x.dropped[i].Path < x.dropped[j].Path })
	if testHookAfterWalk != nil {
		testHookAfterWalk()
	}
	return x.write(w)
}

// testHookAfterWalk lets tests change an upper between the walk and the read.
var testHookAfterWalk func()

type extractor struct {
	lim     Limits
	layers  []Layer
	roots   []int    // upper directory fds, by layer
	rootDev []uint64 // their st_dev
	hidden  map[string]bool
	count   int
	bytes   int64
	items   []item
	dropped []Dropped

	lastDir    int // layer of dirFd, or -1
	lastDirRel string
	dirFd      int
}

// item is an Entry and where it was found, to open it again beneath its root.
type item struct {
	Entry
	layer    int
	rel      string // path relative to the upper
	dev, ino uint64
}

func (x *extractor) close() {
	for _, fd := range x.roots {
		unix.Close(fd)
	}
	if x.lastDir >= 0 {
		unix.Close(x.dirFd)
	}
}

func (x *extractor) walkLayer(li int) error {
	l := x.layers[li]
	fd, err := unix.Open(l.Upper, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening upper %s: %w", l.Upper, err)
	}
	x.roots = append(x.roots, fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("upper %s: %w", l.Upper, err)
	}
	x.rootDev = append(x.rootDev, st.Dev)
	x.hidden = map[string]bool{}
	for _, h := range l.Hide {
		x.hidden[h] = true
	}
	for _, o := range x.layers {
		if o.Dst != l.Dst && under(o.Dst, l.Dst) {
			x.hidden[o.Dst] = true // another layer is mounted there
		}
	}
	return x.walkDir(li, fd, l.Dst, "", depth(l.Dst))
}

// walkDir records the entries of the directory open as fd. Recursion is
// bounded by MaxDepth, which is checked before descending.
func (x *extractor) walkDir(li, fd int, dir, rel string, d int) error {
	buf := make([]byte, 16<<10)
	var names []string
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading directory %q: %w", dir, err)
		}
		if n <= 0 {
			return nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names[:0])
		for _, name := range names {
			if err := x.visit(li, fd, dir, rel, d+1, name); err != nil {
				return err
			}
		}
	}
}

func (x *extractor) visit(li, fd int, dir, rel string, d int, name string) error {
	p := joinPath(dir, name)
	if x.hidden[p] {
		return nil
	}
	x.count++
	switch {
	case x.count > x.lim.MaxFiles:
		return &LimitError{What: "files", Limit: int64(x.lim.MaxFiles), Path: p}
	case len(p) > x.lim.MaxPathLen:
		return &LimitError{What: "path length", Limit: int64(x.lim.MaxPathLen), Path: p}
	case d > x.lim.MaxDepth:
		return &LimitError{What: "depth", Limit: int64(x.lim.MaxDepth), Path: p}
	}
	if strings.HasPrefix(name, whPrefix) {
		x.drop(p, "name begins with .wh. (reserved for whiteouts)")
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("lstat %q: %w", p, err)
	}
	if st.Dev != x.rootDev[li] {
		return fmt.Errorf("%q: %w", p, ErrOtherFilesystem)
	}
	it := item{Entry: Entry{Path: p, Mode: st.Mode & permMask}, layer: li, rel: joinRel(rel, name), dev: st.Dev, ino: st.Ino}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		it.Kind, it.Size = KindFile, st.Size
		if st.Size > x.lim.MaxBytes-x.bytes {
			return &LimitError{What: "bytes", Limit: x.lim.MaxBytes, Path: p}
		}
		x.bytes += st.Size
		// Overlay attributes of files are checked on the descriptor that reads them.
	case unix.S_IFDIR:
		it.Kind = KindDir
		dfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != nil {
			return fmt.Errorf("opening directory %q: %w", p, err)
		}
		defer unix.Close(dfd)
		if err := sameFile(dfd, &st, p); err != nil {
			return err
		}
		if it.Opaque, err = checkOverlayXattrs(p, true, fdXattrs(dfd)); err != nil {
			return err
		}
		x.items = append(x.items, it)
		return x.walkDir(li, dfd, p, it.rel, d)
	case unix.S_IFLNK:
		it.Kind, it.Mode = KindSymlink, 0o777
		buf := make([]byte, x.lim.MaxPathLen+1)
		n, err := unix.Readlinkat(fd, name, buf)
		if err != nil {
			return fmt.Errorf("readlink %q: %w", p, err)
		}
		if n > x.lim.MaxPathLen {
			return &LimitError{What: "path length", Limit: int64(x.lim.MaxPathLen), Path: p}
		}
		it.Link = string(buf[:n])
		if _, err := checkOverlayXattrs(p, false, atXattrs(fd, name)); err != nil {
			return err
		}
	case unix.S_IFCHR:
		if st.Rdev != 0 {
			x.drop(p, fmt.Sprintf("character device %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)))
			return nil
		}
		it.Kind, it.Mode = KindWhiteout, 0
		if _, err := checkOverlayXattrs(p, false, atXattrs(fd, name)); err != nil {
			return err
		}
	case unix.S_IFBLK:
		x.drop(p, fmt.Sprintf("block device %d:%d", unix.Major(st.Rdev), unix.Minor(st.Rdev)))
		return nil
	case unix.S_IFIFO:
		x.drop(p, "fifo")
		return nil
	case unix.S_IFSOCK:
		x.drop(p, "socket")
		return nil
	default:
		x.drop(p, fmt.Sprintf("unknown file type %#o", st.Mode&unix.S_IFMT))
		return nil
	}
	x.items = append(x.items, it)
	return nil
}

func (x *extractor) drop(p, reason string) { x.dropped = append(x.dropped, Dropped{p, reason}) }

// write writes the archive of the sorted items, reading each file again
// beneath its root and checking it is the one the walk saw.
func (x *extractor) write(w io.Writer) (*Changeset, error) {
	sum := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(w, sum))
	cs := &Changeset{Entries: make([]Entry, 0, len(x.items)), Dropped: x.dropped}
	for i := range x.items {
		it := &x.items[i]
		if err := writeHeaders(tw, &it.Entry); err != nil {
			return nil, fmt.Errorf("writing changeset archive: %w", err)
		}
		if it.Kind == KindFile {
			h, err := x.copyFile(tw, it)
			if err != nil {
				return nil, err
			}
			it.SHA256 = h
			cs.Files++
			cs.Bytes += it.Size
		}
		cs.Entries = append(cs.Entries, it.Entry)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("writing changeset archive: %w", err)
	}
	cs.Digest = "sha256:" + hex.EncodeToString(sum.Sum(nil))
	return cs, nil
}

// copyFile copies the content of it into tw and returns its sha256. The file
// is lstat-ed in its parent (opened beneath the root without symlinks), must
// still be the regular file of the walk, and must not change size.
func (x *extractor) copyFile(tw io.Writer, it *item) (string, error) {
	dirRel, name := path.Split(it.rel)
	pfd, err := x.parentFd(it.layer, strings.TrimSuffix(dirRel, "/"))
	if err != nil {
		return "", fmt.Errorf("opening parent of %q: %w", it.Path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(pfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return "", fmt.Errorf("lstat %q: %w", it.Path, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Dev != it.dev || st.Ino != it.ino {
		return "", fmt.Errorf("%q: %w", it.Path, ErrChanged)
	}
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("opening %q: %w", it.Path, err)
	}
	defer unix.Close(fd)
	if err := sameFile(fd, &st, it.Path); err != nil {
		return "", err
	}
	if err := unix.Fstat(fd, &st); err != nil || st.Size != it.Size {
		return "", fmt.Errorf("%q: %w", it.Path, ErrChanged)
	}
	if _, err := checkOverlayXattrs(it.Path, false, fdXattrs(fd)); err != nil {
		return "", err
	}
	sum := sha256.New()
	if err := copyExact(io.MultiWriter(tw, sum), fdReader(fd), it.Size); err != nil {
		return "", fmt.Errorf("reading %q: %w", it.Path, err)
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// parentFd returns a descriptor of the directory rel of layer li, opened
// beneath its root with no symlink, magic link or mount crossing. The last
// one is cached (sorted entries come mostly directory by directory).
func (x *extractor) parentFd(li int, rel string) (int, error) {
	if x.lastDir == li && x.lastDirRel == rel {
		return x.dirFd, nil
	}
	if x.lastDir >= 0 {
		unix.Close(x.dirFd)
		x.lastDir = -1
	}
	open := rel
	if open == "" {
		open = "."
	}
	fd, err := openBeneath(x.roots[li], open, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return -1, err
	}
	x.lastDir, x.lastDirRel, x.dirFd = li, rel, fd
	return fd, nil
}

// copyExact copies exactly n bytes from r to w: fewer (the file shrank) or
// more (it grew) is ErrChanged.
func copyExact(w io.Writer, r io.Reader, n int64) error {
	got, err := io.CopyBuffer(w, io.LimitReader(r, n), make([]byte, 64<<10))
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("%w: read %d of %d bytes", ErrChanged, got, n)
	}
	var one [1]byte
	if m, err := r.Read(one[:]); m > 0 {
		return fmt.Errorf("%w: more than %d bytes", ErrChanged, n)
	} else if err != nil && err != io.EOF {
		return err
	}
	return nil
}

// fdReader reads a descriptor with read(2); it returns io.EOF at the end.
type fdReader int

func (f fdReader) Read(p []byte) (int, error) {
	for {
		n, err := unix.Read(int(f), p)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 && len(p) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// openBeneath opens rel beneath the directory dirfd: no symlink anywhere
// (not even the last component), no "..", no mount crossing.
func openBeneath(dirfd int, rel string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Openat2(dirfd, rel, &unix.OpenHow{
			Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC),
			Mode:    uint64(mode),
			Resolve: resolveFlags,
		})
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		return fd, err
	}
}

// sameFile checks that fd is the inode st describes.
func sameFile(fd int, st *unix.Stat_t, p string) error {
	var fst unix.Stat_t
	if err := unix.Fstat(fd, &fst); err != nil {
		return fmt.Errorf("fstat %q: %w", p, err)
	}
	if fst.Dev != st.Dev || fst.Ino != st.Ino || fst.Mode&unix.S_IFMT != st.Mode&unix.S_IFMT {
		return fmt.Errorf("%q: %w", p, ErrChanged)
	}
	return nil
}

// checkOverlayXattrs fails closed on overlay metadata it does not know, and
// reports whether a directory is opaque. origin, impure, nlink and uuid are
// overlayfs bookkeeping that no merged view depends on; "x" as an opaque
// value marks a directory holding xwhiteouts and is not opaque.
func checkOverlayXattrs(p string, dir bool, xa xattrs) (opaque bool, err error) {
	names, err := xa.list()
	if err != nil {
		return false, fmt.Errorf("listing xattrs of %q: %w", p, err)
	}
	for _, k := range names {
		if !strings.HasPrefix(k, overlayPrefix) {
			continue // never carried
		}
		switch strings.TrimPrefix(k, overlayPrefix) {
		case "origin", "impure", "nlink", "uuid":
			continue
		case "opaque":
			if !dir || xa.get == nil {
				break
			}
			v, err := xa.get(k)
			if err != nil {
				return false, fmt.Errorf("reading %s of %q: %w", k, p, err)
			}
			switch v {
			case "y":
				opaque = true
				continue
			case "x":
				continue
			}
			return false, fmt.Errorf("%q: %w: %s=%q", p, ErrOverlayMetadata, k, v)
		}
		return false, fmt.Errorf("%q: %w: %s", p, ErrOverlayMetadata, k)
	}
	return opaque, nil
}

type xattrs struct {
	list func() ([]string, error)
	get  func(name string) (string, error) // nil where values are never needed
}

func fdXattrs(fd int) xattrs {
	return xattrs{
		list: func() ([]string, error) {
			return listXattrs(func(b []byte) (int, error) { return unix.Flistxattr(fd, b) })
		},
		get: func(name string) (string, error) {
			buf := make([]byte, 64)
			n, err := unix.Fgetxattr(fd, name, buf)
			if err == unix.ERANGE {
				return "(over 64 bytes)", nil // longer than any value we accept
			}
			return string(buf[:max(n, 0)]), err
		},
	}
}

// atXattrs lists the xattrs of name in dirfd without following or opening it
// (listxattrat, Linux 6.13). On older kernels symlinks and whiteouts are not
// checked: overlayfs puts no redirect, metacopy or opaque on them.
func atXattrs(dirfd int, name string) xattrs {
	return xattrs{list: func() ([]string, error) {
		names, err := listXattrs(func(b []byte) (int, error) { return listxattrat(dirfd, name, b) })
		if err == unix.ENOSYS {
			return nil, nil
		}
		return names, err
	}}
}

func listxattrat(dirfd int, name string, dest []byte) (int, error) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return 0, err
	}
	var d unsafe.Pointer
	if len(dest) > 0 {
		d = unsafe.Pointer(&dest[0])
	}
	n, _, e := unix.Syscall6(unix.SYS_LISTXATTRAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)),
		unix.AT_SYMLINK_NOFOLLOW, uintptr(d), uintptr(len(dest)), 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func listXattrs(list func([]byte) (int, error)) ([]string, error) {
	for range 8 {
		n, err := list(nil)
		if err != nil || n == 0 {
			return nil, err
		}
		buf := make([]byte, n)
		n, err = list(buf)
		if errors.Is(err, unix.ERANGE) {
			continue // grew in between
		}
		if err != nil {
			return nil, err
		}
		return strings.Split(strings.TrimSuffix(string(buf[:n]), "\x00"), "\x00"), nil
	}
	return nil, unix.ERANGE
}

// checkLayers validates layers: absolute clean paths, one layer per Dst.
func checkLayers(layers []Layer) error {
	if len(layers) == 0 {
		return fmt.Errorf("%w: none given", ErrLayers)
	}
	seen := map[string]bool{}
	for _, l := range layers {
		if !cleanAbs(l.Dst) || l.Upper == "" || seen[l.Dst] {
			return fmt.Errorf("%w: layer %q (upper %q): Dst must be absolute, clean and unique, Upper set", ErrLayers, l.Dst, l.Upper)
		}
		seen[l.Dst] = true
		for _, h := range l.Hide {
			if !cleanAbs(h) {
				return fmt.Errorf("%w: layer %q: hidden path %q not absolute and clean", ErrLayers, l.Dst, h)
			}
		}
	}
	return nil
}

func cleanAbs(p string) bool { return strings.HasPrefix(p, "/") && path.Clean(p) == p }

// under reports whether p is dir or below it, on component boundaries.
func under(p, dir string) bool {
	return dir == "/" || p == dir || strings.HasPrefix(p, dir+"/")
}

// layerOf returns the layer with the longest Dst that p is under, or -1.
func layerOf(layers []Layer, p string) int {
	best := -1
	for i, l := range layers {
		if under(p, l.Dst) && (best < 0 || len(l.Dst) > len(layers[best].Dst)) {
			best = i
		}
	}
	return best
}

func joinPath(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

func joinRel(rel, name string) string {
	if rel == "" {
		return name
	}
	return rel + "/" + name
}

// depth is the number of components of an absolute clean path.
func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

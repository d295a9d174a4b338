package workspace

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ReadArchive parses and checks an archive written by Extract (see Reader)
// and returns what it holds, file hashes included. Dropped is empty: dropped
// entries are not in the archive.
func ReadArchive(r io.Reader, lim Limits) (*Changeset, error) {
	ar := NewReader(r, lim)
	cs := &Changeset{}
	for {
		e, err := ar.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if e.Kind == KindFile {
			if _, err := io.Copy(io.Discard, ar); err != nil {
				return nil, err
			}
			cs.Files++
			cs.Bytes += e.Size
		}
		cs.Entries = append(cs.Entries, *e)
	}
	cs.Digest = ar.Digest()
	return cs, nil
}

// Reader reads an archive written by Extract, entry by entry, like
// archive/tar.Reader. Each header is checked before it is returned (type,
// name, mode, PAX records, order, limits); at the end the whole stream must be
// byte for byte what Extract writes for these entries, else a *FormatError
// with ErrNotCanonical. Errors are sticky. A Reader is not safe for
// concurrent use.
type Reader struct {
	lim    Limits
	in     *hashReader
	tr     *tar.Reader
	canon  *tar.Writer // re-encodes every entry; must hash like the input
	canonH hash.Hash
	ahead  *tar.Header // read past a directory, looking for its opaque marker

	cur  *Entry
	left int64 // content bytes of cur not read yet
	sum  hash.Hash

	prev    string
	nonDir  map[string]bool
	entries int
	bytes   int64
	digest  string
	err     error
}

// NewReader returns a Reader of r within lim.
func NewReader(r io.Reader, lim Limits) *Reader {
	in := &hashReader{r: r, h: sha256.New()}
	ar := &Reader{in: in, tr: tar.NewReader(in), canonH: sha256.New(), sum: sha256.New(), nonDir: map[string]bool{}}
	ar.canon = tar.NewWriter(ar.canonH)
	ar.lim, ar.err = lim.resolve()
	return ar
}

// Next returns the next entry, or io.EOF after the last one once the whole
// archive has been checked. The SHA256 of a file entry is set when its
// content has been read to the end (by Read, or by the next call to Next).
func (r *Reader) Next() (*Entry, error) {
	if r.err != nil {
		return nil, r.err
	}
	e, err := r.next()
	if err != nil {
		r.err = r.wrap(err)
		return nil, r.err
	}
	return e, nil
}

// Read reads the content of the current file entry.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.left == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.tr.Read(p)
	r.sum.Write(p[:n])
	r.canon.Write(p[:n]) // cannot fail: only hashes; a short archive fails below
	r.left -= int64(n)
	if r.left == 0 {
		r.cur.SHA256 = hex.EncodeToString(r.sum.Sum(nil))
		return n, nil
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		r.err = r.wrap(err)
		return n, r.err
	}
	return n, nil
}

// Digest returns "sha256:" + hex of the archive, once Next has returned io.EOF.
func (r *Reader) Digest() string { return r.digest }

// wrap makes a FormatError of anything but an error of the underlying reader
// or an error already typed.
func (r *Reader) wrap(err error) error {
	var fe *FormatError
	var le *LimitError
	switch {
	case err == io.EOF, errors.As(err, &fe), errors.As(err, &le):
		return err
	case r.in.err != nil:
		return fmt.Errorf("reading changeset archive: %w", r.in.err)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, tar.ErrHeader):
		return &FormatError{Err: fmt.Errorf("%w: %v", ErrTruncated, err)}
	}
	return &FormatError{Err: err}
}

func (r *Reader) next() (*Entry, error) {
	if _, err := io.Copy(io.Discard, r); err != nil { // the rest of the last file
		return nil, err
	}
	h, err := r.header()
	if err == io.EOF {
		return nil, r.finish()
	}
	if err != nil {
		return nil, err
	}
	e, marker, err := parseHeader(h)
	if err != nil {
		return nil, err
	}
	if marker {
		return nil, &FormatError{Name: h.Name, Err: ErrMisplacedOpaque}
	}
	if e.Kind == KindDir {
		nh, err := r.tr.Next()
		switch {
		case err == io.EOF: // sticky: the next header() sees it again
		case err != nil:
			return nil, err
		case nh.Name == h.Name+opaqueMarker:
			if _, m, err := parseHeader(nh); err != nil || !m {
				return nil, &FormatError{Name: nh.Name, Err: ErrBadWhiteout}
			}
			e.Opaque = true
		default:
			r.ahead = nh
		}
	}
	if err := r.check(e, h.Name); err != nil {
		return nil, err
	}
	if err := writeHeaders(r.canon, e); err != nil {
		return nil, &FormatError{Name: h.Name, Err: err}
	}
	r.cur, r.left = e, e.Size
	r.sum.Reset()
	if e.Kind == KindFile && e.Size == 0 {
		e.SHA256 = hex.EncodeToString(r.sum.Sum(nil))
	}
	return e, nil
}

func (r *Reader) header() (*tar.Header, error) {
	if h := r.ahead; h != nil {
		r.ahead = nil
		return h, nil
	}
	return r.tr.Next()
}

// check enforces order, nesting and limits on e, before any content is read.
func (r *Reader) check(e *Entry, name string) error {
	switch {
	case e.Path == r.prev:
		return &FormatError{Name: name, Err: ErrDuplicate}
	case e.Path < r.prev:
		return &FormatError{Name: name, Err: ErrUnsorted}
	}
	r.prev = e.Path
	for a := path.Dir(e.Path); a != "/"; a = path.Dir(a) {
		if r.nonDir[a] {
			return &FormatError{Name: name, Err: ErrBelowNonDir}
		}
	}
	r.entries++
	switch {
	case r.entries > r.lim.MaxFiles:
		return &LimitError{What: "files", Limit: int64(r.lim.MaxFiles), Path: e.Path}
	case len(e.Path) > r.lim.MaxPathLen || len(e.Link) > r.lim.MaxPathLen:
		return &LimitError{What: "path length", Limit: int64(r.lim.MaxPathLen), Path: e.Path}
	case depth(e.Path) > r.lim.MaxDepth:
		return &LimitError{What: "depth", Limit: int64(r.lim.MaxDepth), Path: e.Path}
	case e.Size > r.lim.MaxBytes-r.bytes:
		return &LimitError{What: "bytes", Limit: r.lim.MaxBytes, Path: e.Path}
	}
	r.bytes += e.Size
	if e.Kind != KindDir {
		r.nonDir[e.Path] = true
	}
	return nil
}

// finish checks the end: nothing after the two zero blocks, and the stream is
// the canonical encoding of what was read.
func (r *Reader) finish() error {
	var one [1]byte
	if n, err := io.ReadFull(r.in, one[:]); n > 0 {
		return &FormatError{Err: ErrTrailingData}
	} else if err != io.EOF {
		return err
	}
	if err := r.canon.Close(); err != nil {
		return &FormatError{Err: err}
	}
	got := r.in.h.Sum(nil)
	if string(got) != string(r.canonH.Sum(nil)) {
		return &FormatError{Err: ErrNotCanonical}
	}
	r.digest = "sha256:" + hex.EncodeToString(got)
	return io.EOF
}

// parseHeader turns a tar header into an Entry, refusing whatever Extract
// never writes. marker reports an opaque marker (no Entry).
func parseHeader(h *tar.Header) (e *Entry, marker bool, err error) {
	bad := func(err error) (*Entry, bool, error) { return nil, false, &FormatError{Name: h.Name, Err: err} }
	switch h.Typeflag {
	case tar.TypeReg, tar.TypeDir, tar.TypeSymlink:
	default:
		return bad(fmt.Errorf("%w: %q", ErrEntryType, h.Typeflag))
	}
	for k := range h.PAXRecords {
		if k != "path" && k != "linkpath" && k != "size" {
			return bad(fmt.Errorf("%w: %q", ErrPAXRecord, k))
		}
	}
	if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(epoch) ||
		!h.AccessTime.IsZero() || !h.ChangeTime.IsZero() || h.Devmajor != 0 || h.Devminor != 0 ||
		(h.Linkname != "" && h.Typeflag != tar.TypeSymlink) || h.Size < 0 {
		return bad(ErrNotCanonical)
	}
	rel := h.Name
	if h.Typeflag == tar.TypeDir {
		if !strings.HasSuffix(rel, "/") {
			return bad(ErrBadName)
		}
		rel = rel[:len(rel)-1]
	}
	dir, base := path.Split(rel)
	special := strings.HasPrefix(base, whPrefix)
	if special {
		if h.Typeflag != tar.TypeReg || h.Size != 0 || h.Mode != 0 {
			return bad(ErrBadWhiteout)
		}
		if base == opaqueMarker {
			return nil, true, nil
		}
		base = strings.TrimPrefix(base, whPrefix)
	}
	e = &Entry{Path: "/" + dir + base}
	if !validPath(e.Path) {
		return bad(ErrBadName)
	}
	switch {
	case special:
		e.Kind = KindWhiteout
	case h.Typeflag == tar.TypeReg:
		e.Kind, e.Mode, e.Size = KindFile, uint32(h.Mode), h.Size
	case h.Typeflag == tar.TypeDir:
		e.Kind, e.Mode = KindDir, uint32(h.Mode)
	default:
		e.Kind, e.Mode, e.Link = KindSymlink, 0o777, h.Linkname
		if h.Mode != 0o777 || h.Linkname == "" {
			return bad(ErrBadMode)
		}
	}
	if h.Mode&^permMask != 0 {
		return bad(ErrBadMode)
	}
	if e.Kind != KindFile && h.Size != 0 {
		return bad(ErrNotCanonical)
	}
	return e, false, nil
}

// validPath: absolute, not "/", every component a name Extract can write.
func validPath(p string) bool {
	if len(p) < 2 || p[0] != '/' {
		return false
	}
	for _, c := range strings.Split(p[1:], "/") {
		if c == "" || c == "." || c == ".." || len(c) > 255 || strings.HasPrefix(c, whPrefix) {
			return false
		}
	}
	return true
}

// hashReader hashes what is read through it and keeps the first error of r.
type hashReader struct {
	r   io.Reader
	h   hash.Hash
	err error
}

func (h *hashReader) Read(p []byte) (int, error) {
	n, err := h.r.Read(p)
	h.h.Write(p[:n])
	if err != nil && err != io.EOF && h.err == nil {
		h.err = err
	}
	return n, err
}

// Apply writes into the uppers of layers the entries of archive for which
// keep returns true (nil keeps all), owned by uid:gid. The uppers must be
// fresh, empty directories on a file system with trusted xattrs and
// whiteouts. want is the changeset the archive must hold (from Extract, or
// from ReadArchive after its Digest was checked against a signed record):
// every entry, content hash and the digest are compared with it as the archive
// is read, and any difference is a *TamperError. Entries under a layer's Hide
// and the root of a layer are skipped: they belong to the harness.
//
// Apply creates everything with *at calls beneath the upper's descriptor and
// never follows a symlink; a missing parent becomes a 0755 directory. Modes
// are set explicitly (umask does not matter), times to the epoch. On any
// error the uppers hold a partial result and must be discarded.
//
// Apply is meant to run as root: whiteouts (mknod), trusted xattrs and owners
// other than the caller's need it. Without root it works for changesets of
// files, directories and symlinks applied with the caller's own uid:gid, as
// long as the umask leaves the owner's bits.
func Apply(archive io.Reader, want *Changeset, layers []Layer, keep func(Entry) bool, uid, gid int) error {
	if want == nil || !strings.HasPrefix(want.Digest, "sha256:") {
		return ErrNoDigest
	}
	if uid < 0 || gid < 0 {
		return fmt.Errorf("applying changeset: invalid owner %d:%d", uid, gid)
	}
	if err := checkLayers(layers); err != nil {
		return err
	}
	a, err := newApplier(layers, uid, gid)
	if err != nil {
		return err
	}
	defer a.close()
	ar := NewReader(archive, unlimited)
	i := 0
	for ; ; i++ {
		e, err := ar.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return tamper("", err)
		}
		if i >= len(want.Entries) {
			return &TamperError{Path: e.Path, Reason: "entry not in the changeset"}
		}
		w := &want.Entries[i]
		if e.Path != w.Path || e.Kind != w.Kind || e.Mode != w.Mode || e.Size != w.Size || e.Link != w.Link || e.Opaque != w.Opaque {
			return &TamperError{Path: w.Path, Reason: "entry differs from the changeset"}
		}
		if keep == nil || keep(*w) {
			if err := a.put(w, ar); err != nil {
				return tamper(w.Path, err)
			}
		}
		if w.Kind == KindFile {
			if _, err := io.Copy(io.Discard, ar); err != nil {
				return tamper(w.Path, err)
			}
			if e.SHA256 != w.SHA256 {
				return &TamperError{Path: w.Path, Reason: "content differs from the changeset"}
			}
		}
	}
	if i != len(want.Entries) {
		return &TamperError{Reason: fmt.Sprintf("archive holds %d of %d entries", i, len(want.Entries))}
	}
	if ar.Digest() != want.Digest {
		return &TamperError{Reason: fmt.Sprintf("digest %s, want %s", ar.Digest(), want.Digest)}
	}
	return a.finish()
}

// tamper types an archive that does not parse as tampering (the expected
// changeset says it does); other errors pass through.
func tamper(p string, err error) error {
	var fe *FormatError
	var le *LimitError
	if errors.As(err, &fe) || errors.As(err, &le) {
		return &TamperError{Path: p, Reason: "archive does not parse", Err: err}
	}
	return err
}

// applier creates entries beneath the upper directories. Not safe for
// concurrent use.
type applier struct {
	layers   []Layer
	roots    []int // upper fds by layer
	uid, gid int
	dirs     []created // directories made, whose times are set last
}

type created struct {
	layer int
	rel   string
}

var epochTimes = []unix.Timespec{{}, {}}

func newApplier(layers []Layer, uid, gid int) (*applier, error) {
	a := &applier{layers: layers, uid: uid, gid: gid}
	for _, l := range layers {
		fd, err := unix.Open(l.Upper, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			a.close()
			return nil, fmt.Errorf("opening upper %s: %w", l.Upper, err)
		}
		a.roots = append(a.roots, fd)
		buf := make([]byte, 4096)
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			a.close()
			return nil, fmt.Errorf("reading upper %s: %w", l.Upper, err)
		}
		if _, _, names := unix.ParseDirent(buf[:max(n, 0)], 1, nil); len(names) > 0 {
			a.close()
			return nil, fmt.Errorf("%s: %w", l.Upper, ErrUpperNotEmpty)
		}
	}
	return a, nil
}

func (a *applier) close() {
	for _, fd := range a.roots {
		unix.Close(fd)
	}
	a.roots = nil
}

// put creates e, reading a file's content from content.
func (a *applier) put(e *Entry, content io.Reader) error {
	li := layerOf(a.layers, e.Path)
	if li < 0 {
		return fmt.Errorf("%q: %w: no layer holds it", e.Path, ErrLayers)
	}
	l := a.layers[li]
	if e.Path == l.Dst {
		return nil
	}
	for _, h := range l.Hide {
		if under(e.Path, h) {
			return nil
		}
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(e.Path, l.Dst), "/")
	dir, name := path.Split(rel)
	pfd, err := a.openParent(li, strings.TrimSuffix(dir, "/"))
	if err != nil {
		return fmt.Errorf("applying %q: %w", e.Path, err)
	}
	defer unix.Close(pfd)
	if err := a.create(pfd, name, e, content); err != nil {
		return fmt.Errorf("applying %q: %w", e.Path, err)
	}
	if e.Kind == KindDir {
		a.dirs = append(a.dirs, created{li, rel})
	}
	return nil
}

func (a *applier) create(pfd int, name string, e *Entry, content io.Reader) error {
	switch e.Kind {
	case KindDir:
		return a.mkdir(pfd, name, e.Mode, e.Opaque)
	case KindFile:
		fd, err := openBeneath(pfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if _, err := io.CopyN(fdWriter(fd), content, e.Size); err != nil {
			return err
		}
		if err := unix.Fchown(fd, a.uid, a.gid); err != nil {
			return err
		}
		if err := unix.Fchmod(fd, e.Mode&permMask); err != nil {
			return err
		}
		return futimens(fd)
	case KindSymlink:
		if err := unix.Symlinkat(e.Link, pfd, name); err != nil {
			return err
		}
	case KindWhiteout:
		if err := unix.Mknodat(pfd, name, unix.S_IFCHR, 0); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown kind %q", e.Kind)
	}
	if err := unix.Fchownat(pfd, name, a.uid, a.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return err
	}
	return unix.UtimesNanoAt(pfd, name, epochTimes, unix.AT_SYMLINK_NOFOLLOW)
}

// mkdir makes the directory name in pfd with mode, owned by uid:gid.
func (a *applier) mkdir(pfd int, name string, mode uint32, opaque bool) error {
	if err := unix.Mkdirat(pfd, name, 0o700); err != nil {
		return err
	}
	fd, err := openBeneath(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, a.uid, a.gid); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, mode&permMask); err != nil {
		return err
	}
	if opaque {
		return unix.Fsetxattr(fd, xattrOpaque, []byte("y"), 0)
	}
	return nil
}

// openParent opens the directory rel of layer li one component at a time,
// never through a symlink, creating missing components as 0755 directories.
func (a *applier) openParent(li int, rel string) (int, error) {
	fd, err := unix.FcntlInt(uintptr(a.roots[li]), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil || rel == "" {
		return fd, err
	}
	done := ""
	for _, c := range strings.Split(rel, "/") {
		done = joinRel(done, c)
		nfd, err := openBeneath(fd, c, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err == unix.ENOENT {
			if err = a.mkdir(fd, c, 0o755, false); err == nil {
				a.dirs = append(a.dirs, created{li, done})
				nfd, err = openBeneath(fd, c, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			}
		}
		unix.Close(fd)
		if err == unix.ELOOP || err == unix.ENOTDIR || err == unix.EXDEV {
			return -1, fmt.Errorf("%q: %w", done, ErrNotDir)
		}
		if err != nil {
			return -1, fmt.Errorf("%q: %w", done, err)
		}
		fd = nfd
	}
	return fd, nil
}

// finish sets the times of the directories made, now that nothing more is
// created in them.
func (a *applier) finish() error {
	for _, d := range a.dirs {
		fd, err := openBeneath(a.roots[d.layer], d.rel, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return fmt.Errorf("applying %q: %w", d.rel, err)
		}
		err = futimens(fd)
		unix.Close(fd)
		if err != nil {
			return fmt.Errorf("applying %q: %w", d.rel, err)
		}
	}
	return nil
}

// futimens sets both times of fd to the epoch (utimensat with a NULL path).
func futimens(fd int) error {
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&epochTimes[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// fdWriter writes to a descriptor with write(2).
type fdWriter int

func (f fdWriter) Write(p []byte) (int, error) {
	written := 0
	for written < len(p) {
		n, err := unix.Write(int(f), p[written:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return written, err
		}
		written += n
	}
	return written, nil
}

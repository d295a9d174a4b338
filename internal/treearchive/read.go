package treearchive

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"
)

// entry is one entry as read, checked against everything that does not
// need the rest of the archive.
type entry struct {
	kind         byte
	path, name   string
	parent       string
	meta         meta
	size         int64  // files
	target       string // symlinks; hard links: the path of the 'F'
	major, minor uint64
}

// reader reads an archive, checking as it goes that it is canonical and
// within its limits, hashing every byte.
type reader struct {
	lim   Limits
	in    *bufio.Reader
	sum   hash.Hash
	off   int64
	count int
	bytes int64
	// stack holds the directories on the path to the last entry; each
	// frame remembers the name of its last child, which the next must
	// sort after.
	stack []frame
	// linked are the 'F' entries, by path, and whether a later 'h' named
	// each.
	linked map[string]*linkTarget
	cur    *entry // the entry whose content is being read
	left   int64  // content bytes of cur not yet read
	done   bool
}

type frame struct {
	path, last string
	meta       meta
	fd         int // Unpack's descriptor of the directory; -1 in Verify
}

type linkTarget struct {
	meta meta
	used bool
	sum  [32]byte // its content's SHA-256 (Verify)
}

func newReader(r io.Reader, lim Limits) *reader {
	return &reader{lim: lim.resolve(), in: bufio.NewReaderSize(r, 256<<10), sum: sha256.New(), linked: map[string]*linkTarget{}}
}

func (r *reader) fail(path string, err error) error {
	return &FormatError{Offset: r.off, Path: path, Err: err}
}

func (r *reader) readByte() (byte, error) {
	b, err := r.in.ReadByte()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, r.fail("", err)
	}
	r.sum.Write([]byte{b})
	r.off++
	return b, nil
}

// uvarint reads a varint in its minimal encoding.
func (r *reader) uvarint() (uint64, error) {
	var v uint64
	for i := 0; ; i++ {
		b, err := r.readByte()
		if err != nil {
			return 0, err
		}
		if i == 9 && b > 1 {
			return 0, r.fail("", errors.New("varint overflows 64 bits"))
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			if b == 0 && i > 0 {
				return 0, r.fail("", errors.New("varint not in its shortest form"))
			}
			return v, nil
		}
	}
}

func (r *reader) bounded(max uint64, what string) (uint64, error) {
	v, err := r.uvarint()
	if err == nil && v > max {
		err = r.fail("", fmt.Errorf("%s %d out of range", what, v))
	}
	return v, err
}

// str reads a length-prefixed string of at most max bytes.
func (r *reader) str(max int, what string) (string, error) {
	n, err := r.bounded(uint64(max), what+" length")
	if err != nil {
		return "", err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r.in, b); err != nil {
		return "", r.fail("", fmt.Errorf("%s: %w", what, io.ErrUnexpectedEOF))
	}
	r.sum.Write(b)
	r.off += int64(n)
	return string(b), nil
}

func (r *reader) meta() (meta, error) {
	var m meta
	mode, err := r.bounded(0o7777, "mode")
	if err != nil {
		return m, err
	}
	// (uid_t)-1 means "leave unchanged" to chown: no inode has it.
	uid, err := r.bounded(1<<32-2, "uid")
	if err != nil {
		return m, err
	}
	gid, err := r.bounded(1<<32-2, "gid")
	if err != nil {
		return m, err
	}
	zz, err := r.uvarint()
	if err != nil {
		return m, err
	}
	nsec, err := r.bounded(999_999_999, "nanoseconds")
	if err != nil {
		return m, err
	}
	return meta{mode: uint32(mode), uid: uint32(uid), gid: uint32(gid), sec: int64(zz>>1) ^ -int64(zz&1), nsec: uint32(nsec)}, nil
}

// validName reports whether name may be one component of a path.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && len(name) <= 255 && !strings.ContainsAny(name, "/\x00")
}

// next reads the next entry; nil at the (checked) end. The content of a
// file must be read (Read) before next is called again. Directories the
// entry's position closes are popped and handed to leave, deepest first.
func (r *reader) next(leave func(frame) error) (*entry, error) {
	if r.left > 0 {
		return nil, r.fail(r.cur.path, errors.New("content not read"))
	}
	if r.count == 0 {
		b := make([]byte, len(magic))
		if _, err := io.ReadFull(r.in, b); err != nil || string(b) != magic {
			return nil, r.fail("", errors.New("no tree archive header"))
		}
		r.sum.Write(b)
		r.off += int64(len(b))
	}
	kind, err := r.readByte()
	if err != nil {
		return nil, err
	}
	if kind == kindEnd {
		return nil, r.end(leave)
	}
	e := &entry{kind: kind}
	if e.path, err = r.str(r.lim.MaxPathLen, "path"); err != nil {
		return nil, err
	}
	if r.count++; r.count > r.lim.MaxEntries {
		return nil, &LimitError{What: "entries", Limit: int64(r.lim.MaxEntries), Path: e.path}
	}
	if r.count == 1 {
		if e.path != "." || kind != kindDir {
			return nil, r.fail(e.path, errors.New("the first entry must be the root directory \".\""))
		}
	} else {
		e.parent, e.name = parentOf(e.path)
		for _, c := range strings.Split(e.path, "/") {
			if !validName(c) {
				return nil, r.fail(e.path, errors.New("not a clean relative path"))
			}
		}
		if depth := strings.Count(e.path, "/") + 1; depth > r.lim.MaxDepth {
			return nil, &LimitError{What: "depth", Limit: int64(r.lim.MaxDepth), Path: e.path}
		}
		// Depth first: the parent must be a directory on the current path,
		// and the name must sort after its last sibling.
		for len(r.stack) > 0 && r.stack[len(r.stack)-1].path != e.parent {
			f := r.stack[len(r.stack)-1]
			r.stack = r.stack[:len(r.stack)-1]
			if err := leave(f); err != nil {
				return nil, err
			}
		}
		if len(r.stack) == 0 {
			return nil, r.fail(e.path, errors.New("out of order, or its parent is not a directory before it"))
		}
		top := &r.stack[len(r.stack)-1]
		if e.name <= top.last {
			return nil, r.fail(e.path, errors.New("out of order, or a duplicate"))
		}
		top.last = e.name
	}
	if e.meta, err = r.meta(); err != nil {
		return nil, err
	}
	switch kind {
	case kindDir, kindFifo, kindSocket:
	case kindFile, kindLinked:
		size, err := r.uvarint()
		if err != nil {
			return nil, err
		}
		if size > uint64(r.lim.MaxBytes-r.bytes) {
			return nil, &LimitError{What: "bytes", Limit: r.lim.MaxBytes, Path: e.path}
		}
		e.size = int64(size)
		r.bytes += e.size
		r.cur, r.left = e, e.size
		if kind == kindLinked {
			r.linked[e.path] = &linkTarget{meta: e.meta}
		}
	case kindHardlink:
		if e.target, err = r.str(r.lim.MaxPathLen, "link target"); err != nil {
			return nil, err
		}
		t, ok := r.linked[e.target]
		if !ok {
			return nil, r.fail(e.path, fmt.Errorf("hard link to %q, which is no earlier linked file", e.target))
		}
		if t.meta != e.meta {
			return nil, r.fail(e.path, errors.New("a hard link's owner, mode or time differ from its file's"))
		}
		t.used = true
	case kindSymlink:
		if e.target, err = r.str(r.lim.MaxPathLen, "symlink target"); err != nil {
			return nil, err
		}
		if e.target == "" || strings.IndexByte(e.target, 0) >= 0 || e.meta.mode != 0 {
			return nil, r.fail(e.path, errors.New("a symlink's target is empty or holds NUL, or its mode is not 0"))
		}
	case kindChar, kindBlock:
		// The kernel's device numbers: 12 bits of major, 20 of minor;
		// mknod would truncate anything more.
		if e.major, err = r.bounded(1<<12-1, "major"); err != nil {
			return nil, err
		}
		if e.minor, err = r.bounded(1<<20-1, "minor"); err != nil {
			return nil, err
		}
	default:
		return nil, r.fail(e.path, fmt.Errorf("unknown kind %q", kind))
	}
	if kind == kindDir {
		r.stack = append(r.stack, frame{path: e.path, meta: e.meta, fd: -1})
	}
	return e, nil
}

// Read reads the current file's content.
func (r *reader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n, err := r.in.Read(p)
	r.sum.Write(p[:n])
	r.off += int64(n)
	r.left -= int64(n)
	if err == io.EOF {
		err = r.fail(r.cur.path, fmt.Errorf("content: %w", io.ErrUnexpectedEOF))
	}
	return n, err
}

// end checks the end record, that nothing follows, and that every linked
// file was linked, and pops the directories left open.
func (r *reader) end(leave func(frame) error) error {
	count, err := r.uvarint()
	if err != nil {
		return err
	}
	bytes, err := r.uvarint()
	if err != nil {
		return err
	}
	if r.count == 0 || count != uint64(r.count) || bytes != uint64(r.bytes) {
		return r.fail("", fmt.Errorf("the end says %d entries and %d bytes, the archive holds %d and %d", count, bytes, r.count, r.bytes))
	}
	if _, err := r.in.ReadByte(); err != io.EOF {
		return r.fail("", errors.New("bytes after the end"))
	}
	for p, t := range r.linked {
		if !t.used {
			return r.fail(p, errors.New("a linked file no hard link names"))
		}
	}
	for len(r.stack) > 0 {
		f := r.stack[len(r.stack)-1]
		r.stack = r.stack[:len(r.stack)-1]
		if err := leave(f); err != nil {
			return err
		}
	}
	r.done = true
	return nil
}

func (r *reader) summary() *Summary {
	return &Summary{Digest: "sha256:" + hex.EncodeToString(r.sum.Sum(nil)), Entries: r.count, Bytes: r.bytes}
}

package treearchive

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"
)

const magic = "proctor-tree-archive\x00v1\n"

// Entry kinds.
const (
	kindDir      = 'd'
	kindFile     = 'f'
	kindLinked   = 'F' // a file, first of a hard-link group
	kindHardlink = 'h'
	kindSymlink  = 'l'
	kindChar     = 'c'
	kindBlock    = 'b'
	kindFifo     = 'p'
	kindSocket   = 's'
	kindEnd      = 'E'
)

// Limits bound a tree or an archive. A zero field takes its default
// (DefaultLimits).
type Limits struct {
	MaxEntries int   // entries of any kind, the root included
	MaxBytes   int64 // content bytes of all files
	MaxDepth   int   // directories above the deepest entry
	MaxPathLen int   // bytes of an entry's path, and of a link target
}

// DefaultLimits returns 1,000,000 entries, 16 GiB, 128 levels, 4096 bytes.
func DefaultLimits() Limits {
	return Limits{MaxEntries: 1_000_000, MaxBytes: 16 << 30, MaxDepth: 128, MaxPathLen: 4096}
}

func (l Limits) resolve() Limits {
	d := DefaultLimits()
	if l.MaxEntries <= 0 {
		l.MaxEntries = d.MaxEntries
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	if l.MaxPathLen <= 0 {
		l.MaxPathLen = d.MaxPathLen
	}
	return l
}

// Summary describes an archive: a plain value.
type Summary struct {
	Digest  string // "sha256:" and the hex SHA-256 of its bytes
	Entries int
	Bytes   int64 // content bytes of its files
}

// meta is what every entry records of its inode.
type meta struct {
	mode, uid, gid uint32
	sec            int64
	nsec           uint32
}

func metaOf(st *unix.Stat_t) meta {
	return meta{mode: st.Mode & 0o7777, uid: st.Uid, gid: st.Gid, sec: st.Mtim.Sec, nsec: uint32(st.Mtim.Nsec)}
}

// item is one entry found by the walk.
type item struct {
	kind         byte
	path         string
	meta         meta
	size         int64
	target       string // symlink target; hard link: the group's first path
	major, minor uint64
	dev, ino     uint64
	linkable     bool // a regular file with other links: perhaps in a hard-link group
}

// Pack writes the archive of the tree at dir (which may be a symbolic link
// to a directory; nothing below it is followed) to w. A file that changes
// while it is read, or a tree past lim, is an error, and what was written
// to w is then garbage.
func Pack(dir string, w io.Writer, lim Limits) (*Summary, error) {
	lim = lim.resolve()
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, err
	}
	root, err := unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &PathError{Op: "open", Path: ".", Err: err}
	}
	defer unix.Close(root)
	p := &packer{lim: lim, root: root}
	var st unix.Stat_t
	if err := unix.Fstat(root, &st); err != nil {
		return nil, &PathError{Op: "stat", Path: ".", Err: err}
	}
	p.items = append(p.items, item{kind: kindDir, path: ".", meta: metaOf(&st), dev: st.Dev, ino: st.Ino})
	wfd, err := unix.Openat(root, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &PathError{Op: "open", Path: ".", Err: err}
	}
	if err := p.walk(wfd, ".", 0); err != nil { // closes wfd
		return nil, err
	}
	p.linkGroups()
	return p.write(w)
}

type packer struct {
	lim   Limits
	root  int
	items []item
	bytes int64
}

// walk lists the directory open as fd, at rel, depth levels below the
// root, and its descendants, depth first in name order.
func (p *packer) walk(fd int, rel string, depth int) error {
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return &PathError{Op: "read directory", Path: rel, Err: err}
	}
	sort.Strings(names)
	for _, name := range names {
		crel := name
		if rel != "." {
			crel = rel + "/" + name
		}
		if len(p.items) >= p.lim.MaxEntries {
			return &LimitError{What: "entries", Limit: int64(p.lim.MaxEntries), Path: crel}
		}
		if len(crel) > p.lim.MaxPathLen {
			return &LimitError{What: "path length", Limit: int64(p.lim.MaxPathLen), Path: crel}
		}
		if depth+1 > p.lim.MaxDepth {
			return &LimitError{What: "depth", Limit: int64(p.lim.MaxDepth), Path: crel}
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return &PathError{Op: "lstat", Path: crel, Err: err}
		}
		it := item{path: crel, meta: metaOf(&st), dev: st.Dev, ino: st.Ino}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			it.kind = kindDir
			p.items = append(p.items, it)
			cfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return &PathError{Op: "open", Path: crel, Err: err}
			}
			var cst unix.Stat_t
			err = unix.Fstat(cfd, &cst)
			if err == nil && (cst.Dev != st.Dev || cst.Ino != st.Ino) {
				err = ErrChanged
			}
			if err == nil {
				err = p.walk(cfd, crel, depth+1) // closes cfd
			} else {
				unix.Close(cfd)
			}
			if err != nil {
				var pe *PathError
				var le *LimitError
				if errors.As(err, &pe) || errors.As(err, &le) {
					return err
				}
				return &PathError{Op: "open", Path: crel, Err: err}
			}
			continue
		case unix.S_IFREG:
			it.kind, it.size = kindFile, st.Size
			if st.Size > p.lim.MaxBytes-p.bytes {
				return &LimitError{What: "bytes", Limit: p.lim.MaxBytes, Path: crel}
			}
			p.bytes += st.Size
			it.linkable = st.Nlink > 1
		case unix.S_IFLNK:
			it.kind, it.meta.mode = kindSymlink, 0
			buf := make([]byte, p.lim.MaxPathLen+1)
			n, err := unix.Readlinkat(fd, name, buf)
			if err != nil {
				return &PathError{Op: "readlink", Path: crel, Err: err}
			}
			if n > p.lim.MaxPathLen {
				return &LimitError{What: "path length", Limit: int64(p.lim.MaxPathLen), Path: crel}
			}
			it.target = string(buf[:n])
		case unix.S_IFCHR, unix.S_IFBLK:
			it.kind = kindChar
			if st.Mode&unix.S_IFMT == unix.S_IFBLK {
				it.kind = kindBlock
			}
			it.major, it.minor = uint64(unix.Major(st.Rdev)), uint64(unix.Minor(st.Rdev))
		case unix.S_IFIFO:
			it.kind = kindFifo
		case unix.S_IFSOCK:
			it.kind = kindSocket
		default:
			return &PathError{Op: "pack", Path: crel, Err: fmt.Errorf("unknown file type %#o", st.Mode&unix.S_IFMT)}
		}
		p.items = append(p.items, it)
	}
	return nil
}

// linkGroups turns the regular files that share an inode into one 'F' (the
// first in archive order) and 'h' entries naming it.
func (p *packer) linkGroups() {
	type key struct{ dev, ino uint64 }
	first := map[key]int{}
	for i := range p.items {
		it := &p.items[i]
		if it.kind != kindFile || !it.linkable {
			continue
		}
		k := key{it.dev, it.ino}
		if j, ok := first[k]; ok {
			p.items[j].kind = kindLinked
			it.kind, it.target = kindHardlink, p.items[j].path
			it.meta = p.items[j].meta
			p.bytes -= it.size
			it.size = 0
			continue
		}
		first[k] = i
	}
}

// write writes the archive of the items, reading each file's content
// again beneath the root and checking it is the one the walk saw.
func (p *packer) write(w io.Writer) (*Summary, error) {
	sum := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, sum), 256<<10)
	e := &encoder{w: bw}
	e.raw([]byte(magic))
	buf := make([]byte, 256<<10)
	for i := range p.items {
		it := &p.items[i]
		e.byte(it.kind)
		e.str(it.path)
		e.meta(it.meta)
		switch it.kind {
		case kindFile, kindLinked:
			e.uvarint(uint64(it.size))
			if e.err == nil {
				e.err = p.copyFile(bw, it, buf)
			}
		case kindHardlink, kindSymlink:
			e.str(it.target)
		case kindChar, kindBlock:
			e.uvarint(it.major)
			e.uvarint(it.minor)
		}
		if e.err != nil {
			return nil, e.err
		}
	}
	e.byte(kindEnd)
	e.uvarint(uint64(len(p.items)))
	e.uvarint(uint64(p.bytes))
	if e.err == nil {
		e.err = bw.Flush()
	}
	if e.err != nil {
		return nil, e.err
	}
	return &Summary{Digest: "sha256:" + hex.EncodeToString(sum.Sum(nil)), Entries: len(p.items), Bytes: p.bytes}, nil
}

// copyFile copies the content of it into w: opened beneath the root with no
// symlink on the way, it must be the regular file of the walk, of its size,
// unchanged at the end.
func (p *packer) copyFile(w io.Writer, it *item, buf []byte) error {
	fd, err := unix.Openat2(p.root, it.path, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return &PathError{Op: "open", Path: it.path, Err: err}
	}
	f := os.NewFile(uintptr(fd), it.path) // owns fd
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return &PathError{Op: "stat", Path: it.path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size != it.size || metaOf(&st) != it.meta || st.Dev != it.dev || st.Ino != it.ino {
		return &PathError{Op: "pack", Path: it.path, Err: ErrChanged}
	}
	// Hide f's WriterTo so that io.CopyBuffer uses buf.
	n, err := io.CopyBuffer(w, io.LimitReader(struct{ io.Reader }{f}, it.size), buf)
	if err == nil && n != it.size {
		err = ErrChanged // shorter than it was
	}
	if err == nil {
		if m, _ := f.Read(buf[:1]); m != 0 {
			err = ErrChanged // longer
		}
	}
	if err == nil {
		if err = unix.Fstat(fd, &st); err == nil && (st.Size != it.size || metaOf(&st) != it.meta) {
			err = ErrChanged
		}
	}
	if err != nil {
		return &PathError{Op: "read", Path: it.path, Err: err}
	}
	return nil
}

// encoder writes the archive's fields, keeping the first error.
type encoder struct {
	w   *bufio.Writer
	err error
}

func (e *encoder) raw(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) byte(b byte) {
	if e.err == nil {
		e.err = e.w.WriteByte(b)
	}
}

func (e *encoder) uvarint(v uint64) {
	var b [binary.MaxVarintLen64]byte
	e.raw(b[:binary.PutUvarint(b[:], v)])
}

func (e *encoder) str(s string) {
	e.uvarint(uint64(len(s)))
	if e.err == nil {
		_, e.err = e.w.WriteString(s)
	}
}

func (e *encoder) meta(m meta) {
	e.uvarint(uint64(m.mode))
	e.uvarint(uint64(m.uid))
	e.uvarint(uint64(m.gid))
	e.uvarint(uint64(m.sec<<1) ^ uint64(m.sec>>63)) // zig-zag
	e.uvarint(uint64(m.nsec))
}

// parentOf splits a relative path into its parent ("." at the top) and
// name.
func parentOf(p string) (dir, name string) {
	dir, name = path.Split(p)
	if dir == "" {
		return ".", name
	}
	return dir[:len(dir)-1], name
}

package task

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// DigestPrefix starts every digest Digest returns.
const DigestPrefix = "sha256:"

// treeTag starts every directory's hash input; it names the encoding below
// and changes if the encoding ever does.
const treeTag = "proctor-tree-v1\x00"

// Entry kinds in the encoding.
const (
	kindFile    = 'f'
	kindDir     = 'd'
	kindSymlink = 'l'
)

// Digest returns the Merkle digest of the tree at dir, "sha256:" followed by
// 64 lower-case hex digits. It never follows a symbolic link inside the tree
// (dir itself may be one) and reads files with a fixed amount of memory,
// several at a time.
//
// The digest depends only on names, kinds, permission bits, file contents
// and link targets: never on modification times, owners, inode numbers or
// the order the file system lists entries in, so two copies of a tree made
// at different times or on different machines have the same digest as long
// as their permission bits agree. A fifo, socket or device file anywhere in
// the tree is an error (ErrSpecialFile), as is an entry that changes kind or
// identity while it is read (ErrChanged). Errors are *Error naming the path.
//
// Encoding, so that a verifier elsewhere can recompute it. H is SHA-256, ||
// concatenation, integers big-endian:
//
//	H(regular file) = H(its content)                  (what sha256sum prints)
//	H(symlink)      = H(its target, the bytes readlink returns)
//	H(directory)    = H("proctor-tree-v1" || 0x00 || E(c1) || E(c2) || ... || E(cn))
//
// where c1 … cn are the directory's entries other than "." and "..", sorted
// by name as byte strings, and
//
//	E(c) = kind    1 byte:  'f' (0x66) file, 'd' (0x64) directory, 'l' (0x6c) symlink
//	    || mode    4 bytes: the POSIX permission bits, mode & 07777 (rwx for
//	                        user, group and other, 04000 setuid, 02000 setgid,
//	                        01000 sticky); 0 for a symlink
//	    || len     8 bytes: the length of name in bytes
//	    || name    the entry's name as stored, no separator, no normalisation
//	    || H(c)    32 bytes
//
// The digest is DigestPrefix followed by hex(H(dir)); the mode and name of
// dir itself are not part of it. An empty directory hashes
// H("proctor-tree-v1\x00").
func Digest(dir string) (string, error) {
	return DigestCached(dir, nil)
}

// DigestCached is Digest with the content hashes of files taken from, and
// added to, cache (nil for none). The result is the same.
func DigestCached(dir string, cache *HashCache) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", &Error{File: dir, Err: err}
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", &Error{File: abs, Err: ErrMissing}
		}
		return "", &Error{File: abs, Err: err}
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		if fi, serr := os.Stat(resolved); serr == nil && !fi.IsDir() {
			return "", &Error{File: resolved, Err: ErrNotDir}
		}
		return "", &Error{File: resolved, Err: err}
	}
	defer root.Close()

	w := &walker{root: root, base: resolved, cache: cache}
	top := &node{kind: kindDir}
	if err := w.walk(top, "."); err != nil {
		return "", err
	}
	if err := w.hashFiles(); err != nil {
		return "", err
	}
	sum := hashTree(top, sha256.New())
	return DigestPrefix + hex.EncodeToString(sum[:]), nil
}

// node is one entry of the tree being digested.
type node struct {
	name     string
	kind     byte
	mode     uint32
	hash     [sha256.Size]byte // set by walk (symlinks), hashFiles (files) or hashTree (dirs)
	children []*node           // directories only, sorted by name
	rel      string            // path from the root, slash-separated
	info     fs.FileInfo       // the lstat the entry was listed with
}

// walker lists a tree through an os.Root, so that no access leaves it.
type walker struct {
	root  *os.Root
	base  string  // absolute path of the root, for errors
	files []*node // regular files, in walk order, hashed by hashFiles
	cache *HashCache
}

func (w *walker) errorAt(rel string, err error) error {
	return &Error{File: filepath.Join(w.base, filepath.FromSlash(rel)), Err: err}
}

// walk lists the directory n at rel and its descendants.
func (w *walker) walk(n *node, rel string) error {
	f, err := w.root.Open(rel)
	if err != nil {
		return w.errorAt(rel, err)
	}
	defer f.Close()
	if n.info != nil {
		fi, err := f.Stat()
		if err != nil {
			return w.errorAt(rel, err)
		}
		if !fi.IsDir() || !os.SameFile(fi, n.info) {
			return w.errorAt(rel, ErrChanged)
		}
	}
	entries, err := f.ReadDir(-1)
	if err != nil {
		return w.errorAt(rel, err)
	}
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	n.children = make([]*node, 0, len(entries))
	for _, e := range entries {
		crel := path.Join(rel, e.Name())
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return w.errorAt(crel, ErrChanged)
			}
			return w.errorAt(crel, err)
		}
		c := &node{name: e.Name(), rel: crel, info: info, mode: permBits(info.Mode())}
		m := info.Mode()
		switch {
		case m.IsRegular():
			c.kind = kindFile
			if h, ok := w.cache.Lookup(info); ok {
				c.hash = h
				break
			}
			w.files = append(w.files, c)
		case m.IsDir():
			c.kind = kindDir
			if err := w.walk(c, crel); err != nil {
				return err
			}
		case m&fs.ModeSymlink != 0:
			c.kind = kindSymlink
			c.mode = 0
			target, err := w.root.Readlink(crel)
			if err != nil {
				return w.errorAt(crel, err)
			}
			c.hash = sha256.Sum256([]byte(target))
		default:
			return w.errorAt(crel, errorf(ErrSpecialFile, "special file (%s): a task must not contain fifos, sockets or devices", specialKind(m)))
		}
		n.children = append(n.children, c)
	}
	return nil
}

// hashFiles hashes w.files with a small pool of workers. On error it stops
// early and returns the error of the first failing file in walk order, so
// the error does not depend on scheduling.
func (w *walker) hashFiles() error {
	if len(w.files) == 0 {
		return nil
	}
	workers := min(max(runtime.GOMAXPROCS(0), 2), 8, len(w.files))
	jobs := make(chan int)
	errs := make([]error, len(w.files))
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			buf := make([]byte, 256<<10)
			h := sha256.New()
			for i := range jobs {
				if failed.Load() {
					continue
				}
				if err := w.hashFile(w.files[i], h, buf); err != nil {
					errs[i] = err
					failed.Store(true)
				}
			}
		})
	}
	for i := range w.files {
		if failed.Load() {
			break
		}
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// hashFile streams one file into h through buf. The file opened must be the
// regular file walk listed: were it swapped for another (or for a link to
// another) in between, its identity differs and the result is ErrChanged.
func (w *walker) hashFile(n *node, h hash.Hash, buf []byte) error {
	// O_NONBLOCK: should a fifo be swapped in, open must not wait for a
	// writer; Stat below then rejects it.
	f, err := w.root.OpenFile(n.rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return w.errorAt(n.rel, ErrChanged)
		}
		return w.errorAt(n.rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return w.errorAt(n.rel, err)
	}
	if !fi.Mode().IsRegular() || !os.SameFile(fi, n.info) {
		return w.errorAt(n.rel, ErrChanged)
	}
	h.Reset()
	// Hide f's WriterTo so that io.CopyBuffer uses buf: memory stays bounded.
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, buf); err != nil {
		return w.errorAt(n.rel, err)
	}
	h.Sum(n.hash[:0])
	// Remember it only if the file is still what was read.
	if after, err := f.Stat(); err == nil && sameIdentity(fi, after) {
		w.cache.Remember(after, n.hash)
	}
	return nil
}

func sameIdentity(a, b fs.FileInfo) bool {
	ka, oka := keyOf(a)
	kb, okb := keyOf(b)
	return oka && okb && ka == kb
}

// hashTree computes the hash of every directory below and including n,
// children first, and returns n's.
func hashTree(n *node, h hash.Hash) [sha256.Size]byte {
	for _, c := range n.children {
		if c.kind == kindDir {
			hashTree(c, h)
		}
	}
	h.Reset()
	io.WriteString(h, treeTag)
	var hdr [13]byte
	for _, c := range n.children {
		hdr[0] = c.kind
		binary.BigEndian.PutUint32(hdr[1:5], c.mode)
		binary.BigEndian.PutUint64(hdr[5:13], uint64(len(c.name)))
		h.Write(hdr[:])
		io.WriteString(h, c.name)
		h.Write(c.hash[:])
	}
	h.Sum(n.hash[:0])
	return n.hash
}

// permBits returns m's POSIX permission bits, 07777.
func permBits(m fs.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		p |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		p |= 0o1000
	}
	return p
}

func specialKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeCharDevice != 0:
		return "character device"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "irregular file"
}

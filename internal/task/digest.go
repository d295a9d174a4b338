package task

import (
	"bytes"
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

	"golang.org/x/sys/unix"
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
	kindChar    = 'c'
	kindBlock   = 'b'
	kindFifo    = 'p'
	kindSocket  = 's'
)

// Digest returns the Merkle digest of the tree at dir, "sha256:" followed by
// 64 lower-case hex digits. It never follows a symbolic link inside the tree
// (dir itself may be one) and reads files with a fixed amount of memory,
// several at a time.
//
// The digest depends only on names, kinds, permission bits, file contents,
// link targets and device numbers: never on modification times, owners,
// inode numbers or the order the file system lists entries in, so two
// copies of a tree made at different times or on different machines have
// the same digest as long as their permission bits agree. A fifo, socket
// or device file in the tree is an error (ErrSpecialFile) unless
// DigestTree is told it may be there, as is an entry that changes kind or
// identity while it is read (ErrChanged). Errors are *Error naming the path.
//
// Encoding, so that a verifier elsewhere can recompute it. H is SHA-256, ||
// concatenation, integers big-endian:
//
//	H(regular file) = H(its content)                  (what sha256sum prints)
//	H(symlink)      = H(its target, the bytes readlink returns)
//	H(device)       = H(major || minor), each 8 bytes  (character and block devices)
//	H(fifo), H(socket) = H("")                         (never opened)
//	H(directory)    = H("proctor-tree-v1" || 0x00 || E(c1) || E(c2) || ... || E(cn))
//
// where c1 … cn are the directory's entries other than "." and "..", sorted
// by name as byte strings, and
//
//	E(c) = kind    1 byte:  'f' (0x66) file, 'd' (0x64) directory, 'l' (0x6c) symlink,
//	                        'c' (0x63) character device, 'b' (0x62) block device,
//	                        'p' (0x70) fifo, 's' (0x73) socket
//	    || mode    4 bytes: the POSIX permission bits, mode & 07777 (rwx for
//	                        user, group and other, 04000 setuid, 02000 setgid,
//	                        01000 sticky); 0 for a symlink
//	    || len     8 bytes: the length of name in bytes
//	    || name    the entry's name as stored, no separator, no normalisation
//	    || H(c)    32 bytes
//
// The digest is DigestPrefix followed by hex(H(dir)); the mode and name of
// dir itself are not part of it. An empty directory hashes
// H("proctor-tree-v1\x00"). A tree without fifos, sockets and devices has
// the digest it had before the encoding knew them.
func Digest(dir string) (string, error) {
	return DigestCached(dir, nil)
}

// DigestCached is Digest with the content hashes of files taken from, and
// added to, cache (nil for none). The result is the same.
func DigestCached(dir string, cache *HashCache) (string, error) {
	d, err := DigestTree(dir, DigestOptions{Cache: cache})
	if err != nil {
		return "", err
	}
	return d.Digest, nil
}

// DigestOptions adjust DigestTree.
type DigestOptions struct {
	// Cache supplies and remembers content hashes (nil for none).
	Cache *HashCache
	// Special lists directories of the tree (relative to its root,
	// slash-separated, "." for all of it) below which fifos, sockets and
	// devices are digested by kind and device number, never opened: a
	// rootfs directory made by debootstrap has them under /dev. Anywhere
	// else they are ErrSpecialFile.
	Special []string
	// SpecialExcept lists directories below those of Special where they
	// are refused all the same (a workspace inside a rootfs).
	SpecialExcept []string
	// Subtrees names directories of the tree (relative, slash-separated)
	// whose own digests are wanted too: the same walk gives them.
	Subtrees []string
}

// TreeDigest is what DigestTree found: a plain value.
type TreeDigest struct {
	Digest   string            // the tree's, as Digest gives it
	Subtrees map[string]string // the digest of each DigestOptions.Subtrees entry that is a directory
	Special  []SpecialFile     // the fifos, sockets and devices found, sorted by path
}

// SpecialFile is a fifo, socket or device of a tree.
type SpecialFile struct {
	Path string      // relative to the tree's root, slash-separated
	Mode fs.FileMode // type and permission bits
	Rdev uint64      // a device's number; 0 for a fifo or socket
}

// DigestTree is Digest with options, giving more of what the walk saw.
func DigestTree(dir string, o DigestOptions) (*TreeDigest, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &Error{File: dir, Err: err}
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &Error{File: abs, Err: ErrMissing}
		}
		return nil, &Error{File: abs, Err: err}
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		if fi, serr := os.Stat(resolved); serr == nil && !fi.IsDir() {
			return nil, &Error{File: resolved, Err: ErrNotDir}
		}
		return nil, &Error{File: resolved, Err: err}
	}
	defer root.Close()

	w := &walker{root: root, base: resolved, cache: o.Cache, special: o.Special, except: o.SpecialExcept}
	top := &node{kind: kindDir, rel: "."}
	if err := w.walk(top, "."); err != nil {
		return nil, err
	}
	if err := w.hashFiles(); err != nil {
		return nil, err
	}
	sum := hashTree(top, sha256.New())
	d := &TreeDigest{Digest: DigestPrefix + hex.EncodeToString(sum[:]), Subtrees: map[string]string{}, Special: w.found}
	for _, sub := range o.Subtrees {
		if n := top.find(path.Clean(sub)); n != nil && n.kind == kindDir {
			d.Subtrees[sub] = DigestPrefix + hex.EncodeToString(n.hash[:])
		}
	}
	slices.SortFunc(d.Special, func(a, b SpecialFile) int { return strings.Compare(a.Path, b.Path) })
	return d, nil
}

// find returns the descendant of n at rel ("." for n), or nil.
func (n *node) find(rel string) *node {
	if rel == "." {
		return n
	}
	cur := n
	for _, name := range strings.Split(rel, "/") {
		i, ok := slices.BinarySearchFunc(cur.children, name, func(c *node, name string) int { return strings.Compare(c.name, name) })
		if !ok {
			return nil
		}
		cur = cur.children[i]
	}
	return cur
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
	// special: where fifos, sockets and devices may be; found: those met.
	special, except []string
	found           []SpecialFile
}

// specialAllowed reports whether a special file may be at rel.
func (w *walker) specialAllowed(rel string) bool {
	for _, d := range w.except {
		if d = path.Clean(d); d == "." || strings.HasPrefix(rel, d+"/") {
			return false
		}
	}
	for _, d := range w.special {
		if d = path.Clean(d); d == "." || strings.HasPrefix(rel, d+"/") {
			return true
		}
	}
	return false
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
			if !w.specialAllowed(crel) {
				return w.errorAt(crel, errorf(ErrSpecialFile, "special file (%s): a task must not contain fifos, sockets or devices outside its rootfs", specialKind(m)))
			}
			var rdev uint64
			switch {
			case m&fs.ModeCharDevice != 0:
				c.kind, rdev = kindChar, rdevOf(info)
			case m&fs.ModeDevice != 0:
				c.kind, rdev = kindBlock, rdevOf(info)
			case m&fs.ModeNamedPipe != 0:
				c.kind = kindFifo
			case m&fs.ModeSocket != 0:
				c.kind = kindSocket
			default:
				return w.errorAt(crel, errorf(ErrSpecialFile, "special file (%s)", specialKind(m)))
			}
			if c.kind == kindChar || c.kind == kindBlock {
				var num [16]byte
				binary.BigEndian.PutUint64(num[:8], uint64(unix.Major(rdev)))
				binary.BigEndian.PutUint64(num[8:], uint64(unix.Minor(rdev)))
				c.hash = sha256.Sum256(num[:])
			} else {
				c.hash = sha256.Sum256(nil)
			}
			w.found = append(w.found, SpecialFile{Path: crel, Mode: m, Rdev: rdev})
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
	for _, c := range n.children {
		writeEntry(h, c.kind, c.mode, c.name, c.hash)
	}
	h.Sum(n.hash[:0])
	return n.hash
}

// writeEntry writes E(c), one entry of its directory's hash input.
func writeEntry(h io.Writer, kind byte, mode uint32, name string, sum [sha256.Size]byte) {
	var hdr [13]byte
	hdr[0] = kind
	binary.BigEndian.PutUint32(hdr[1:5], mode)
	binary.BigEndian.PutUint64(hdr[5:13], uint64(len(name)))
	h.Write(hdr[:])
	io.WriteString(h, name)
	h.Write(sum[:])
}

// TreeHasher computes a tree's Digest from its entries given one by one,
// depth first, each directory's children in Digest's order (by name, as
// byte strings) and right after the directory: what a reader of an archive
// of the tree can do without unpacking it. Modes are permission bits
// (07777; 0 for a symlink). It is not safe for concurrent use.
type TreeHasher struct {
	stack []*hashFrame // the directories entered and not yet left; [0] is the root
}

type hashFrame struct {
	name string
	mode uint32
	buf  bytes.Buffer // the directory's hash input so far
}

// NewTreeHasher returns a TreeHasher at the root of the tree.
func NewTreeHasher() *TreeHasher {
	t := &TreeHasher{}
	t.Enter("", 0)
	return t
}

// add appends a child of the current directory.
func (t *TreeHasher) add(kind byte, mode uint32, name string, sum [sha256.Size]byte) {
	writeEntry(&t.stack[len(t.stack)-1].buf, kind, mode, name, sum)
}

// Enter starts the directory name in the current one; its entries follow,
// then Leave.
func (t *TreeHasher) Enter(name string, mode uint32) {
	f := &hashFrame{name: name, mode: mode}
	f.buf.WriteString(treeTag)
	t.stack = append(t.stack, f)
}

// Leave ends the directory last entered. It reports false when there is
// none (the root is left by Sum).
func (t *TreeHasher) Leave() bool {
	if len(t.stack) < 2 {
		return false
	}
	top := t.stack[len(t.stack)-1]
	t.stack = t.stack[:len(t.stack)-1]
	t.add(kindDir, top.mode, top.name, sha256.Sum256(top.buf.Bytes()))
	return true
}

// File adds a regular file whose content has the SHA-256 sum.
func (t *TreeHasher) File(name string, mode uint32, sum [sha256.Size]byte) {
	t.add(kindFile, mode, name, sum)
}

// Symlink adds a symbolic link to target.
func (t *TreeHasher) Symlink(name, target string) {
	t.add(kindSymlink, 0, name, sha256.Sum256([]byte(target)))
}

// Device adds a character (block false) or block device.
func (t *TreeHasher) Device(name string, block bool, mode uint32, major, minor uint64) {
	var num [16]byte
	binary.BigEndian.PutUint64(num[:8], major)
	binary.BigEndian.PutUint64(num[8:], minor)
	kind := byte(kindChar)
	if block {
		kind = kindBlock
	}
	t.add(kind, mode, name, sha256.Sum256(num[:]))
}

// Fifo adds a fifo (socket false) or a socket.
func (t *TreeHasher) Fifo(name string, socket bool, mode uint32) {
	kind := byte(kindFifo)
	if socket {
		kind = kindSocket
	}
	t.add(kind, mode, name, sha256.Sum256(nil))
}

// Sum leaves every directory still entered and returns the tree's digest,
// as Digest gives it.
func (t *TreeHasher) Sum() string {
	for t.Leave() {
	}
	sum := sha256.Sum256(t.stack[0].buf.Bytes())
	return DigestPrefix + hex.EncodeToString(sum[:])
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

// rdevOf returns the device number of a device's lstat.
func rdevOf(info fs.FileInfo) uint64 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Rdev)
	}
	return 0
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

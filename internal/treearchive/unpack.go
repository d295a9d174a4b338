package treearchive

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/task"
)

// Verify reads a whole archive and checks it is canonical and within lim,
// writing nothing: it returns the archive's summary and the Merkle digest
// (task.Digest) of the tree it unpacks to.
func Verify(r io.Reader, lim Limits) (*Summary, string, error) {
	rd := newReader(r, lim)
	h := task.NewTreeHasher()
	leave := func(frame) error {
		h.Leave()
		return nil
	}
	buf := make([]byte, 256<<10)
	first := true
	for {
		e, err := rd.next(leave)
		if err != nil {
			return nil, "", err
		}
		if e == nil {
			break
		}
		if first {
			first = false // the root: Sum takes it
			continue
		}
		switch e.kind {
		case kindDir:
			h.Enter(e.name, e.meta.mode)
		case kindFile, kindLinked:
			s := sha256.New()
			if _, err := io.CopyBuffer(s, rd, buf); err != nil {
				return nil, "", err
			}
			var sum [sha256.Size]byte
			s.Sum(sum[:0])
			h.File(e.name, e.meta.mode, sum)
			if e.kind == kindLinked {
				rd.linked[e.path].sum = sum
			}
		case kindHardlink:
			h.File(e.name, e.meta.mode, rd.linked[e.target].sum)
		case kindSymlink:
			h.Symlink(e.name, e.target)
		case kindChar, kindBlock:
			h.Device(e.name, e.kind == kindBlock, e.meta.mode, e.major, e.minor)
		case kindFifo, kindSocket:
			h.Fifo(e.name, e.kind == kindSocket, e.meta.mode)
		}
	}
	return rd.summary(), h.Sum(), nil
}

// UnpackOptions adjust Unpack.
type UnpackOptions struct {
	Limits Limits
	// Owners gives every entry the owner and group the archive records
	// (which needs root); without it they belong to the caller.
	Owners bool
	// FilesOnly refuses every entry but directories and regular files
	// (no hard links), and any set-id or sticky bit: for trees from a
	// party that must not plant a device, a fifo or a set-id program
	// (a worker's trial output, on the coordinator).
	FilesOnly bool
}

// Unpack unpacks an archive into dir, an empty directory (which takes the
// root's mode, owner and time), and returns the archive's summary. Every
// entry is made with *at calls beneath dir, in directories Unpack made; a
// hard link only to a file it made. On error dir holds a partial tree: the
// caller unpacks into a directory of its own and removes it (and should
// make it unreadable to others: a device node is a device node).
func Unpack(r io.Reader, dir string, o UnpackOptions) (*Summary, error) {
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &PathError{Op: "open", Path: dir, Err: err}
	}
	u := &unpacker{o: o, root: root, rd: newReader(r, o.Limits)}
	defer u.closeAll()
	if !emptyDir(root) {
		return nil, &PathError{Op: "unpack", Path: dir, Err: errors.New("not an empty directory")}
	}
	buf := make([]byte, 256<<10)
	for {
		e, err := u.rd.next(u.leave)
		if err != nil {
			return nil, err
		}
		if e == nil {
			break
		}
		if o.FilesOnly && (e.kind != kindDir && e.kind != kindFile || e.meta.mode&0o7000 != 0) {
			return nil, &PathError{Op: "unpack", Path: e.path, Err: fmt.Errorf("only directories and plain files may be here (kind %q, mode %#o)", e.kind, e.meta.mode)}
		}
		if err := u.put(e, buf); err != nil {
			return nil, err
		}
	}
	return u.rd.summary(), nil
}

// emptyDir reports whether the directory open as fd has no entries.
func emptyDir(fd int) bool {
	d, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	f := os.NewFile(uintptr(d), ".")
	defer f.Close()
	names, err := f.Readdirnames(1)
	return len(names) == 0 && err == io.EOF
}

type unpacker struct {
	o    UnpackOptions
	root int
	rd   *reader
}

// closeAll closes the descriptors of directories still open (an error
// stopped the unpacking) and the root's.
func (u *unpacker) closeAll() {
	for _, f := range u.rd.stack {
		if f.fd >= 0 && f.fd != u.root {
			unix.Close(f.fd)
		}
	}
	unix.Close(u.root)
}

// leave gives a finished directory its owner, mode and times: last, since
// making its children moved its times and its mode may forbid writing.
func (u *unpacker) leave(f frame) error {
	defer func() {
		if f.fd != u.root {
			unix.Close(f.fd)
		}
	}()
	if err := u.setMeta(f.fd, "", f.meta, true); err != nil {
		return &PathError{Op: "unpack", Path: f.path, Err: err}
	}
	return nil
}

// put makes one entry.
func (u *unpacker) put(e *entry, buf []byte) error {
	fail := func(op string, err error) error { return &PathError{Op: op, Path: e.path, Err: err} }
	top := &u.rd.stack[len(u.rd.stack)-1]
	if e.path == "." {
		top.fd = u.root
		return nil
	}
	if e.kind == kindDir {
		top = &u.rd.stack[len(u.rd.stack)-2] // the new frame is the entry's own
	}
	pfd := top.fd
	switch e.kind {
	case kindDir:
		if err := unix.Mkdirat(pfd, e.name, 0o700); err != nil {
			return fail("mkdir", err)
		}
		fd, err := unix.Openat(pfd, e.name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fail("open", err)
		}
		u.rd.stack[len(u.rd.stack)-1].fd = fd
		return nil
	case kindFile, kindLinked:
		fd, err := unix.Openat(pfd, e.name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return fail("create", err)
		}
		f := os.NewFile(uintptr(fd), e.name) // owns fd
		defer f.Close()
		// Plain writes of buf: no ReaderFrom tricks on the archive's bytes.
		if _, err := io.CopyBuffer(struct{ io.Writer }{f}, u.rd, buf); err != nil {
			var fe *FormatError
			if errors.As(err, &fe) {
				return err
			}
			return fail("write", err)
		}
		if err := u.setMeta(fd, "", e.meta, true); err != nil {
			return fail("unpack", err)
		}
		return nil
	case kindHardlink:
		dir, name := parentOf(e.target)
		tfd := u.root
		if dir != "." {
			fd, err := unix.Openat2(u.root, dir, &unix.OpenHow{
				Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
				Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
			})
			if err != nil {
				return fail("link", err)
			}
			defer unix.Close(fd)
			tfd = fd
		}
		if err := unix.Linkat(tfd, name, pfd, e.name, 0); err != nil {
			return fail("link", err)
		}
		return nil
	case kindSymlink:
		if err := unix.Symlinkat(e.target, pfd, e.name); err != nil {
			return fail("symlink", err)
		}
	case kindChar, kindBlock:
		mode := uint32(unix.S_IFCHR)
		if e.kind == kindBlock {
			mode = unix.S_IFBLK
		}
		if err := unix.Mknodat(pfd, e.name, mode|0o600, int(unix.Mkdev(uint32(e.major), uint32(e.minor)))); err != nil {
			if errors.Is(err, unix.EPERM) {
				err = errors.New("making a device node needs root (CAP_MKNOD)")
			}
			return fail("mknod", err)
		}
	case kindFifo:
		if err := unix.Mkfifoat(pfd, e.name, 0o600); err != nil {
			return fail("mkfifo", err)
		}
	case kindSocket:
		if err := unix.Mknodat(pfd, e.name, unix.S_IFSOCK|0o600, 0); err != nil {
			return fail("mknod", err)
		}
	}
	if err := u.setMeta(pfd, e.name, e.meta, e.kind != kindSymlink); err != nil {
		return fail("unpack", err)
	}
	return nil
}

// setMeta gives the inode at (dirfd, name), or dirfd itself when name is
// "", the owner (with Owners), then the mode (chown clears set-id bits;
// symlinks have none), then the times.
func (u *unpacker) setMeta(dirfd int, name string, m meta, mode bool) error {
	flags := unix.AT_SYMLINK_NOFOLLOW
	if name == "" {
		flags = unix.AT_EMPTY_PATH
	}
	if u.o.Owners {
		if err := unix.Fchownat(dirfd, name, int(m.uid), int(m.gid), flags); err != nil {
			return err
		}
	}
	if mode {
		if name == "" {
			if err := unix.Fchmod(dirfd, m.mode); err != nil {
				return err
			}
		} else if err := unix.Fchmodat(dirfd, name, m.mode, 0); err != nil {
			return err
		}
	}
	ts := []unix.Timespec{{Sec: 0, Nsec: unix.UTIME_OMIT}, {Sec: m.sec, Nsec: int64(m.nsec)}}
	if name == "" {
		return futimens(dirfd, ts)
	}
	return unix.UtimesNanoAt(dirfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// futimens sets the times of the open file fd (utimensat with a NULL path).
func futimens(fd int, ts []unix.Timespec) error {
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

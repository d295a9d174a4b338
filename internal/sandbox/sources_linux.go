package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// firstSourceFD is init's descriptor number of the first host-made mount.
const firstSourceFD = 5

const (
	attrRootfs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	attrDev    = unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NOEXEC
)

// collectSources fills is.Root, is.Dev and is.Binds from the spec, looking up
// every host path on the host side. As root it also clones each source into a
// detached mount and returns the descriptors, to be handed to init in order
// from firstSourceFD. On error nothing is left open.
//
// Only overlay lowers are idmapped (read-only; see overlay_linux.go): inside
// a bind, as everywhere, the sandbox's ids are
// the unprivileged host range, so what it writes through a writable bind
// belongs to those ids, never to a host user (and scrubSetID takes back any
// set-id bit once the run is over).
func collectSources(s *Spec, is *initSpec) (files []*os.File, err error) {
	detach := os.Geteuid() == 0
	defer func() {
		if err != nil {
			closeAll(files)
			files = nil
		}
	}()
	newSource := func(path string, attr uint64, isFile bool) (*source, error) {
		src := &source{Path: path, FD: -1, Attr: attr, IsFile: isFile}
		if detach {
			fd, err := cloneTree(path, attr)
			if err != nil {
				return nil, err
			}
			src.FD = firstSourceFD + len(files)
			files = append(files, os.NewFile(uintptr(fd), path))
		}
		return src, nil
	}

	if err := collectRootfs(s, is, detach, &files); err != nil {
		return nil, err
	}

	for _, n := range devNodes {
		src, err := newSource("/dev/"+n, attrDev, true)
		if err != nil {
			return nil, &SetupError{Step: "binding /dev/" + n, Err: err}
		}
		is.Dev = append(is.Dev, rootEntry{Name: n, Src: src})
	}

	for _, b := range s.Binds {
		fi, err := os.Stat(b.Src)
		if err != nil {
			return nil, &SpecError{Field: "bind", Value: b.Src, Err: err}
		}
		attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
		if !b.Writable {
			attr |= unix.MOUNT_ATTR_RDONLY
		}
		src, err := newSource(b.Src, attr, !fi.IsDir())
		if err != nil {
			return nil, &SetupError{Step: "binding " + b.Src, Err: err}
		}
		is.Binds = append(is.Binds, bindMount{Dst: b.Dst, Src: *src})
	}

	for i := range s.Overlays {
		o := &s.Overlays[i]
		m, err := mountOverlay(o)
		if err != nil {
			return nil, &SetupError{Step: "mounting the overlay at " + o.Dst, Err: err}
		}
		src := &source{Path: "overlay:" + o.Dst, FD: firstSourceFD + len(files)}
		files = append(files, os.NewFile(uintptr(m), src.Path))
		if o.Dst == "/" {
			is.RootMount = src
		} else {
			is.Binds = append(is.Binds, bindMount{Dst: o.Dst, Src: *src})
		}
	}

	for _, t := range s.Trees {
		fd, err := unix.FcntlInt(t.Mount.Fd(), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			return nil, &SetupError{Step: "taking the mount for " + t.Dst, Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, &SetupError{Step: "taking the mount for " + t.Dst, Err: err}
		}
		src := &source{Path: "tree:" + t.Dst, FD: firstSourceFD + len(files), IsFile: st.Mode&unix.S_IFMT != unix.S_IFDIR}
		files = append(files, os.NewFile(uintptr(fd), src.Path))
		is.Trees = append(is.Trees, bindMount{Dst: t.Dst, Src: *src})
	}
	return files, nil
}

// collectRootfs fills is.Root from the spec's rootfs (nothing when an overlay
// is the root), appending the detached mounts it makes to files.
func collectRootfs(s *Spec, is *initSpec, detach bool, files *[]*os.File) error {
	if s.Rootfs == "" {
		return nil
	}
	rootDir, names := s.Rootfs, []string(nil)
	if s.Rootfs == RootfsHost {
		rootDir = "/"
		for _, d := range HostDirs {
			names = append(names, strings.TrimPrefix(d, "/"))
		}
	} else {
		des, err := os.ReadDir(rootDir)
		if err != nil {
			return &SpecError{Field: "rootfs", Value: rootDir, Err: err}
		}
		for _, de := range des {
			if !reservedRootEntries[de.Name()] {
				names = append(names, de.Name())
			}
		}
	}
	// The rootfs may be writable by someone else (an image another sandbox
	// could change): its entries are opened beneath it without following any
	// symlink, and the mount is cloned from that descriptor, never by name.
	dirfd, err := unix.Open(rootDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &SpecError{Field: "rootfs", Value: rootDir, Err: err}
	}
	defer unix.Close(dirfd)
	for _, name := range names {
		p := filepath.Join(rootDir, name)
		fd, err := openEntry(dirfd, name)
		if errors.Is(err, unix.ENOENT) && s.Rootfs == RootfsHost {
			continue // a host without /lib64, say
		}
		if err != nil {
			return &SpecError{Field: "rootfs", Value: p, Err: err}
		}
		entry, err := rootfsEntry(fd, name, p, detach)
		unix.Close(fd)
		if err != nil {
			return &SetupError{Step: "binding rootfs entry " + p, Err: err}
		}
		if entry.Name == "" {
			continue // device nodes, fifos and sockets are not carried in
		}
		if entry.fd >= 0 {
			entry.Src.FD = firstSourceFD + len(*files)
			*files = append(*files, os.NewFile(uintptr(entry.fd), p))
		}
		is.Root = append(is.Root, entry.rootEntry)
	}
	return nil
}

// mount returns a detached mount of the source, made now (without root) or
// received from the host (as root). The caller owns the descriptor.
func (s *source) mount() (int, error) {
	if s.FD >= 0 {
		unix.CloseOnExec(s.FD)
		return s.FD, nil
	}
	if !s.Beneath {
		fd, err := cloneTree(s.Path, s.Attr)
		if err != nil {
			return -1, fmt.Errorf("%s: %w", s.Path, err)
		}
		return fd, nil
	}
	dirfd, err := unix.Open(filepath.Dir(s.Path), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(dirfd)
	fd, err := openEntry(dirfd, filepath.Base(s.Path))
	if err != nil {
		return -1, fmt.Errorf("%s: %w", s.Path, err)
	}
	defer unix.Close(fd)
	// The same look the host takes as root (rootfsEntry), now from init.
	e, err := rootfsEntry(fd, filepath.Base(s.Path), s.Path, true)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", s.Path, err)
	}
	if e.Src == nil || e.Src.IsFile != s.IsFile {
		if e.fd >= 0 {
			unix.Close(e.fd)
		}
		return -1, fmt.Errorf("%s changed type since it was looked at", s.Path)
	}
	return e.fd, nil
}

// openEntry opens name in dirfd as an O_PATH descriptor without following any
// symlink: a symlink is opened as itself.
func openEntry(dirfd int, name string) (int, error) {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return -1, fmt.Errorf("bad entry name %q", name)
	}
	return unix.Openat2(dirfd, name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// openedEntry is a rootfs entry and, as root, its detached mount (fd, or -1).
type openedEntry struct {
	rootEntry
	fd int
}

// rootfsEntry describes the entry open at fd: a symlink to recreate, a
// directory or file to mount (cloned from fd itself when detach is set), or
// nothing (Name "") for anything else.
func rootfsEntry(fd int, name, path string, detach bool) (openedEntry, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return openedEntry{}, err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return openedEntry{}, err
		}
		return openedEntry{rootEntry: rootEntry{Name: name, Link: string(buf[:n])}, fd: -1}, nil
	case unix.S_IFDIR, unix.S_IFREG:
		src := &source{Path: path, FD: -1, Attr: attrRootfs, IsFile: st.Mode&unix.S_IFMT == unix.S_IFREG, Beneath: true}
		e := openedEntry{rootEntry: rootEntry{Name: name, Src: src}, fd: -1}
		if detach {
			m, err := detachTree(fd, "", unix.AT_EMPTY_PATH, attrRootfs)
			if err != nil {
				return openedEntry{}, err
			}
			e.fd = m // the caller numbers it (src.FD)
		}
		return e, nil
	}
	return openedEntry{}, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

package sandbox

import (
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
// Nothing is idmapped: inside a bind, as everywhere, the sandbox's ids are
// the unprivileged host range, so what it writes through a writable bind
// belongs to those ids and can never be a host user's setuid program.
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

	rootDir, names := s.Rootfs, []string(nil)
	if s.Rootfs == RootfsHost {
		rootDir = "/"
		for _, d := range HostDirs {
			names = append(names, strings.TrimPrefix(d, "/"))
		}
	} else {
		des, err := os.ReadDir(rootDir)
		if err != nil {
			return nil, &SpecError{Field: "rootfs", Value: rootDir, Err: err}
		}
		for _, de := range des {
			if !reservedRootEntries[de.Name()] {
				names = append(names, de.Name())
			}
		}
	}
	for _, name := range names {
		p := filepath.Join(rootDir, name)
		fi, err := os.Lstat(p)
		if os.IsNotExist(err) && s.Rootfs == RootfsHost {
			continue // a host without /lib64, say
		}
		if err != nil {
			return nil, &SpecError{Field: "rootfs", Value: p, Err: err}
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return nil, &SpecError{Field: "rootfs", Value: p, Err: err}
			}
			is.Root = append(is.Root, rootEntry{Name: name, Link: target})
		case fi.IsDir() || fi.Mode().IsRegular():
			src, err := newSource(p, attrRootfs, !fi.IsDir())
			if err != nil {
				return nil, &SetupError{Step: "binding rootfs entry " + p, Err: err}
			}
			is.Root = append(is.Root, rootEntry{Name: name, Src: src})
		default:
			// Device nodes, fifos and sockets in a rootfs are not carried in.
		}
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
	return files, nil
}

// mount returns a detached mount of the source, made now (without root) or
// received from the host (as root). The caller owns the descriptor.
func (s *source) mount() (int, error) {
	if s.FD >= 0 {
		unix.CloseOnExec(s.FD)
		return s.FD, nil
	}
	fd, err := cloneTree(s.Path, s.Attr)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", s.Path, err)
	}
	return fd, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

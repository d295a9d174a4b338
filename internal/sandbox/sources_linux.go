package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

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
// As root, user binds are idmapped: the sandbox's ids are shifted back onto
// the host's, so root inside acts as the bound tree's owner (it can read what
// the host's root can, and what it writes belongs to the host's root). The
// root file system is not: what it holds keeps belonging to host ids the
// sandbox does not have.
func collectSources(s *Spec, is *initSpec) (files []*os.File, err error) {
	detach := os.Geteuid() == 0
	defer func() {
		if err != nil {
			closeAll(files)
			files = nil
		}
	}()
	newSource := func(path string, attr uint64, isFile, idmap bool) (*source, error) {
		src := &source{Path: path, FD: -1, Attr: attr, IsFile: isFile}
		if detach {
			fd, err := cloneTree(path, attr)
			if err != nil {
				return nil, err
			}
			src.FD = firstSourceFD + len(files)
			files = append(files, os.NewFile(uintptr(fd), path))
			if idmap {
				if err := idmapMount(fd); err != nil {
					return nil, err
				}
			}
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
			src, err := newSource(p, attrRootfs, !fi.IsDir(), false)
			if err != nil {
				return nil, &SetupError{Step: "binding rootfs entry " + p, Err: err}
			}
			is.Root = append(is.Root, rootEntry{Name: name, Src: src})
		default:
			// Device nodes, fifos and sockets in a rootfs are not carried in.
		}
	}

	for _, n := range devNodes {
		src, err := newSource("/dev/"+n, attrDev, true, false)
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
		src, err := newSource(b.Src, attr, !fi.IsDir(), true)
		if err != nil {
			return nil, &SetupError{Step: "binding " + b.Src, Err: err,
				Hint: "as root, a bind is shown through an idmapped mount, which its filesystem must support"}
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

// The user namespace whose id map idmapped binds use: the sandbox's own map.
var (
	idmapOnce sync.Once
	idmapFD   int
	idmapErr  error
)

// idmapMount makes the detached mount fd show host ids as the sandbox sees
// them.
func idmapMount(fd int) error {
	idmapOnce.Do(func() { idmapFD, idmapErr = newIdmapUserns() })
	if idmapErr != nil {
		return fmt.Errorf("creating the id-mapping user namespace: %w", idmapErr)
	}
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(idmapFD)}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
		return fmt.Errorf("idmapping: %w", err)
	}
	return nil
}

// newIdmapUserns returns a descriptor of a user namespace with the sandbox's
// id map, made by a short-lived holder process (this binary, blocked on its
// stdin). It is made once per supervisor process.
func newIdmapUserns() (int, error) {
	self, err := os.Executable()
	if err != nil {
		return -1, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return -1, err
	}
	defer w.Close()
	uidMap, gidMap, setgroups := idMaps()
	pid, err := syscall.ForkExec(self, []string{"proctor", InitCommand, usernsHolderFlag}, &syscall.ProcAttr{
		Files: []uintptr{r.Fd()},
		Sys: &syscall.SysProcAttr{
			Cloneflags:                 syscall.CLONE_NEWUSER,
			UidMappings:                uidMap,
			GidMappings:                gidMap,
			GidMappingsEnableSetgroups: setgroups,
			Pdeathsig:                  syscall.SIGKILL,
		},
	})
	r.Close()
	if err != nil {
		return -1, err
	}
	defer func() {
		w.Close() // the holder sees end-of-file and exits
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); !errors.Is(err, syscall.EINTR) {
				break
			}
		}
	}()
	return unix.Open(fmt.Sprintf("/proc/%d/ns/user", pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
}

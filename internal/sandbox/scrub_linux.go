package sandbox

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// scrubSetID clears the setuid and setgid bits of every regular file under
// dir that belongs to the sandbox's ids, once no process of the sandbox is
// left. Every sandbox shares one host id range, so a setuid program the
// command leaves in a writable bind would hand whoever runs it on the host
// that range: the processes and writable binds of every other sandbox.
//
// The walk never follows a symlink and never leaves a directory by name: each
// entry is opened beneath its parent with RESOLVE_NO_SYMLINKS, and bits are
// cleared through the descriptor.
func scrubSetID(dir string) error {
	root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	stack := []int{root}
	var errs []error
	for len(stack) > 0 {
		dfd := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		subdirs, err := scrubDir(dfd)
		unix.Close(dfd)
		if err != nil {
			errs = append(errs, err)
		}
		stack = append(stack, subdirs...)
	}
	return errors.Join(errs...)
}

// scrubDir clears set-id bits on the sandbox-owned regular files directly in
// dfd (an O_PATH descriptor) and returns O_PATH descriptors of its
// subdirectories.
func scrubDir(dfd int) ([]int, error) {
	d, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(d), "dir")
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return nil, err
	}
	var subdirs []int
	for _, name := range names {
		fd, err := openEntry(dfd, name)
		if err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EXDEV) {
				continue
			}
			return subdirs, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return subdirs, err
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			subdirs = append(subdirs, fd)
			continue
		case unix.S_IFREG:
			if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 && sandboxOwned(st) {
				mode := st.Mode & (0o777 | unix.S_ISVTX)
				if err := unix.Fchmodat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), mode, 0); err != nil {
					unix.Close(fd)
					return subdirs, fmt.Errorf("clearing set-id bits of %s: %w", name, err)
				}
			}
		}
		unix.Close(fd)
	}
	return subdirs, nil
}

// sandboxOwned reports whether a file's owner or group is one of the ids
// root-run sandboxes use.
func sandboxOwned(st unix.Stat_t) bool {
	in := func(id uint32) bool { return id >= IDMapBase && id < IDMapBase+IDMapSize }
	return in(st.Uid) || in(st.Gid)
}

package cgroup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// sysfs is the package's view of the filesystem. Production code uses
// hostFS; tests point root at a temporary tree and replace the hooks with a
// fake kernel so the cgroup v2 paths run on machines without them.
//
// A sysfs is immutable after construction and safe for concurrent use.
type sysfs struct {
	root     string                        // prefix for /proc and every mount point
	mkdir    func(path string) error       // create a cgroup directory
	rmdir    func(path string) error       // remove a cgroup directory
	write    func(path, data string) error // write one value to an interface file
	writable func(path string) bool        // may the caller write to path?
	euid     func() int                    // the caller's effective uid
}

func hostFS() *sysfs {
	return &sysfs{
		root:     "/",
		mkdir:    func(p string) error { return os.Mkdir(p, 0o755) },
		rmdir:    rmdirPath,
		write:    writeFile,
		writable: canWrite,
		euid:     os.Geteuid,
	}
}

// abs maps an absolute path as the kernel reports it to where it is on this
// sysfs.
func (s *sysfs) abs(p string) string { return filepath.Join(s.root, p) }

func rmdirPath(p string) error {
	if err := unix.Rmdir(p); err != nil {
		return &os.PathError{Op: "rmdir", Path: p, Err: err}
	}
	return nil
}

// writeFile writes data to an existing cgroup interface file in a single
// write, as the kernel parses each write on its own. It never creates files.
func writeFile(path, data string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, werr := f.WriteString(data)
	cerr := f.Close()
	if werr != nil {
		return werr
	}
	return cerr
}

func canWrite(path string) bool {
	return unix.Faccessat(unix.AT_FDCWD, path, unix.W_OK, unix.AT_EACCESS) == nil
}

// readOptional reads a file that may legitimately be absent (an older kernel,
// a controller not enabled). found is false when it does not exist.
func readOptional(path string) (data string, found bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return string(b), true, nil
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

package diskfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Options say what filesystem Mount makes.
type Options struct {
	// SizeBytes is what the filesystem's files may use, at least.
	SizeBytes int64
	// TemplateDir is where formatted templates are kept, one per size
	// (a few hundred KiB each, sparse); created when missing.
	TemplateDir string
}

// FS is one mounted filesystem. Its methods are safe for one goroutine at
// a time; it owns its mount until Unmount.
type FS struct {
	dir, dev string
}

// mountOptions: never zero the inode tables behind the caller's back
// (they stay holes); no cache flushes on fsync (nothing here has to
// survive a crash: fsync still writes the data to the image).
const mountOptions = "noinit_itable,nobarrier"

// Mount makes a filesystem of at least o.SizeBytes and mounts it at dir,
// an empty directory, nosuid and nodev. Its image is a nameless file in
// dir's parent, which must be on a disk (see OnDisk). Needs root.
func Mount(dir string, o Options) (*FS, error) {
	if o.SizeBytes <= 0 {
		return nil, &SetupError{Step: "sizing a filesystem", Err: fmt.Errorf("size %d", o.SizeBytes)}
	}
	if o.TemplateDir == "" {
		return nil, &SetupError{Step: "finding the templates", Err: errors.New("no template directory")}
	}
	parent := filepath.Dir(dir)
	if err := OnDisk(parent); err != nil {
		return nil, err
	}
	if err := unix.Access(loopControl, unix.R_OK|unix.W_OK); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoLoop, loopControl, err)
	}
	tmpl, err := template(o.TemplateDir, imageSize(o.SizeBytes))
	if err != nil {
		return nil, err
	}
	img, err := newImage(tmpl, parent)
	if err != nil {
		return nil, err
	}
	defer img.Close() // the loop device holds it from now on
	dev, path, err := attach(img, filepath.Base(dir), dir)
	if err != nil {
		return nil, err
	}
	defer dev.Close() // AUTOCLEAR: the mount holds it from now on
	if err := fill(dev, tmpl); err != nil {
		return nil, err
	}
	if err := unix.Mount(path, dir, "ext4", unix.MS_NOSUID|unix.MS_NODEV, mountOptions); err != nil {
		return nil, &SetupError{Step: fmt.Sprintf("mounting %s on %s", path, dir), Err: err}
	}
	return &FS{dir: dir, dev: path}, nil
}

// Dir is where the filesystem is mounted.
func (f *FS) Dir() string { return f.dir }

// Device is the loop device it was mounted from.
func (f *FS) Device() string { return f.dev }

// Usage is how full a filesystem is, as its users see it.
type Usage struct {
	SizeBytes  int64  // what files may use, in all
	AvailBytes int64  // what is left for them
	Inodes     uint64 // files it can hold, in all
	FreeInodes uint64
}

// Usage reads how full the filesystem is now.
func (f *FS) Usage() (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(f.dir, &st); err != nil {
		return Usage{}, fmt.Errorf("statfs %s: %w", f.dir, err)
	}
	if st.Type != unix.EXT4_SUPER_MAGIC {
		return Usage{}, fmt.Errorf("statfs %s: not the filesystem mounted there (type %#x)", f.dir, st.Type)
	}
	return usageOf(&st), nil
}

// Measure reads how full the filesystem at dir is, whatever it is (a
// tmpfs with a size, say).
func Measure(dir string) (Usage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Usage{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return usageOf(&st), nil
}

func usageOf(st *unix.Statfs_t) Usage {
	bs := st.Bsize
	return Usage{SizeBytes: int64(st.Blocks) * bs, AvailBytes: int64(st.Bavail) * bs,
		Inodes: st.Files, FreeInodes: st.Ffree}
}

// Full reports whether a write could have failed for want of space: less
// than fullSlack left, or no inode to spare. A writer that met ENOSPC
// leaves at most a few blocks (measured: under 1 MiB after dd of 1 MiB
// blocks; ext4 holds back its reserved clusters from every user).
func (u Usage) Full() bool {
	return u.AvailBytes < fullSlack(u.SizeBytes) || u.FreeInodes < 16
}

// fullSlack is how little space left counts as full: 1/512 of the size,
// between 2 and 16 MiB.
func fullSlack(size int64) int64 {
	return min(max(size/512, 2<<20), 16<<20)
}

// Unmount takes the filesystem away. The loop device and the image go
// with the last user of the mount (at once, unless a process still holds
// a file there).
func (f *FS) Unmount() error {
	if err := unix.Unmount(f.dir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting %s: %w", f.dir, err)
	}
	return nil
}

// Remove unmounts whatever is mounted at dir (lazily; nothing there is
// fine) and removes the directory, with any device node Mount left in it
// when its process was killed at the wrong moment. For clearing up after
// a process that no longer exists.
func Remove(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmounting %s: %w", dir, err)
	}
	err := os.Remove(dir)
	if !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EEXIST) {
		return err
	}
	des, rerr := os.ReadDir(dir)
	if rerr != nil {
		return rerr
	}
	for _, de := range des {
		if !strings.HasPrefix(de.Name(), nodePrefix) || de.Type()&os.ModeDevice == 0 {
			return fmt.Errorf("removing %s: %w", dir, err) // not ours to remove
		}
		if err := os.Remove(filepath.Join(dir, de.Name())); err != nil {
			return err
		}
	}
	return os.Remove(dir)
}

// Attached lists the loop devices attached to images made in dir (their
// backing files, as the kernel names them): what must be gone once every
// filesystem made there is unmounted.
func Attached(dir string) ([]string, error) {
	files, err := filepath.Glob("/sys/class/block/loop*/loop/backing_file")
	if err != nil {
		return nil, err
	}
	dir = filepath.Clean(dir)
	var found []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO) {
			continue // detached meanwhile (sysfs answers ENODEV as it goes)
		}
		if err != nil {
			return nil, err
		}
		if name := strings.TrimSpace(string(b)); strings.HasPrefix(name, dir+"/") {
			found = append(found, filepath.Base(filepath.Dir(filepath.Dir(f)))+": "+name)
		}
	}
	return found, nil
}

// memoryFS are filesystems held in memory, by statfs type.
var memoryFS = map[int64]string{unix.TMPFS_MAGIC: "tmpfs", unix.RAMFS_MAGIC: "ramfs"}

// OnDisk returns a *NotOnDiskError when dir's filesystem is held in
// memory.
func OnDisk(dir string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", dir, err)
	}
	if name, ok := memoryFS[int64(st.Type)]; ok {
		return &NotOnDiskError{Dir: dir, FSType: name}
	}
	return nil
}

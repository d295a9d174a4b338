package trial

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/cgroup"
	"github.com/proctor-sandbox/proctor/internal/diskfs"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

// Where a sandbox's writable layers live (Options.Storage).
const (
	// StorageDisk: a filesystem image of the task's storage_mb per
	// sandbox (internal/diskfs), as Docker's writable layer is disk.
	StorageDisk = "disk"
	// StorageMemory: a tmpfs of the task's storage_mb, whose pages count
	// against the phase's memory limit. Only when asked for by name, or
	// when this process cannot have loop devices; the verdict says why.
	StorageMemory = "memory"
)

// LimitStorage: a phase ended with its writable layers full (a write may
// have failed with ENOSPC).
const LimitStorage sandbox.Limit = "storage"

// StorageRef says where the sandboxes' writable layers lived.
type StorageRef struct {
	Backend string `json:"backend"`          // StorageDisk or StorageMemory
	SizeMB  int64  `json:"size_mb"`          // each sandbox's: the task's storage_mb
	Reason  string `json:"reason,omitempty"` // why not disk
}

// storageFor decides where the layers live: on disk, unless memory was
// asked for by name, or this process is not root (it can have no loop
// devices: the unprivileged mode's future), each said in the reason.
func storageFor(asked string, root bool, sizeMB int64) (*StorageRef, error) {
	switch {
	case asked == StorageMemory:
		return &StorageRef{Backend: StorageMemory, SizeMB: sizeMB, Reason: "asked for (--storage memory): the layers' pages count against memory_mb"}, nil
	case asked != "" && asked != StorageDisk:
		return nil, fmt.Errorf("--storage %q: want %s or %s", asked, StorageDisk, StorageMemory)
	case !root:
		return &StorageRef{Backend: StorageMemory, SizeMB: sizeMB, Reason: "not root: no loop devices; the layers' pages count against memory_mb"}, nil
	}
	return &StorageRef{Backend: StorageDisk, SizeMB: sizeMB}, nil
}

// scratch holds one sandbox's upper layers: its size caps what the
// sandbox can write, and taking it away frees everything.
type scratch struct {
	dir string
	fs  *diskfs.FS // nil for a tmpfs
}

// scratchPrefix starts every scratch directory's name; the creator's pid
// follows, so that a later run can tell an orphan from one in use.
const scratchPrefix = "proctor-scratch-"

// scratchParent is where scratch directories go: dir when given, else the
// temp dir when it is on a disk, else /var/tmp. An image must not be held
// in memory (diskfs.OnDisk).
func scratchParent(dir string) string {
	if dir != "" {
		return dir
	}
	if tmp := os.TempDir(); diskfs.OnDisk(tmp) == nil {
		return tmp
	}
	return "/var/tmp"
}

// newScratch makes a scratch space for the sandbox called name, of the
// task's storage, where r's storage says.
func (r *runner) newScratch(name string) (*scratch, error) {
	st := r.storage
	parent := scratchParent(r.o.ScratchDir)
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("%s%d-%s-", scratchPrefix, os.Getpid(), name))
	if err != nil {
		return nil, fmt.Errorf("creating scratch space: %w", err)
	}
	if st.Backend == StorageMemory {
		opts := fmt.Sprintf("mode=0755,size=%dm", st.SizeMB)
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			os.Remove(dir)
			return nil, fmt.Errorf("mounting scratch space on %s: %w", dir, err)
		}
		return &scratch{dir: dir}, nil
	}
	templates := filepath.Join(r.o.CacheDir, "diskfs")
	if r.o.CacheDir == "" {
		templates = filepath.Join(parent, "proctor-diskfs")
	}
	fs, err := diskfs.Mount(dir, diskfs.Options{SizeBytes: st.SizeMB << 20, TemplateDir: templates})
	if err != nil {
		os.Remove(dir)
		var nd *diskfs.NotOnDiskError
		if errors.As(err, &nd) {
			return nil, fmt.Errorf("the sandboxes' storage is disk: %w (give --scratch-dir a directory on a disk)", err)
		}
		return nil, fmt.Errorf("the sandboxes' storage is disk, and a disk for %s could not be made (--storage memory runs on a tmpfs, recorded in the verdict): %w", name, err)
	}
	return &scratch{dir: dir, fs: fs}, nil
}

// full reports whether the scratch space is full: a write in the phase
// that just ended may have failed for want of space.
func (s *scratch) full() (bool, error) {
	var u diskfs.Usage
	var err error
	if s.fs != nil {
		u, err = s.fs.Usage()
	} else {
		u, err = diskfs.Measure(s.dir)
	}
	if err != nil {
		return false, fmt.Errorf("reading what the sandbox wrote: %w", err)
	}
	return u.Full(), nil
}

// noteStorage records LimitStorage for phase when its scratch space is
// full: the limit that constrained it, unless another ended it.
func (r *runner) noteStorage(phase string, s *scratch) error {
	full, err := s.full()
	if err != nil || !full {
		return err
	}
	p := r.v.Phases[phase]
	p.LimitsHit = append(p.LimitsHit, LimitStorage)
	if p.Limit == sandbox.LimitNone {
		p.Limit = LimitStorage
	}
	r.v.Phases[phase] = p
	r.event(phase+".limit", detail("limit", string(LimitStorage)))
	return nil
}

// CleanStaleScratch removes what trials of dead proctor processes left in
// scratch directory dir ("" for the default); see cleanStaleScratch.
func CleanStaleScratch(dir string) error { return cleanStaleScratch(dir) }

// cleanStaleScratch unmounts and removes the scratch directories under
// parent that a proctor process which no longer exists left behind (it was
// killed mid-trial): their loop devices and images go with the mounts.
// Directories of live processes are never touched; a pid reused by
// another process only delays the clean-up.
func cleanStaleScratch(parent string) error {
	parent = scratchParent(parent)
	des, err := os.ReadDir(parent)
	if err != nil {
		return fmt.Errorf("looking for stale scratch space: %w", err)
	}
	for _, de := range des {
		rest, ok := strings.CutPrefix(de.Name(), scratchPrefix)
		if !ok || !de.IsDir() {
			continue
		}
		pidStr, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) && !cgroup.Zombie(pid) {
			continue // alive (or not ours to signal): in use
		}
		// Another process cleaning up at the same time may have removed
		// it first.
		if err := diskfs.Remove(filepath.Join(parent, de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing stale scratch space: %w", err)
		}
	}
	return nil
}

// tmpTree makes the sandbox's /tmp a directory of the scratch space, so
// that what it writes there is storage like the rest (under Docker, /tmp
// is part of the container's writable layer), not the sandbox's own
// tmpfs, whose pages are memory. It returns a detached mount of it
// (nosuid, nodev, private) for sandbox.Spec.Trees; the caller closes it.
func (s *scratch) tmpTree() (sandbox.Tree, error) {
	dir := filepath.Join(s.dir, "tmp")
	err := os.Mkdir(dir, 0o755)
	if err == nil {
		err = os.Chown(dir, sandbox.RootID(), sandbox.RootID())
	}
	if err == nil {
		err = os.Chmod(dir, 0o1777) // past the umask
	}
	if err != nil {
		return sandbox.Tree{}, fmt.Errorf("creating the sandbox's /tmp: %w", err)
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return sandbox.Tree{}, fmt.Errorf("cloning the sandbox's /tmp: %w", err)
	}
	ma := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Propagation: unix.MS_PRIVATE}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, ma); err != nil {
		unix.Close(fd)
		return sandbox.Tree{}, fmt.Errorf("cloning the sandbox's /tmp: %w", err)
	}
	return sandbox.Tree{Dst: "/tmp", Mount: os.NewFile(uintptr(fd), dir)}, nil
}

func (s *scratch) close() error {
	if s == nil {
		return nil
	}
	if s.fs != nil {
		if err := s.fs.Unmount(); err != nil {
			return fmt.Errorf("unmounting scratch space: %w", err)
		}
	} else if err := unix.Unmount(s.dir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmounting scratch space %s: %w", s.dir, err)
	}
	return os.Remove(s.dir)
}

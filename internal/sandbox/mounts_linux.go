package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// reservedRootEntries are never taken from a rootfs directory: init provides
// its own.
var reservedRootEntries = map[string]bool{"proc": true, "dev": true, "sys": true, "tmp": true}

// devNodes are the only device nodes inside, bound from the host's /dev.
var devNodes = []string{"null", "zero", "full", "random", "urandom"}

// procMaskFiles and procMaskDirs hide kernel interfaces that leak host
// information, and procReadOnly are made read-only (Docker's lists, and the
// world-readable files among the rest). Files that are root-only on the host
// (kpage*, slabinfo, vmallocinfo, pagetypeinfo, …) need no mask: the sandbox's
// root is not the host's root, and TestFreshProc checks they stay unreadable.
var (
	procMaskFiles = []string{"kcore", "keys", "key-users", "latency_stats", "timer_list", "timer_stats", "sched_debug", "kallsyms", "buddyinfo"}
	procMaskDirs  = []string{"acpi", "scsi", "asound", "driver", "pressure"}
	procReadOnly  = []string{"sys", "bus", "fs", "irq", "sysrq-trigger"}
)

// attachCandidates is where the new root's tmpfs is attached before
// pivot_root. Everything from the host is cloned before it is attached, so
// shadowing the host directory in this private mount namespace does no harm.
var attachCandidates = []string{"/tmp", "/mnt", "/run", "/var/tmp"}

// rootBuilder assembles the sandbox's root in a private mount namespace.
// It is used once, by init, on one goroutine.
type rootBuilder struct {
	spec   *initSpec
	attach string // where the root tmpfs is attached (host path in this namespace)
	rootFD int    // O_PATH fd of the root directory
	mnt    int    // mount fd of the root tmpfs
	devMnt int    // mount fd of /dev's tmpfs
	masked bool   // the mask source (an empty read-only file) is attached
}

// maskSource is where, inside the root while it is built, the empty
// read-only file that masks files is attached; it is gone before pivot.
const maskSource = ".proctor-mask"

// build makes the root and pivots into it. On return the process's root and
// working directory are the new root.
func (b *rootBuilder) build() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return &SetupError{Step: "making mounts private", Err: err}
	}
	// Get every source as a detached mount first, while the host tree is
	// fully visible in this namespace.
	rootFDs, err := detachEntries(b.spec.Root)
	if err != nil {
		return err
	}
	devFDs, err := detachEntries(b.spec.Dev)
	if err != nil {
		return err
	}
	binds := make([]int, len(b.spec.Binds))
	for i := range b.spec.Binds {
		if binds[i], err = b.spec.Binds[i].Src.mount(); err != nil {
			return &SetupError{Step: "binding " + b.spec.Binds[i].Src.Path, Err: err}
		}
	}

	rootMnt := -1
	if b.spec.RootMount != nil {
		if rootMnt, err = b.spec.RootMount.mount(); err != nil {
			return &SetupError{Step: "receiving the root overlay", Err: err}
		}
	}
	if err := b.makeRoot(rootMnt); err != nil {
		return err
	}
	if err := b.placeEntries("/", b.spec.Root, rootFDs); err != nil {
		return err
	}
	if err := b.mountProc(); err != nil {
		return err
	}
	if err := b.mountDev(devFDs); err != nil {
		return err
	}
	if !b.spec.KeepTmp {
		if err := b.mountTmpfs("/tmp", 0, 0o1777, false); err != nil {
			return err
		}
	}
	// User mounts go shallowest first, so none covers another (a tmpfs
	// under a bind's destination lands on the bind, not under it).
	for _, um := range userMountOrder(b.spec) {
		if um.bind < 0 {
			t := b.spec.Tmpfs[um.tmpfs]
			if err := b.mountTmpfs(t.Dst, t.SizeBytes, 0o755, false); err != nil {
				return err
			}
			continue
		}
		bd := b.spec.Binds[um.bind]
		err := b.attachAt(binds[um.bind], bd.Dst, bd.Src.IsFile)
		unix.Close(binds[um.bind])
		if err != nil {
			return &SetupError{Step: fmt.Sprintf("binding %s at %s", bd.Src.Path, bd.Dst), Err: err,
				Hint: "the destination must exist in the root, or lie under /tmp or a --tmpfs"}
		}
	}
	for _, m := range b.spec.Masks {
		if err := b.mask(m); err != nil {
			return err
		}
	}
	// Trees go on top of the masks: a tree over a masked path (the trial's
	// trap) hides nothing by itself; if it were ever taken away, the mask
	// would still be there.
	for _, t := range b.spec.Trees {
		fd, err := t.Src.mount()
		if err == nil {
			err = b.attachAt(fd, t.Dst, t.Src.IsFile)
			unix.Close(fd)
		}
		if err != nil {
			return &SetupError{Step: "attaching " + t.Src.Path + " at " + t.Dst, Err: err}
		}
	}
	if err := b.hideProc(); err != nil {
		return err
	}
	if err := b.dropMaskSource(); err != nil {
		return err
	}
	ro := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}
	if err := unix.MountSetattr(b.devMnt, "", unix.AT_EMPTY_PATH, ro); err != nil {
		return &SetupError{Step: "making /dev read-only", Err: err}
	}
	if b.spec.RootMount == nil {
		if err := unix.MountSetattr(b.mnt, "", unix.AT_EMPTY_PATH, ro); err != nil {
			return &SetupError{Step: "making / read-only", Err: err}
		}
	}
	return b.pivot()
}

// userMount is one user bind (bind >= 0) or tmpfs (tmpfs >= 0).
type userMount struct {
	dst         string
	bind, tmpfs int
}

// userMountOrder lists the user's binds and tmpfs mounts by depth of their
// destination, in the order given among equals. Validation has refused two
// mounts on one destination.
func userMountOrder(spec *initSpec) []userMount {
	var ms []userMount
	for i, b := range spec.Binds {
		ms = append(ms, userMount{dst: b.Dst, bind: i, tmpfs: -1})
	}
	for i, t := range spec.Tmpfs {
		ms = append(ms, userMount{dst: t.Dst, bind: -1, tmpfs: i})
	}
	depth := func(p string) int { return strings.Count(filepath.Clean(p), "/") }
	sort.SliceStable(ms, func(i, j int) bool { return depth(ms[i].dst) < depth(ms[j].dst) })
	return ms
}

// detachEntries returns a detached mount for every entry with a source, -1
// for symlinks.
func detachEntries(entries []rootEntry) ([]int, error) {
	fds := make([]int, len(entries))
	for i, e := range entries {
		fds[i] = -1
		if e.Src == nil {
			continue
		}
		fd, err := e.Src.mount()
		if err != nil {
			return nil, &SetupError{Step: "binding " + e.Src.Path, Err: err}
		}
		fds[i] = fd
	}
	return fds, nil
}

// placeEntries creates entries (symlinks, or mounts from fds) in dir.
func (b *rootBuilder) placeEntries(dir string, entries []rootEntry, fds []int) error {
	for i, e := range entries {
		p := filepath.Join(dir, e.Name)
		if e.Src == nil {
			if err := unix.Symlinkat(e.Link, b.rootFD, strings.TrimPrefix(p, "/")); err != nil {
				return &SetupError{Step: "creating " + p, Err: err}
			}
			continue
		}
		err := b.attachAt(fds[i], p, e.Src.IsFile)
		unix.Close(fds[i])
		if err != nil {
			return &SetupError{Step: "mounting " + p, Err: err}
		}
	}
	return nil
}

// cloneTree returns a detached recursive bind mount of path with attr set on
// every mount in it.
func cloneTree(path string, attr uint64) (int, error) {
	return detachTree(unix.AT_FDCWD, path, 0, attr)
}

// detachTree returns a detached recursive clone of the mount tree at
// (dirfd, path), with attr set on every mount in it and every mount made
// private: a clone keeps its source's peer group otherwise, and whatever init
// then mounts on it (masks, binds) would propagate back to the host and into
// other sandboxes cloned from the same tree.
func detachTree(dirfd int, path string, flags uint, attr uint64) (int, error) {
	fd, err := unix.OpenTree(dirfd, path, flags|unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return -1, fmt.Errorf("open_tree: %w", err)
	}
	ma := &unix.MountAttr{Attr_set: attr, Propagation: unix.MS_PRIVATE}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, ma); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("mount_setattr: %w", err)
	}
	return fd, nil
}

// cloneInRoot returns a detached clone of the mount at path inside the new
// root (a mount this namespace owns).
func (b *rootBuilder) cloneInRoot(path string, attr uint64) (int, error) {
	fd, err := b.resolve(path)
	if err != nil {
		return -1, err
	}
	defer unix.Close(fd)
	return detachTree(fd, "", unix.AT_EMPTY_PATH, attr)
}

// newTmpfs returns a detached tmpfs mount.
func newTmpfs(size int64, mode os.FileMode, attr uint64) (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen tmpfs: %w", err)
	}
	defer unix.Close(fs)
	if err := unix.FsconfigSetString(fs, "mode", fmt.Sprintf("%o", mode)); err != nil {
		return -1, fmt.Errorf("tmpfs mode: %w", err)
	}
	if size > 0 {
		if err := unix.FsconfigSetString(fs, "size", fmt.Sprint(size)); err != nil {
			return -1, fmt.Errorf("tmpfs size: %w", err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("creating tmpfs: %w", err)
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, int(attr))
	if err != nil {
		return -1, fmt.Errorf("fsmount tmpfs: %w", err)
	}
	return m, nil
}

// makeRoot attaches the root: the given mount (an overlay), or when m is -1
// a new 1 MiB tmpfs that is made read-only once built.
func (b *rootBuilder) makeRoot(m int) error {
	if m < 0 {
		var err error
		if m, err = newTmpfs(1<<20, 0o755, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV); err != nil {
			return &SetupError{Step: "creating the root", Err: err}
		}
	}
	for _, c := range attachCandidates {
		if fi, err := os.Lstat(c); err == nil && fi.IsDir() {
			b.attach = c
			break
		}
	}
	if b.attach == "" {
		return &SetupError{Step: "creating the root", Err: fmt.Errorf("none of %v is a directory on the host", attachCandidates)}
	}
	if err := unix.MoveMount(m, "", unix.AT_FDCWD, b.attach, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return &SetupError{Step: "attaching the root", Err: err}
	}
	b.mnt = m
	fd, err := unix.Open(b.attach, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return &SetupError{Step: "opening the root", Err: err}
	}
	b.rootFD = fd
	return nil
}

// resolve opens path inside the new root, never leaving it whatever symlinks
// the rootfs holds.
func (b *rootBuilder) resolve(path string) (int, error) {
	rel := strings.TrimLeft(filepath.Clean(path), "/")
	if rel == "" {
		rel = "."
	}
	return unix.Openat2(b.rootFD, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS,
	})
}

// mountpoint returns an O_PATH fd of path inside the root, creating it (and
// its parents, as directories) when missing: a directory, or an empty file
// when file is set.
func (b *rootBuilder) mountpoint(path string, file bool) (int, error) {
	if fd, err := b.resolve(path); err == nil {
		return fd, nil
	} else if !errors.Is(err, unix.ENOENT) {
		return -1, err
	}
	parent, err := b.mountpoint(filepath.Dir(path), false)
	if err != nil {
		return -1, err
	}
	defer unix.Close(parent)
	// Re-open the parent as a real directory fd: mkdirat needs one.
	dir, err := unix.Openat(parent, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(dir)
	base := filepath.Base(path)
	if file {
		fd, err := unix.Openat(dir, base, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
		if err != nil {
			return -1, err
		}
		unix.Close(fd)
	} else if err := unix.Mkdirat(dir, base, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
		return -1, err
	}
	return b.resolve(path)
}

// attachAt moves the detached mount fd onto path inside the root.
func (b *rootBuilder) attachAt(fd int, path string, file bool) error {
	target, err := b.mountpoint(path, file)
	if err != nil {
		return fmt.Errorf("creating mount point: %w", err)
	}
	defer unix.Close(target)
	if err := unix.MoveMount(fd, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("move_mount: %w", err)
	}
	return nil
}

// mountProc mounts a proc for the new pid namespace. It must happen before
// the old root is detached: the kernel allows a new proc in a user namespace
// only while a full proc is visible.
func (b *rootBuilder) mountProc() error {
	if err := unix.Mkdirat(b.rootFD, "proc", 0o555); err != nil && !(errors.Is(err, unix.EEXIST) && b.spec.RootMount != nil) {
		return &SetupError{Step: "creating /proc", Err: err}
	}
	if err := unix.Mount("proc", b.attach+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return &SetupError{Step: "mounting /proc", Err: err}
	}
	return nil
}

// hideProc masks and write-protects host-facing parts of /proc.
func (b *rootBuilder) hideProc() error {
	for _, f := range procMaskFiles {
		if err := b.maskExisting("/proc/"+f, false); err != nil {
			return err
		}
	}
	for _, d := range procMaskDirs {
		if err := b.maskExisting("/proc/"+d, true); err != nil {
			return err
		}
	}
	for _, d := range procReadOnly {
		fd, err := b.resolve("/proc/" + d)
		if errors.Is(err, unix.ENOENT) {
			continue
		}
		if err != nil {
			return &SetupError{Step: "opening /proc/" + d, Err: err}
		}
		err = remountReadOnly(fd)
		unix.Close(fd)
		if err != nil {
			return &SetupError{Step: "making /proc/" + d + " read-only", Err: err}
		}
	}
	return nil
}

// remountReadOnly binds the directory at fd onto itself, read-only.
func remountReadOnly(fd int) error {
	m, err := detachTree(fd, "", unix.AT_EMPTY_PATH, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(m)
	return unix.MoveMount(m, "", fd, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}

// mask hides a user-named path. A path that does not exist is already absent.
func (b *rootBuilder) mask(path string) error {
	fd, err := b.resolve(path)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &SetupError{Step: "masking " + path, Err: err}
	}
	var st unix.Stat_t
	err = unix.Fstat(fd, &st)
	unix.Close(fd)
	if err != nil {
		return &SetupError{Step: "masking " + path, Err: err}
	}
	return b.maskExisting(path, st.Mode&unix.S_IFMT == unix.S_IFDIR)
}

// maskExisting covers path with an empty read-only tmpfs (directories) or an
// empty read-only file (anything else).
func (b *rootBuilder) maskExisting(path string, dir bool) error {
	target, err := b.resolve(path)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &SetupError{Step: "masking " + path, Err: err}
	}
	defer unix.Close(target)
	var m int
	if dir {
		m, err = newTmpfs(4096, 0o555, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	} else if err = b.attachMaskSource(); err == nil {
		m, err = b.cloneInRoot("/"+maskSource+"/empty", unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	}
	if err != nil {
		return &SetupError{Step: "masking " + path, Err: err}
	}
	defer unix.Close(m)
	if err := unix.MoveMount(m, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return &SetupError{Step: "masking " + path, Err: err}
	}
	return nil
}

// attachMaskSource attaches, once, a read-only tmpfs holding one empty
// read-only file, which masked files are bound to: they read as empty and
// refuse writes (the null device Docker uses would swallow them).
func (b *rootBuilder) attachMaskSource() error {
	if b.masked {
		return nil
	}
	m, err := newTmpfs(4096, 0o555, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return err
	}
	defer unix.Close(m)
	if err := b.attachAt(m, "/"+maskSource, false); err != nil {
		return err
	}
	fd, err := unix.Openat(b.rootFD, maskSource+"/empty", unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o444)
	if err != nil {
		return err
	}
	unix.Close(fd)
	if err := unix.MountSetattr(m, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return err
	}
	b.masked = true
	return nil
}

// dropMaskSource detaches the mask source and removes its mount point; the
// masks bound from it stay.
func (b *rootBuilder) dropMaskSource() error {
	if !b.masked {
		return nil
	}
	if err := unix.Unmount(b.attach+"/"+maskSource, unix.MNT_DETACH); err != nil {
		return &SetupError{Step: "detaching the mask source", Err: err}
	}
	if err := unix.Unlinkat(b.rootFD, maskSource, unix.AT_REMOVEDIR); err != nil {
		return &SetupError{Step: "removing the mask source", Err: err}
	}
	return nil
}

// mountDev builds a minimal /dev: a few host device nodes bound in, a private
// devpts instance, a private /dev/shm and the usual symlinks.
func (b *rootBuilder) mountDev(devFDs []int) error {
	m, err := newTmpfs(64<<10, 0o755, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return &SetupError{Step: "creating /dev", Err: err}
	}
	if err := b.attachAt(m, "/dev", false); err != nil {
		return &SetupError{Step: "mounting /dev", Err: err}
	}
	b.devMnt = m
	if err := b.placeEntries("/dev", b.spec.Dev, devFDs); err != nil {
		return err
	}
	if err := unix.Mkdirat(b.rootFD, "dev/pts", 0o755); err != nil {
		return &SetupError{Step: "creating /dev/pts", Err: err}
	}
	if err := unix.Mount("devpts", b.attach+"/dev/pts", "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"); err != nil {
		return &SetupError{Step: "mounting /dev/pts", Err: err}
	}
	if err := b.mountTmpfs("/dev/shm", 0, 0o1777, true); err != nil {
		return err
	}
	links := [][2]string{{"/proc/self/fd", "fd"}, {"/proc/self/fd/0", "stdin"}, {"/proc/self/fd/1", "stdout"}, {"/proc/self/fd/2", "stderr"}, {"pts/ptmx", "ptmx"}}
	for _, l := range links {
		if err := unix.Symlinkat(l[0], b.rootFD, "dev/"+l[1]); err != nil {
			return &SetupError{Step: "creating /dev/" + l[1], Err: err}
		}
	}
	return nil
}

// mountTmpfs mounts a fresh tmpfs at path inside the root.
func (b *rootBuilder) mountTmpfs(path string, size int64, mode os.FileMode, noexec bool) error {
	attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if noexec {
		attr |= unix.MOUNT_ATTR_NOEXEC
	}
	m, err := newTmpfs(size, mode, attr)
	if err != nil {
		return &SetupError{Step: "creating tmpfs " + path, Err: err}
	}
	defer unix.Close(m)
	if err := b.attachAt(m, path, false); err != nil {
		return &SetupError{Step: "mounting tmpfs " + path, Err: err,
			Hint: "a tmpfs destination must exist in the root, or lie under /tmp or another --tmpfs"}
	}
	return nil
}

// pivot makes the new root the process's root and detaches the host's.
func (b *rootBuilder) pivot() error {
	if err := unix.Fchdir(b.rootFD); err != nil {
		return &SetupError{Step: "entering the root", Err: err}
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return &SetupError{Step: "pivot_root", Err: err}
	}
	// The old root is now stacked under the new one at "/": detach it.
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return &SetupError{Step: "detaching the host root", Err: err}
	}
	if err := unix.Chdir("/"); err != nil {
		return &SetupError{Step: "entering the root", Err: err}
	}
	unix.Close(b.rootFD)
	return nil
}

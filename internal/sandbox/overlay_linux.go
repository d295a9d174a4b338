package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Copy-on-write overlays (Spec.Overlays) are made by the host, as root:
//
//   - each lower directory is cloned into a detached, read-only mount that is
//     idmapped with the sandbox's own map (host 0 → IDMapBase, …), so inside
//     the sandbox the environment's files belong to the sandbox's root, as
//     they would in a container, and the agent may change any of them;
//   - nothing can be written through those clones: they are read-only, and an
//     overlay writes only to its upper directory, whose files belong to the
//     sandbox's unprivileged host ids;
//   - the overlay itself is created with fsopen/fsmount and handed to init as
//     a detached mount, like a bind. Its options make the upper directory
//     self-contained (no redirects, no metacopy, no index), so that what the
//     agent changed can be read from the upper alone.
//
// Idmapping needs a user namespace with the map; one is made per process,
// held open by a descriptor, by starting the init binary in "hold" mode.

// holdArg makes the init binary a placeholder process that only gives its
// user namespace a home until the host has opened it.
const holdArg = "--hold"

var idmapNS struct {
	once sync.Once
	fd   int
	err  error
}

// idmapUserns returns a descriptor (owned by the package, never closed) of a
// user namespace whose id maps are the sandbox's.
func idmapUserns() (int, error) {
	idmapNS.once.Do(func() {
		idmapNS.fd, idmapNS.err = newIdmapUserns()
	})
	return idmapNS.fd, idmapNS.err
}

func newIdmapUserns() (int, error) {
	self, err := os.Executable()
	if err != nil {
		return -1, err
	}
	uid, gid, _ := idMaps()
	cmd := exec.Command(self, InitCommand, holdArg)
	cmd.Args[0] = "proctor" // as init is started: test binaries dispatch on it
	cmd.Env = []string{"GOGC=off"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: uid,
		GidMappings: gid,
		Pdeathsig:   syscall.SIGKILL,
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return -1, err
	}
	if err := cmd.Start(); err != nil {
		stdin.Close()
		return -1, fmt.Errorf("starting the id-map holder: %w", err)
	}
	// The maps are written before the child execs, so the namespace is
	// complete as soon as it exists.
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/user", cmd.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	stdin.Close()
	werr := cmd.Wait()
	if err != nil {
		return -1, fmt.Errorf("opening the id-map namespace: %w", err)
	}
	if werr != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("id-map holder: %w", werr)
	}
	return fd, nil
}

// runHold is the holder's whole life: wait for the host to close stdin.
func runHold() int {
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// overlayOptions make the upper directory hold every change in full.
var overlayOptions = [][2]string{
	{"redirect_dir", "off"},
	{"metacopy", "off"},
	{"index", "off"},
	{"xino", "off"},
}

// mountOverlay returns a detached overlay mount for o (validated), with the
// lower directories idmapped and read-only.
func mountOverlay(o *Overlay) (int, error) {
	ns, err := idmapUserns()
	if err != nil {
		return -1, err
	}
	var lowers []int
	defer func() {
		for _, l := range lowers {
			unix.Close(l)
		}
	}()
	for _, dir := range o.Lower {
		l, err := idmappedClone(dir, ns)
		if err != nil {
			return -1, fmt.Errorf("lower %s: %w", dir, err)
		}
		lowers = append(lowers, l)
	}
	fs, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen overlay: %w", err)
	}
	defer unix.Close(fs)
	for i, l := range lowers {
		if err := unix.FsconfigSetFd(fs, "lowerdir+", l); err != nil {
			return -1, fmt.Errorf("lower %s: %w", o.Lower[i], err)
		}
	}
	if err := unix.FsconfigSetString(fs, "upperdir", o.Upper); err != nil {
		return -1, fmt.Errorf("upper %s: %w", o.Upper, err)
	}
	if err := unix.FsconfigSetString(fs, "workdir", o.Work); err != nil {
		return -1, fmt.Errorf("work %s: %w", o.Work, err)
	}
	for _, kv := range overlayOptions {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("overlay option %s=%s: %w", kv[0], kv[1], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("creating the overlay (upper %s): %w", o.Upper, err)
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return -1, fmt.Errorf("fsmount overlay: %w", err)
	}
	return m, nil
}

// idmappedClone returns a detached, read-only, idmapped clone of the
// directory tree at dir.
func idmappedClone(dir string, userns int) (int, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, dir, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return -1, fmt.Errorf("open_tree: %w", err)
	}
	ma := &unix.MountAttr{
		Attr_set:    attrRootfs | unix.MOUNT_ATTR_IDMAP,
		Userns_fd:   uint64(userns),
		Propagation: unix.MS_PRIVATE,
	}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, ma); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) {
			return -1, fmt.Errorf("idmapping: %w (the filesystem may not support idmapped mounts)", err)
		}
		return -1, fmt.Errorf("idmapping: %w", err)
	}
	return fd, nil
}

// RootID is the host uid and gid of the sandbox's root: the owner an
// overlay's upper and work directories must have.
func RootID() int {
	if os.Geteuid() == 0 {
		return IDMapBase
	}
	return os.Geteuid()
}

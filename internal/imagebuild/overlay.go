package imagebuild

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// overlayOptions are the sandbox's: an upper holds every change in full
// (no redirects, no metacopy), so that it alone is the step's layer.
var overlayOptions = [][2]string{
	{"redirect_dir", "off"},
	{"metacopy", "off"},
	{"index", "off"},
	{"xino", "off"},
}

// mountView returns a detached overlay mount (a descriptor of its root
// directory, never attached anywhere: it goes away when closed) of lowers,
// topmost first. With an upper and work directory the view is writable and
// every change lands in upper, as in a RUN step's sandbox; the owners are
// the layers' own (no id mapping), so the host writes image ids directly.
// Without, it is read-only; a single lower gets an empty one beneath it
// (overlayfs wants two).
func mountView(lowers []string, upper, work, empty string) (int, error) {
	if upper == "" && len(lowers) == 1 {
		lowers = append(lowers, empty)
	}
	fs, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("fsopen overlay: %w", err)
	}
	defer unix.Close(fs)
	for _, l := range lowers {
		if err := unix.FsconfigSetString(fs, "lowerdir+", l); err != nil {
			return -1, fmt.Errorf("overlay lower %s: %w", l, err)
		}
	}
	if upper != "" {
		if err := unix.FsconfigSetString(fs, "upperdir", upper); err != nil {
			return -1, fmt.Errorf("overlay upper %s: %w", upper, err)
		}
		if err := unix.FsconfigSetString(fs, "workdir", work); err != nil {
			return -1, fmt.Errorf("overlay work %s: %w", work, err)
		}
	}
	for _, kv := range overlayOptions {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("overlay option %s=%s: %w", kv[0], kv[1], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("creating an overlay of %d layers: %w", len(lowers), err)
	}
	attr := unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV | unix.MOUNT_ATTR_NOEXEC
	if upper == "" {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	m, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, attr)
	if err != nil {
		return -1, fmt.Errorf("fsmount overlay: %w", err)
	}
	// The mount's root, as a directory descriptor for *at calls.
	root, err := unix.Openat(m, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	unix.Close(m)
	if err != nil {
		return -1, fmt.Errorf("opening the overlay's root: %w", err)
	}
	return root, nil
}

func closeFD(fd int) { _ = unix.Close(fd) }

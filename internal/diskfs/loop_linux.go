package diskfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// loopControl is the loop driver's control device.
const loopControl = "/dev/loop-control"

// nodePrefix starts the name of a device node openLoop makes.
const nodePrefix = ".proctor-loop"

// loopTries bounds how often attach asks for a free device: another
// process may take the one it was given before it is configured.
const loopTries = 16

// attach binds img to a free loop device, in one step (LOOP_CONFIGURE):
// 4 KiB sectors, buffered I/O, and AUTOCLEAR, so
// the device detaches itself when its last opener (the returned file,
// then the mount) lets go. name is recorded as the device's file name
// (LOOP_GET_STATUS64), naming its owner. nodeDir is an empty directory of
// the caller's where a device node can be made when /dev lacks the
// device's (a container's /dev, made before the device existed). It
// returns the open device and the path to mount it by.
func attach(img *os.File, name, nodeDir string) (*os.File, string, error) {
	ctl, err := os.OpenFile(loopControl, os.O_RDWR, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, os.ErrPermission) {
			return nil, "", fmt.Errorf("%w: %v", ErrNoLoop, err)
		}
		return nil, "", &SetupError{Step: "opening " + loopControl, Err: err}
	}
	defer ctl.Close()
	cfg := unix.LoopConfig{Fd: uint32(img.Fd()), Size: 4096}
	// Buffered, not direct, I/O: what a sandbox writes reaches the
	// image's page cache, and the host's disk only if it stays long
	// enough to be written back; direct I/O allocated the image's blocks
	// at once, and freeing blocks allocated on a disk costs tens of
	// milliseconds where the host journals and discards (measured here).
	cfg.Info.Flags = unix.LO_FLAGS_AUTOCLEAR
	copy(cfg.Info.File_name[:len(cfg.Info.File_name)-1], name)
	for range loopTries {
		n, err := unix.IoctlRetInt(int(ctl.Fd()), unix.LOOP_CTL_GET_FREE)
		if err != nil {
			return nil, "", &SetupError{Step: "finding a free loop device", Err: err}
		}
		dev, path, err := openLoop(n, nodeDir)
		if err != nil {
			return nil, "", &SetupError{Step: "opening a loop device", Err: err}
		}
		err = unix.IoctlLoopConfigure(int(dev.Fd()), &cfg)
		if errors.Is(err, unix.EBUSY) {
			dev.Close() // taken meanwhile: ask again
			continue
		}
		if err != nil {
			dev.Close()
			return nil, "", &SetupError{Step: "configuring " + path, Err: err}
		}
		return dev, path, nil
	}
	return nil, "", &SetupError{Step: "attaching a loop device", Err: fmt.Errorf("every free device was taken %d times over", loopTries)}
}

// openLoop opens /dev/loopN, or when /dev has no node for it, a node made
// for the occasion in nodeDir (removed at once; Remove takes it away if
// this process is killed in between); the path returned is then the
// descriptor's.
func openLoop(n int, nodeDir string) (*os.File, string, error) {
	path := fmt.Sprintf("/dev/loop%d", n)
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return f, path, err
	}
	data, err := os.ReadFile(fmt.Sprintf("/sys/class/block/loop%d/dev", n))
	if err != nil {
		return nil, "", fmt.Errorf("no %s, and no device number for it: %w", path, err)
	}
	maj, mnr, ok := strings.Cut(strings.TrimSpace(string(data)), ":")
	ma, err1 := strconv.ParseUint(maj, 10, 32)
	mi, err2 := strconv.ParseUint(mnr, 10, 32)
	if !ok || err1 != nil || err2 != nil {
		return nil, "", fmt.Errorf("loop%d: device number %q", n, data)
	}
	node := filepath.Join(nodeDir, nodePrefix+strconv.Itoa(n))
	if err := unix.Mknod(node, unix.S_IFBLK|0o600, int(unix.Mkdev(uint32(ma), uint32(mi)))); err != nil {
		return nil, "", fmt.Errorf("making a node for %s: %w", path, err)
	}
	f, err = os.OpenFile(node, os.O_RDWR|unix.O_CLOEXEC, 0)
	os.Remove(node)
	if err != nil {
		return nil, "", err
	}
	return f, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), nil
}

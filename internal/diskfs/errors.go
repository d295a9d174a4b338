package diskfs

import (
	"errors"
	"fmt"
)

// ErrNoLoop means this process cannot attach loop devices: no
// /dev/loop-control, or no permission to use it (not root).
var ErrNoLoop = errors.New("no loop devices")

// ErrNoMkfs means mkfs.ext4 (e2fsprogs) was not found.
var ErrNoMkfs = errors.New("mkfs.ext4 not found (install e2fsprogs)")

// NotOnDiskError is a directory whose filesystem lives in memory: an image
// there would be memory again.
type NotOnDiskError struct {
	Dir    string
	FSType string // "tmpfs", "ramfs", …
}

func (e *NotOnDiskError) Error() string {
	return fmt.Sprintf("%s is on a %s, not a disk: its images would be held in memory", e.Dir, e.FSType)
}

// SetupError is a step of making or mounting a filesystem that failed.
// Nothing of the attempt is left behind.
type SetupError struct {
	Step string // "formatting the template", "attaching a loop device", …
	Err  error
}

func (e *SetupError) Error() string { return fmt.Sprintf("%s: %v", e.Step, e.Err) }

func (e *SetupError) Unwrap() error { return e.Err }

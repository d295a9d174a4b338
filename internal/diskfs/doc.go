// Package diskfs provides throwaway, size-capped filesystems on disk: each
// is a sparse ext4 image, cloned from a template formatted once per size,
// attached to a loop device that clears itself, and mounted at a directory
// the caller names. What is written there is disk, not memory: its pages
// are page cache the kernel can write back and reclaim, unlike a tmpfs's,
// which stay charged to the writer's memory cgroup until the file goes.
//
// A filesystem offers at least the capacity asked for; a write past it
// fails with ENOSPC, and Usage tells afterwards whether it was filled.
//
// The package must never leave anything behind that outlives its mount:
// the image has no name (O_TMPFILE in the directory's parent), the loop
// device detaches itself when the mount's last user is gone
// (LO_FLAGS_AUTOCLEAR), so unmounting, even lazily and by another process
// after the mounting one was killed, frees the device and the image's
// blocks. It must never put an image on a filesystem held in memory
// (tmpfs, ramfs): that would make the storage memory again, charged to no
// one. It knows nothing of sandboxes, trials or their limits.
package diskfs

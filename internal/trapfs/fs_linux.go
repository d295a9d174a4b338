package trapfs

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Node is one hidden place the trap stands in for. It is a plain value.
type Node struct {
	// Path is where the node will be mounted inside the sandbox. It is
	// used only in records; it must be absolute.
	Path string
	// Dir makes the node an empty directory (mode 0555); otherwise it is an
	// empty file (mode 0444). Both are owned by host uid and gid 0.
	Dir bool
}

// Access is one recorded attempt to reach a node. It is a plain value.
type Access struct {
	Time time.Time // when the trap answered
	// PID is the id of the calling thread, in the pid namespace of the
	// process that called Mount, as the kernel put it in the request (for
	// a single-threaded process, its process id); 0 if the caller is not
	// visible there.
	PID int
	UID int // the caller's fsuid and fsgid on the host
	GID int
	// Op names the attempt: "lookup", "open", "opendir", "access", or one
	// of the refused changes listed in the package documentation.
	Op string
	// Path is the Node's Path, joined with the name the kernel sent for a
	// lookup, create, mkdir, mknod, symlink, unlink, rmdir, rename or link
	// inside a trap directory. The name is kept exactly as sent.
	Path string
	// Arg is the second operand, if any: the access mode of an open
	// ("read", "write", "read-write"), the letters of an access check
	// ("rwx" subset), the attributes a setattr would change ("mode,size"),
	// the attribute name of a setxattr or removexattr, the target of a
	// symlink, the destination of a rename, the existing node of a link,
	// the source of a copy_file_range. Empty otherwise, and for operands
	// outside the trap.
	Arg string
}

// recordQueue is how many records wait for the callback before more are
// dropped.
const recordQueue = 4096

// traceRequest, if set, sees every message read from /dev/fuse before it is
// handled. Tests set it (before Mount, unset after Close) to capture what
// the kernel sends; it is nil otherwise.
var traceRequest func(msg []byte)

// initTimeout bounds the wait for the kernel's FUSE_INIT.
const initTimeout = 10 * time.Second

// FS is a mounted trap. Its methods are safe for concurrent use.
//
// One goroutine serves the kernel and one hands records to the callback:
//
//	kernel ──request──▶ serve ──reply──▶ kernel
//	                      │ (never blocks)
//	                      ▼
//	               records queue (4096; full: drop and count)
//	                      │
//	                      ▼
//	                   deliver ──▶ record callback
//
// serve waits in poll(2) on /dev/fuse and an eventfd, on a thread of its
// own, never in Go's netpoller: a process-wide netpoller can itself be
// blocked in the kernel waiting for this filesystem (epoll on a file of the
// trap sends FUSE_POLL), which would be a deadlock.
type FS struct {
	srv      *server // used by serve only, after Mount
	dev      int     // /dev/fuse, non-blocking; closed by Close after serve returned
	wake     int     // eventfd: written by Close to stop serve
	stopping atomic.Bool
	record   func(Access)
	records  chan Access
	dropped  atomic.Uint64
	wg       sync.WaitGroup

	mu     sync.Mutex
	mnt    int // the fsmount(2) fd of the root; -1 once closed
	closed bool

	closeOnce sync.Once
	closeErr  error
}

// Mount serves a new trap holding nodes and returns it once the kernel has
// completed the FUSE handshake. Node i is at "<root>/<i>"; take it with
// Clone. The filesystem is a detached mount, in no mount table, with
// nosuid, nodev and noexec.
//
// record is called, from one goroutine of the FS and in order, for every
// recorded Access. It should return promptly: requests are never held for
// it, but while it is slow records queue up, and past 4096 of them further
// records are dropped and counted by Dropped. It must not call Close.
//
// Mount needs CAP_SYS_ADMIN and /dev/fuse.
func Mount(nodes []Node, record func(Access)) (*FS, error) {
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: no nodes", ErrInvalidNode)
	}
	for i, n := range nodes {
		if !strings.HasPrefix(n.Path, "/") || strings.ContainsRune(n.Path, 0) {
			return nil, fmt.Errorf("%w: node %d: path %q is not absolute", ErrInvalidNode, i, n.Path)
		}
	}
	if record == nil {
		return nil, ErrNoRecord
	}
	dev, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("trapfs: opening /dev/fuse: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(dev)
		return nil, fmt.Errorf("trapfs: eventfd: %w", err)
	}
	mnt, err := mountDev(dev)
	if err != nil {
		unix.Close(dev)
		unix.Close(wake)
		return nil, err
	}
	f := &FS{
		srv:     newServer(nodes, time.Now()),
		dev:     dev,
		wake:    wake,
		record:  record,
		records: make(chan Access, recordQueue),
		mnt:     mnt,
	}
	ready, stopped := make(chan struct{}), make(chan struct{})
	f.wg.Add(2)
	go func() {
		defer close(stopped)
		f.serve(ready)
	}()
	go f.deliver()
	timer := time.NewTimer(initTimeout)
	defer timer.Stop()
	select {
	case <-ready:
		return f, nil
	case <-stopped:
		err = fmt.Errorf("%w: the connection ended first", ErrInit)
	case <-timer.C:
		err = fmt.Errorf("%w: no FUSE_INIT within %v", ErrInit, initTimeout)
	}
	if cerr := f.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return nil, err
}

// mountDev creates a FUSE superblock served through devfd and returns the fd
// of a detached mount of its root.
func mountDev(devfd int) (int, error) {
	fsfd, err := unix.Fsopen("fuse", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("trapfs: fsopen fuse: %w", err)
	}
	defer unix.Close(fsfd)
	for _, kv := range [...][2]string{
		{"source", "proctor-trap"},
		{"subtype", "proctor-trap"},
		{"fd", strconv.Itoa(devfd)},
		{"rootmode", "40000"}, // octal: a directory; the real mode comes from GETATTR
		{"user_id", "0"},
		{"group_id", "0"},
	} {
		if err := unix.FsconfigSetString(fsfd, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("trapfs: fsconfig %s=%s: %w", kv[0], kv[1], err)
		}
	}
	// allow_other: processes of every uid (in the sandbox, mapped ones)
	// may reach the trap. No default_permissions: the trap sees, and
	// records, write attempts the kernel would otherwise refuse on its own.
	if err := unix.FsconfigSetFlag(fsfd, "allow_other"); err != nil {
		return -1, fmt.Errorf("trapfs: fsconfig allow_other: %w", err)
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		return -1, fmt.Errorf("trapfs: creating fuse superblock: %w", err)
	}
	mnt, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC,
		unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
	if err != nil {
		return -1, fmt.Errorf("trapfs: fsmount: %w", err)
	}
	return mnt, nil
}

// serve reads requests and answers each inline; answering never blocks.
// It returns when Close asks it to or when the connection ends, and then
// closes the record queue.
func (f *FS) serve(ready chan<- struct{}) {
	defer f.wg.Done()
	defer close(f.records)
	buf := make([]byte, readBufferLen)
	out := make([]byte, 0, 64<<10)
	signaled := false
	for !f.stopping.Load() {
		n, err := unix.Read(f.dev, buf)
		switch err {
		case nil:
		case unix.EAGAIN:
			if !f.wait() {
				return
			}
			continue
		case unix.EINTR, unix.ENOENT: // interrupted; the request is gone
			continue
		default:
			// ENODEV: the connection was aborted or its last mount
			// went away. Nothing more will come.
			return
		}
		if traceRequest != nil {
			traceRequest(buf[:n])
		}
		reply, rec, ok := f.srv.handle(buf[:n], out[:0])
		if ok {
			select {
			case f.records <- rec:
			default:
				f.dropped.Add(1)
			}
		}
		if reply != nil {
			// ENOENT means the request was interrupted or aborted
			// meanwhile; other errors end the connection and the next
			// read says so.
			unix.Write(f.dev, reply)
		}
		if !signaled && f.srv.initialized {
			signaled = true
			close(ready)
		}
	}
}

// wait blocks until /dev/fuse has a request or Close writes the eventfd.
// It reports whether serving should go on.
func (f *FS) wait() bool {
	fds := []unix.PollFd{{Fd: int32(f.dev), Events: unix.POLLIN}, {Fd: int32(f.wake), Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(fds, -1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || fds[1].Revents != 0 {
			return false
		}
		// POLLERR once the connection is aborted: the read will say
		// ENODEV.
		return true
	}
}

// deliver hands queued records to the callback until serve has stopped and
// the queue is empty.
func (f *FS) deliver() {
	defer f.wg.Done()
	for a := range f.records {
		f.record(a)
	}
}

// Dropped returns how many records were dropped because the queue was full.
func (f *FS) Dropped() uint64 { return f.dropped.Load() }

// Clone returns a new detached mount (open_tree(2) with OPEN_TREE_CLONE) of
// node i alone, for the caller to attach inside the sandbox with
// move_mount(2). The file is close-on-exec; closing it before attaching
// discards the mount. Each call makes a new mount.
func (f *FS) Clone(i int) (*os.File, error) {
	if i < 0 || i >= len(f.srv.nodes) {
		return nil, fmt.Errorf("%w: %d", ErrNoSuchNode, i)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	fd, err := unix.OpenTree(f.mnt, strconv.Itoa(i), unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("trapfs: cloning node %d (%s): %w", i, f.srv.nodes[i].Path, err)
	}
	return os.NewFile(uintptr(fd), "trapfs:"+f.srv.nodes[i].Path), nil
}

// Close stops serving, aborts the FUSE connection, releases the root mount
// and waits until every goroutine of the FS has returned, after handing
// every record still queued to the callback. Clones still attached
// somewhere stay mounted, but every request through them fails with
// ENOTCONN. Close is idempotent and returns the first call's result.
//
// The connection is aborted when the last copy of the /dev/fuse fd is
// closed; the fd is close-on-exec, so a child forked at that very moment
// delays the abort only until it execs.
func (f *FS) Close() error {
	f.closeOnce.Do(func() {
		f.mu.Lock()
		f.closed = true
		mnt := f.mnt
		f.mnt = -1
		f.mu.Unlock()
		var errs []error
		f.stopping.Store(true)
		one := make([]byte, 8)
		ne.PutUint64(one, 1)
		if _, err := unix.Write(f.wake, one); err != nil {
			errs = append(errs, fmt.Errorf("trapfs: waking server: %w", err))
		}
		f.wg.Wait()
		// serve has returned, so nothing uses the fd any more. Closing it
		// aborts the connection: pending and future requests fail with
		// ENOTCONN.
		for _, c := range [...]struct {
			fd   int
			what string
		}{{f.dev, "/dev/fuse"}, {mnt, "root mount"}, {f.wake, "eventfd"}} {
			if err := unix.Close(c.fd); err != nil {
				errs = append(errs, fmt.Errorf("trapfs: closing %s: %w", c.what, err))
			}
		}
		f.closeErr = errors.Join(errs...)
	})
	return f.closeErr
}

package seccomp

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// listenerLink is what /proc/self/fd/N links to for a seccomp listener:
// the kernel makes it with anon_inode_getfile("seccomp notify", ...).
const listenerLink = "anon_inode:seccomp notify"

// InstallNotify loads prog, normally NotifyProgram's filter, for every
// thread of the calling process and returns its notification listener.
// Like Install it requires no_new_privs on the calling thread (it returns
// an error wrapping ErrNoNewPrivs otherwise), it cannot be undone, and the
// filter holds for every process started afterwards.
//
// The flags are SECCOMP_FILTER_FLAG_NEW_LISTENER, TSYNC and TSYNC_ESRCH
// (with TSYNC, a listener needs TSYNC_ESRCH: the return value is the
// listener, so a thread that cannot take the filter is reported as ESRCH),
// and WAIT_KILLABLE_RECV: once the supervisor has received a notification,
// only a fatal signal interrupts the waiting call, so that a signal cannot
// turn a recorded call into EINTR or a restart (and a second record).
// Before the supervisor receives it, a signal still interrupts the call,
// as it would a call blocked in the kernel. Kernels before 5.19 lack that
// flag; InstallNotify then installs without it. If some thread cannot
// take the filter, it is installed nowhere and the error wraps
// ErrThreadSync.
//
// The listener is close-on-exec and in non-blocking mode, ready for Watch.
// It must never reach the sandboxed program: whoever holds it can take
// notifications before the supervisor does. The caller hands it to the
// supervisor (see TakeListener and ListenerFile; SCM_RIGHTS would
// deadlock, since sendmsg is notified) and then closes its own copy. Never
// call its Fd method, which switches the open file, shared with every
// copy, to blocking mode: get the number with SyscallConn and Control.
func InstallNotify(prog []unix.SockFilter) (*os.File, error) {
	if len(prog) == 0 || len(prog) > maxInstructions {
		return nil, fmt.Errorf("%w: %d instructions, want 1 to %d", ErrInvalidProgram, len(prog), maxInstructions)
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return nil, fmt.Errorf("seccomp: reading no_new_privs: %w", err)
	}
	if nnp != 1 {
		return nil, ErrNoNewPrivs
	}

	const base = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER |
		unix.SECCOMP_FILTER_FLAG_TSYNC |
		unix.SECCOMP_FILTER_FLAG_TSYNC_ESRCH
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	load := func(flags uintptr) (uintptr, unix.Errno) {
		r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
			flags, uintptr(unsafe.Pointer(&fprog)))
		return r, errno
	}
	r, errno := load(base | unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
	if errno == unix.EINVAL {
		// An unknown flag is EINVAL; so is a bad program, which fails
		// again here with the same error.
		r, errno = load(base)
	}
	runtime.KeepAlive(prog)
	switch {
	case errno == unix.ESRCH:
		return nil, fmt.Errorf("%w: a thread could not take the notify filter: %w", ErrThreadSync, errno)
	case errno != 0:
		return nil, fmt.Errorf("seccomp: loading notify filter (SECCOMP_SET_MODE_FILTER, NEW_LISTENER|TSYNC): %w", errno)
	}
	return listenerFile(int(r))
}

// TakeListener copies the listener that process pid holds as descriptor
// fd into the calling process, with pidfd_getfd(2), and returns it as
// ListenerFile does. This is how the supervisor gets the listener from the
// child that called InstallNotify; the child tells it the number (with
// write(2): no notified call is involved) and waits until it is taken
// before closing its own copy. The caller needs ptrace access to pid
// (PTRACE_MODE_ATTACH), which a parent has over its child unless
// credentials changed. pid must be a child the caller has not yet reaped,
// so that the number cannot have been reused by another process; a caller
// that already holds a pidfd can call pidfd_getfd itself and pass the
// result to ListenerFile.
func TakeListener(pid, fd int) (*os.File, error) {
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, fmt.Errorf("seccomp: pidfd_open(%d): %w", pid, err)
	}
	defer unix.Close(pidfd)
	nfd, err := unix.PidfdGetfd(pidfd, fd, 0)
	if err != nil {
		return nil, fmt.Errorf("seccomp: pidfd_getfd(%d, %d): %w", pid, fd, err)
	}
	f, err := ListenerFile(nfd)
	if err != nil {
		return nil, fmt.Errorf("%w (descriptor %d of process %d)", err, fd, pid)
	}
	return f, nil
}

// ListenerFile takes ownership of fd, a seccomp listener descriptor of the
// calling process, and returns it as an *os.File ready for Watch:
// close-on-exec, non-blocking and watched by the Go runtime's poller (which
// os.NewFile does only for a descriptor that is already non-blocking). It
// returns an error wrapping ErrNotListener, and closes fd, if fd is
// anything else, so that Watch's ioctls never reach another kind of file.
func ListenerFile(fd int) (*os.File, error) {
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil || link != listenerLink {
		unix.Close(fd)
		if err != nil {
			return nil, fmt.Errorf("seccomp: checking descriptor %d: %w", fd, err)
		}
		return nil, fmt.Errorf("%w: descriptor %d is %q", ErrNotListener, fd, link)
	}
	return listenerFile(fd)
}

// listenerFile makes fd close-on-exec and non-blocking, then wraps it in
// an *os.File. On error it closes fd.
func listenerFile(fd int) (*os.File, error) {
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("seccomp: making the listener non-blocking: %w", err)
	}
	f := os.NewFile(uintptr(fd), "seccomp-notify")
	if f == nil {
		unix.Close(fd)
		return nil, errors.New("seccomp: invalid listener descriptor")
	}
	return f, nil
}

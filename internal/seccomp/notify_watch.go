package seccomp

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Attempt is one notified call, as the supervisor read it from the
// caller's memory while the call waited. It is a plain value.
//
// The address fields describe what the caller's memory held when the
// supervisor read it; another thread of the caller can change that memory
// before the kernel copies it, so they may differ from the address the
// call used. They are never used to decide anything. Addr may hold any
// bytes the caller chose (a unix path is not checked): quote it before
// display.
type Attempt struct {
	// Time is when the supervisor received the notification.
	Time time.Time
	// PID is the id of the calling process (its thread group) in the
	// supervisor's pid namespace, read from /proc/TID/status while the
	// call waited (so /proc must be that namespace's); 0 if it could not
	// be read.
	PID int
	// TID is the id of the calling thread in the supervisor's pid
	// namespace, as the kernel reported it; 0 if the caller is not visible
	// there. It equals PID for a process's main thread.
	TID int
	// Syscall is "connect", "sendto", "sendmsg" or "sendmmsg"; for a call
	// from a foreign ABI, "foreign(arch=0x…,nr=N)"; for any other native
	// call (possible only with a filter other than NotifyProgram's),
	// "nr=N".
	Syscall string
	// Family is the address family: "inet", "inet6", "unix", "netlink",
	// "packet", "vsock", "unspec" or "unknown(N)"; "" when there is no
	// address (a sendmsg without msg_name, a sendmmsg of no messages) or
	// it could not be read.
	Family string
	// Addr is the IP address for inet and inet6 (with "%zone" for an
	// inet6 scope id), the path for unix ("@name" for an abstract name,
	// as package net writes it, so a relative path that starts with "@"
	// looks the same; "" for an unnamed socket), the CID for vsock, and ""
	// otherwise.
	Addr string
	// Port is the port for inet, inet6 and vsock, and 0 otherwise.
	Port int
	// Unread says why the address could not be read; "" if it was read
	// or there was none.
	Unread string
}

// Kernel ABI: include/uapi/linux/seccomp.h.
//
//	struct seccomp_notif {           struct seccomp_notif_resp {
//		__u64 id;                        __u64 id;
//		__u32 pid;                       __s64 val;
//		__u32 flags;                     __s32 error;
//		struct seccomp_data data;        __u32 flags;
//	};  // 80 bytes                  };  // 24 bytes
type notifData struct {
	nr   int32
	arch uint32
	ip   uint64
	args [6]uint64
}

type notif struct {
	id    uint64
	pid   uint32
	flags uint32
	data  notifData
}

type notifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

// ioc computes a Linux ioctl request number (the generic encoding, used by
// both amd64 and arm64): direction in bits 30-31, size in bits 16-29,
// type in bits 8-15, number in bits 0-7.
func ioc(dir, typ, nr, size uintptr) uintptr {
	return dir<<30 | size<<16 | typ<<8 | nr
}

const (
	iocWrite = 1
	iocRead  = 2
)

// The listener's ioctls. ID_VALID is the _IOW form; the kernel also
// accepts the _IOR form its header first had.
var (
	ioctlNotifRecv     = ioc(iocRead|iocWrite, '!', 0, unsafe.Sizeof(notif{}))     // SECCOMP_IOCTL_NOTIF_RECV
	ioctlNotifSend     = ioc(iocRead|iocWrite, '!', 1, unsafe.Sizeof(notifResp{})) // SECCOMP_IOCTL_NOTIF_SEND
	ioctlNotifIDValid  = ioc(iocWrite, '!', 2, 8)                                  // SECCOMP_IOCTL_NOTIF_ID_VALID
	ioctlNotifSetFlags = ioc(iocWrite, '!', 4, 8)                                  // SECCOMP_IOCTL_NOTIF_SET_FLAGS
)

// notifSizes is struct seccomp_notif_sizes.
type notifSizes struct {
	notif, resp, data uint16
}

// checkNotifSizes asks the kernel (SECCOMP_GET_NOTIF_SIZES) whether its
// structures are the ones above. RECV copies the kernel's struct into
// ours: a larger one would overrun it.
var checkNotifSizes = sync.OnceValue(func() error {
	var s notifSizes
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_NOTIF_SIZES, 0, uintptr(unsafe.Pointer(&s)))
	if errno != 0 {
		return fmt.Errorf("seccomp: SECCOMP_GET_NOTIF_SIZES: %w", errno)
	}
	want := notifSizes{uint16(unsafe.Sizeof(notif{})), uint16(unsafe.Sizeof(notifResp{})), uint16(unsafe.Sizeof(notifData{}))}
	if s != want {
		return fmt.Errorf("%w: kernel has notif %d, resp %d, data %d bytes; want %d, %d, %d",
			ErrNotifyABI, s.notif, s.resp, s.data, want.notif, want.resp, want.data)
	}
	return nil
})

// ioctlPtr runs ioctl(fd, req, p).
func ioctlPtr(fd, req uintptr, p unsafe.Pointer) error {
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, fd, req, uintptr(p))
	if errno != 0 {
		return errno
	}
	return nil
}

// Watch records every notification that arrives on listener (from
// InstallNotify or TakeListener) and answers each one
// SECCOMP_USER_NOTIF_FLAG_CONTINUE, so that the kernel runs the call
// unchanged. It returns nil once every process under the filter has exited
// (the listener reports POLLHUP), and an error wrapping os.ErrClosed if the
// caller closes listener. Once the listener is closed, by the caller after
// any return, every notified call that is waiting or yet to come fails
// with ENOSYS: a call is recorded or it does not happen. On any other
// error Watch returns at once; calls then wait until the caller closes the
// listener.
//
// For each notification Watch reads the address from the caller's memory
// (capped at 128 bytes, the size of sockaddr_storage; for sendmsg through
// its msghdr, for sendmmsg through the first message's only), checks with
// SECCOMP_IOCTL_NOTIF_ID_VALID that the call is still waiting (so the
// thread id was not reused for another process during the read), answers
// CONTINUE, and only then calls record. record therefore never holds up
// the call it describes, but Watch receives no other notification until
// it returns: it must be quick (append to a slice, send on a buffered
// channel), or every notified call of the sandbox waits for it.
//
// Watch starts no goroutines and does not spin: it waits in the Go
// runtime's poller, which is also how Close wakes it. Use one Watch per
// listener.
func Watch(listener *os.File, record func(Attempt)) error {
	// SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6) is made for a
	// supervisor blocked in RECV on a CPU the caller hands over to; through
	// the poller it made no measurable difference (BenchmarkNotifyConnect),
	// so Watch leaves it off.
	return watch(listener, record, false)
}

// watch is Watch with SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP optional, for
// the benchmarks; kernels that lack it ignore the request.
func watch(listener *os.File, record func(Attempt), syncWakeUp bool) error {
	if err := checkNotifSizes(); err != nil {
		return err
	}
	// Only a file the poller watches supports deadlines.
	if err := listener.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("%w: %w", ErrListenerNotPollable, err)
	}
	rc, err := listener.SyscallConn()
	if err != nil {
		return fmt.Errorf("seccomp: listener: %w", err)
	}
	if syncWakeUp {
		var setErr error
		err := rc.Control(func(fd uintptr) {
			flags := uint64(unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
			setErr = ioctlPtr(fd, ioctlNotifSetFlags, unsafe.Pointer(&flags))
		})
		if err == nil && setErr != nil && setErr != unix.EINVAL && setErr != unix.ENOTTY {
			err = setErr
		}
		if err != nil {
			return watchError(listener, fmt.Errorf("seccomp: setting SYNC_WAKE_UP: %w", err))
		}
	}

	native := nativeNotifyNames()
	return serve(listener, rc, func(fd uintptr, n *notif) Attempt { return inspect(fd, n, native) }, record)
}

// serve receives, answers and records notifications until every process
// under the filter is gone (nil), or an error. inspect reads each one
// while its call waits; record gets the result once it is answered.
func serve[T any](listener *os.File, rc syscall.RawConn, inspect func(uintptr, *notif) T, record func(T)) error {
	for {
		var (
			a           T
			got, gone   bool
			handleError error
		)
		// The callback runs with the descriptor held open; it returns
		// false to wait in the poller until the listener is readable.
		err := rc.Read(func(fd uintptr) bool {
			got, gone, handleError = receive(fd, func(n *notif) { a = inspect(fd, n) })
			return got || gone || handleError != nil
		})
		if err != nil {
			return watchError(listener, fmt.Errorf("seccomp: waiting for notifications: %w", err))
		}
		if got {
			record(a)
		}
		if handleError != nil {
			return handleError
		}
		if gone {
			return nil
		}
	}
}

// watchError turns err into one wrapping os.ErrClosed if the caller has
// closed listener (the poller's own error for that is not exported).
func watchError(listener *os.File, err error) error {
	if _, serr := listener.Stat(); errors.Is(serr, os.ErrClosed) {
		return fmt.Errorf("seccomp: watching notifications: %w", os.ErrClosed)
	}
	return err
}

// nativeNotifyNames maps the native notified system call numbers to their
// names; it is empty on an architecture this package does not support, where
// every notification is then reported as foreign.
func nativeNotifyNames() map[uint32]string {
	names := map[uint32]string{}
	for name, nr := range notifyNr[runtime.GOARCH] {
		names[nr] = name
	}
	return names
}

// inspect describes notification n: it reads the address from the
// caller's memory, then confirms with ID_VALID that the call is still
// waiting before trusting what it read through the caller's thread id.
func inspect(fd uintptr, n *notif, native map[uint32]string) Attempt {
	a := Attempt{Time: time.Now(), TID: int(n.pid)}
	if n.pid == 0 {
		a.Unread = "caller not visible in the supervisor's pid namespace"
	}
	var raw []byte
	nr := uint32(n.data.nr)
	name, known := native[nr]
	t := arches[runtime.GOARCH]
	switch {
	case t == nil || n.data.arch != t.auditArch || (t.killX32 && nr&x32SyscallBit != 0):
		a.Syscall = fmt.Sprintf("foreign(arch=%#x,nr=%d)", n.data.arch, nr)
		a.Unread = "foreign ABI: arguments not decoded"
	case !known:
		// Possible only if another program was installed with this
		// listener.
		a.Syscall = fmt.Sprintf("nr=%d", nr)
		a.Unread = "not a call the notify filter notifies"
	default:
		a.Syscall = name
		if n.pid != 0 {
			raw, a.Unread = readDestination(a.TID, name, n.data.args)
		}
	}
	if n.pid == 0 {
		return a
	}
	pid := readTgid(a.TID)
	id := n.id
	if err := ioctlPtr(fd, ioctlNotifIDValid, unsafe.Pointer(&id)); err != nil {
		a.Unread = fmt.Sprintf("call ended before the read was confirmed (%v)", err)
		return a
	}
	a.PID = pid
	if raw != nil {
		a.Family, a.Addr, a.Port, a.Unread = parseSockaddr(raw)
	}
	return a
}

// CheckNotify reports whether this kernel's seccomp notification
// structures are the ones Watch was written for (an error wrapping
// ErrNotifyABI if not), so a caller can refuse to start a watch that would
// end at once.
func CheckNotify() error { return checkNotifSizes() }

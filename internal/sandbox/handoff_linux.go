package sandbox

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/seccomp"
)

// takeHandoff takes init's listeners and seccomp listener (named in its
// first message) with pidfd_getfd, hands the listeners to spec.Serve and
// starts watching the notifications. If the watch ends on an error while the
// tree runs, kill ends the tree: nothing runs unwatched. stop ends the
// watch, waits for its last record and returns the watch's error, if it
// ended on one; Run calls it once the tree is gone.
func takeHandoff(p *initProcess, spec *Spec, first *status, kill func()) (stop func() error, err error) {
	if len(first.ListenFDs) != len(spec.Listen) {
		return nil, &SetupError{Step: "taking the sandbox's listeners", Err: fmt.Errorf("%w: init reports %d listeners, want %d", ErrInitProtocol, len(first.ListenFDs), len(spec.Listen))}
	}
	var ls []net.Listener
	closeListeners := func() {
		for _, l := range ls {
			l.Close()
		}
	}
	for i, n := range first.ListenFDs {
		fd, err := p.getfd(n)
		if err != nil {
			closeListeners()
			return nil, &SetupError{Step: "taking the listener on " + spec.Listen[i], Err: err}
		}
		if err := checkListener(fd, spec.Listen[i]); err != nil {
			unix.Close(fd)
			closeListeners()
			return nil, &SetupError{Step: "taking the listener on " + spec.Listen[i], Err: fmt.Errorf("%w: %v", ErrInitProtocol, err)}
		}
		f := os.NewFile(uintptr(fd), "listener "+spec.Listen[i])
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			closeListeners()
			return nil, &SetupError{Step: "taking the listener on " + spec.Listen[i], Err: err}
		}
		ls = append(ls, l)
	}
	stop = func() error { return nil }
	if spec.WatchNet != nil {
		if stop, err = takeWatch(p, spec, first.NotifyFD, kill); err != nil {
			closeListeners()
			return nil, err
		}
	}
	if len(ls) > 0 {
		spec.Serve(ls)
	}
	return stop, nil
}

// takeWatch takes init's seccomp listener (descriptor n) and watches it
// with spec's WatchNet or WatchFiles. If the watch ends on an error while
// the tree runs, kill ends the tree: nothing runs unwatched. stop ends the
// watch, waits for its last record and returns the watch's error.
func takeWatch(p *initProcess, spec *Spec, n int, kill func()) (stop func() error, err error) {
	fd, err := p.getfd(n)
	if err != nil {
		return nil, &SetupError{Step: "taking the seccomp listener", Err: err}
	}
	watch, err := seccomp.ListenerFile(fd) // closes fd on error
	if err != nil {
		return nil, &SetupError{Step: "taking the seccomp listener", Err: err}
	}
	// If the watch ends early on an error, the listener is closed: with
	// init's copy gone too, every later notified call fails (ENOSYS)
	// rather than going unrecorded, and Run reports the error.
	var watchErr error
	var stopping atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		if spec.WatchFiles != nil {
			err = seccomp.WatchFiles(watch, spec.WatchFiles)
		} else {
			err = seccomp.Watch(watch, spec.WatchNet)
		}
		// Closed by stop, however early (even before Watch got going,
		// which it reports in its own words), is the normal end.
		if err != nil && !errors.Is(err, os.ErrClosed) && !stopping.Load() {
			watchErr = err
			watch.Close()
			kill()
		}
	}()
	var once sync.Once
	return func() error {
		once.Do(func() {
			stopping.Store(true)
			watch.Close()
			<-done
		})
		return watchErr
	}, nil
}

// getfd duplicates init's descriptor n into this process (close-on-exec).
func (p *initProcess) getfd(n int) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.reaped {
		return -1, fmt.Errorf("init is gone")
	}
	if p.pidfd < 0 {
		return -1, fmt.Errorf("this kernel has no pidfd_open, needed to take descriptors from the sandbox")
	}
	fd, err := unix.PidfdGetfd(p.pidfd, n, 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd_getfd(%d): %w", n, err)
	}
	return fd, nil
}

// checkListener checks that fd, taken from init, is a listening TCP socket
// bound to addr: init names descriptors, the host does not take its word.
func checkListener(fd int, addr string) error {
	on, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	if err != nil {
		return fmt.Errorf("descriptor is not a socket: %w", err)
	}
	if on != 1 {
		return fmt.Errorf("socket is not listening")
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return err
	}
	var got netip.AddrPort
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		got = netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		got = netip.AddrPortFrom(netip.AddrFrom16(a.Addr), uint16(a.Port))
	default:
		return fmt.Errorf("socket is not TCP/IP")
	}
	if want := netip.MustParseAddrPort(addr); got != want { // addr was validated by Spec
		return fmt.Errorf("socket is bound to %s, want %s", got, want)
	}
	return nil
}

// listenInside creates the listeners of addrs in the sandbox's network
// namespace (init, after lo is up) and returns their descriptors,
// close-on-exec so the command never holds them.
func listenInside(addrs []string) ([]int, error) {
	var fds []int
	for _, a := range addrs {
		fd, err := listenTCP(a)
		if err != nil {
			for _, f := range fds {
				unix.Close(f)
			}
			return nil, &SetupError{Step: "listening on " + a, Err: err}
		}
		fds = append(fds, fd)
	}
	return fds, nil
}

func listenTCP(addr string) (int, error) {
	ap, err := netip.ParseAddrPort(addr) // validated by Spec
	if err != nil {
		return -1, err
	}
	var sa unix.Sockaddr = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
	family := unix.AF_INET6
	if ap.Addr().Is4() {
		sa, family = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}, unix.AF_INET
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, err
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

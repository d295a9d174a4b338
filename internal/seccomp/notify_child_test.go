package seccomp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The notify tests re-execute the test binary as a child that runs only
// TestNotifyHelperProcess. The child installs the notify filter on itself
// and the parent supervises it:
//
//	parent (TestNotify...)                     child (TestNotifyHelperProcess)
//	  |--- exec, notifyHelperEnv=mode ------------>|
//	  |                                            | LockOSThread, NO_NEW_PRIVS,
//	  |                                            | InstallNotify
//	  |<-- stdout: "listener <fd> <tid> <cloexec>" |
//	  | TakeListener(child, fd) (pidfd_getfd)      |
//	  | [most modes] go Watch(listener)            |
//	  |--- stdin: "go" --------------------------->|
//	  |                                            | close own listener
//	  |                                            | run the mode's calls
//	  |<-- stdout: "result <name> <outcome>" ------|  (each notified call waits
//	  |<-- exit -----------------------------------|   for the parent's answer)
//	  | Watch returns nil (POLLHUP)                |
//	  | compare records, results and what the      |
//	  | servers saw                                |
//
// The listener goes back over write(2) and pidfd_getfd, not SCM_RIGHTS:
// the child's sendmsg would itself be notified, to a supervisor that does
// not have the listener yet.
const notifyHelperEnv = "PROCTOR_SECCOMP_NOTIFY_HELPER"

// Child modes, and the environment variables that parameterise them.
const (
	notifyModeProbes   = "probes"    // notified and quiet calls, once each
	notifyModeRace     = "race"      // connect while another thread flips the address
	notifyModeFailSafe = "fail-safe" // connect while the parent closes the listener
	notifyModeIdle     = "idle"      // wait for stdin to close
	notifyModeBench    = "bench"     // connect a UDP socket N times, report the time
	notifyModeNoNNP    = "no-nnp"    // InstallNotify without no_new_privs

	envTCP      = "PROCTOR_NOTIFY_TCP"      // port of a TCP server on 127.0.0.1
	envTCPDead  = "PROCTOR_NOTIFY_TCP_DEAD" // port bound on 127.0.0.1, not listening
	envUDP      = "PROCTOR_NOTIFY_UDP"      // port of a UDP server on 127.0.0.1
	envUnixPath = "PROCTOR_NOTIFY_UNIX"     // path of a unix stream server
	envAbstract = "PROCTOR_NOTIFY_ABSTRACT" // abstract name of a unix stream server
	envN        = "PROCTOR_NOTIFY_N"        // iterations
)

// Addresses that no test server listens on, for connects that must not
// finish quickly: TEST-NET-2 and the IPv6 documentation prefix. (On the CI
// machines TEST-NET-1, 192.0.2.0/24, is the local network.)
var (
	unroutable4 = [4]byte{198, 51, 100, 1}
	unroutable6 = [16]byte{0x20, 0x01, 0x0d, 0xb8, 15: 1}
)

// requireNotify skips the test unless the kernel can run the notify filter.
func requireNotify(t testing.TB) {
	t.Helper()
	if _, err := NotifyProgram(); err != nil {
		t.Skipf("seccomp user notification: %v", err)
	}
	b, err := os.ReadFile("/proc/sys/kernel/seccomp/actions_avail")
	if err != nil || !strings.Contains(string(b), "user_notif") {
		t.Skipf("seccomp user notification: kernel lacks the user_notif action (%v)", err)
	}
	if err := checkNotifSizes(); err != nil {
		t.Skipf("seccomp user notification: %v", err)
	}
}

// notifyChild is a running helper child whose listener the test holds.
type notifyChild struct {
	cmd      *exec.Cmd
	listener *os.File
	tid      int
	stdin    io.WriteCloser
	out      *bufio.Scanner
	stderr   strings.Builder
}

// startNotifyChild starts a helper child in mode, with env added to its
// environment, and takes its listener.
func startNotifyChild(t testing.TB, mode string, env ...string) *notifyChild {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	c := &notifyChild{}
	c.cmd = exec.CommandContext(ctx, os.Args[0], "-test.run=^TestNotifyHelperProcess$", "-test.count=1")
	c.cmd.Env = append(append(os.Environ(), notifyHelperEnv+"="+mode), env...)
	c.cmd.Stderr = &c.stderr
	var err error
	if c.stdin, err = c.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c.listener != nil {
			c.listener.Close()
		}
		c.stdin.Close()
		c.cmd.Process.Kill()
		c.cmd.Wait()
	})
	c.out = bufio.NewScanner(stdout)
	if !c.out.Scan() {
		c.cmd.Wait()
		t.Fatalf("child sent no listener: %v\nstderr:\n%s", c.out.Err(), c.stderr.String())
	}
	var fd, cloexec int
	if _, err := fmt.Sscanf(c.out.Text(), "listener %d %d %d", &fd, &c.tid, &cloexec); err != nil {
		t.Fatalf("child said %q: %v\nstderr:\n%s", c.out.Text(), err, c.stderr.String())
	}
	if cloexec == 0 {
		t.Errorf("the child's listener is not close-on-exec")
	}
	if c.listener, err = TakeListener(c.cmd.Process.Pid, fd); err != nil {
		t.Fatalf("TakeListener: %v", err)
	}
	return c
}

// goAhead tells the child to close its listener and start.
func (c *notifyChild) goAhead(t testing.TB) {
	t.Helper()
	if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
}

// results reads the child's "result <name> <outcome>" lines until it
// exits, and fails the test unless it exited cleanly after "result done ok".
func (c *notifyChild) results(t testing.TB) map[string]string {
	t.Helper()
	c.stdin.Close()
	res := map[string]string{}
	var lines []string
	for c.out.Scan() {
		lines = append(lines, c.out.Text())
		if f := strings.Fields(c.out.Text()); len(f) >= 3 && f[0] == "result" {
			res[f[1]] = strings.Join(f[2:], " ")
		}
	}
	err := c.cmd.Wait()
	if err != nil || res["done"] != "ok" {
		t.Fatalf("child: %v\nstdout:\n%s\nstderr:\n%s", err, strings.Join(lines, "\n"), c.stderr.String())
	}
	return res
}

// TestNotifyHelperProcess is not a test: it is the child the notify tests run.
func TestNotifyHelperProcess(t *testing.T) {
	mode := os.Getenv(notifyHelperEnv)
	if mode == "" {
		t.Skip("helper child for the notify tests; runs only when they start it")
	}
	runtime.LockOSThread()
	prog, err := NotifyProgram()
	if err != nil {
		fail("NotifyProgram: %v", err)
	}
	if mode == notifyModeNoNNP {
		_, err := InstallNotify(prog)
		fmt.Printf("result no-nnp %v\n", errors.Is(err, ErrNoNewPrivs))
		fmt.Println("result done ok")
		os.Exit(0)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fail("prctl(PR_SET_NO_NEW_PRIVS): %v", err)
	}
	listener, err := InstallNotify(prog)
	if err != nil {
		fail("InstallNotify: %v", err)
	}
	fd := -1
	rc, err := listener.SyscallConn()
	if err == nil {
		err = rc.Control(func(u uintptr) { fd = int(u) })
	}
	if err != nil {
		fail("listener descriptor: %v", err)
	}
	fdFlags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		fail("F_GETFD: %v", err)
	}
	fmt.Printf("listener %d %d %d\n", fd, unix.Gettid(), fdFlags&unix.FD_CLOEXEC)
	stdin := bufio.NewReader(os.Stdin)
	if line, err := stdin.ReadString('\n'); line != "go\n" {
		fail("waiting for go-ahead: %q, %v", line, err)
	}
	listener.Close()

	switch mode {
	case notifyModeProbes:
		notifyProbes()
	case notifyModeRace:
		notifyRace()
	case notifyModeFailSafe:
		udp := envInt(envUDP)
		s := socketOrFail(unix.AF_INET, unix.SOCK_DGRAM)
		lo := &unix.SockaddrInet4{Port: udp, Addr: [4]byte{127, 0, 0, 1}}
		fmt.Printf("result pending %s\n", describe(unix.Connect(s, lo)))
		fmt.Printf("result later %s\n", describe(unix.Connect(s, lo)))
		sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM, 0)
		if err != nil {
			fail("socketpair: %v", err)
		}
		fmt.Printf("result quiet %s\n", describe(unix.Send(sp[0], []byte("x"), 0)))
	case notifyModeIdle:
		io.Copy(io.Discard, stdin)
	case notifyModeBench:
		n := envInt(envN)
		s := socketOrFail(unix.AF_INET, unix.SOCK_DGRAM)
		lo := &unix.SockaddrInet4{Port: envInt(envUDP), Addr: [4]byte{127, 0, 0, 1}}
		start := time.Now()
		for range n {
			if err := unix.Connect(s, lo); err != nil {
				fail("connect: %v", err)
			}
		}
		fmt.Printf("result elapsed %d\n", time.Since(start).Nanoseconds())
	default:
		fail("unknown mode %q", mode)
	}
	fmt.Println("result done ok")
	os.Exit(0)
}

func envInt(name string) int {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		fail("%s: %v", name, err)
	}
	return n
}

func socketOrFail(domain, typ int) int {
	s, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fail("socket(%d, %d): %v", domain, typ, err)
	}
	return s
}

// notifyProbes makes, in order, the calls TestNotifyRecords expects:
// notified ones, each to its own address, then calls that must not be
// notified, then a sendmsg without an address (notified: the filter cannot
// see msg_name), and on amd64 an x32 connect (notified: a foreign ABI).
func notifyProbes() {
	lo := [4]byte{127, 0, 0, 1}
	udp := &unix.SockaddrInet4{Port: envInt(envUDP), Addr: lo}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		fail("socketpair: %v", err)
	}
	buf := []byte("proctor")
	probes := []struct {
		name string
		run  func() error
	}{
		{"connect_tcp", func() error {
			return unix.Connect(socketOrFail(unix.AF_INET, unix.SOCK_STREAM),
				&unix.SockaddrInet4{Port: envInt(envTCP), Addr: lo})
		}},
		{"sendto_udp", func() error {
			return unix.Sendto(socketOrFail(unix.AF_INET, unix.SOCK_DGRAM), []byte("proctor-sendto"), 0, udp)
		}},
		{"sendmsg_udp", func() error {
			_, err := unix.SendmsgN(socketOrFail(unix.AF_INET, unix.SOCK_DGRAM), []byte("proctor-sendmsg"), nil, udp, 0)
			return err
		}},
		{"sendmmsg_udp", func() error {
			return sendmmsg1(socketOrFail(unix.AF_INET, unix.SOCK_DGRAM), []byte("proctor-sendmmsg"), udp.Port)
		}},
		{"connect_unix", func() error {
			return unix.Connect(socketOrFail(unix.AF_UNIX, unix.SOCK_STREAM), &unix.SockaddrUnix{Name: os.Getenv(envUnixPath)})
		}},
		{"connect_abstract", func() error {
			return unix.Connect(socketOrFail(unix.AF_UNIX, unix.SOCK_STREAM), &unix.SockaddrUnix{Name: "@" + os.Getenv(envAbstract)})
		}},
		{"connect_unroutable4", func() error {
			return unix.Connect(socketOrFail(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK),
				&unix.SockaddrInet4{Port: 9, Addr: unroutable4})
		}},
		{"connect_unroutable6", func() error {
			return unix.Connect(socketOrFail(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_NONBLOCK),
				&unix.SockaddrInet6{Port: 9, Addr: unroutable6})
		}},
		// Not notified.
		{"open_read", func() error {
			fd, err := unix.Open("/dev/zero", unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err == nil {
				_, err = unix.Read(fd, buf)
			}
			return err
		}},
		{"write_socket", func() error { _, err := unix.Write(sp[0], buf); return err }},
		{"send_socket", func() error { return unix.Send(sp[0], buf, 0) }},
		{"sendto_null_addrlen16", func() error {
			_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(sp[0]), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), 0, 0, 16)
			if e != 0 {
				return e
			}
			return nil
		}},
		{"recv_socket", func() error { _, _, err := unix.Recvfrom(sp[1], buf, 0); return err }},
		// Notified, with no address to record.
		{"sendmsg_noname", func() error { _, err := unix.SendmsgN(sp[0], buf, nil, nil, 0); return err }},
	}
	if runtime.GOARCH == "amd64" {
		// A foreign ABI, last: recorded undecoded, whatever the kernel
		// then makes of it (most kernels lack x32: ENOSYS).
		probes = append(probes, struct {
			name string
			run  func() error
		}{"x32_connect", func() error {
			_, _, e := unix.Syscall(unix.SYS_CONNECT|x32SyscallBit, uintptr(sp[0]), 0, 0)
			if e != 0 {
				return e
			}
			return nil
		}})
	}
	for _, p := range probes {
		fmt.Printf("result %s %s\n", p.name, describe(p.run()))
	}
}

// sendmmsg1 sends p to 127.0.0.1:port as the only message of a sendmmsg.
func sendmmsg1(s int, p []byte, port int) error {
	var sa unix.RawSockaddrInet4
	sa.Family = unix.AF_INET
	sa.Addr = [4]byte{127, 0, 0, 1}
	sa.Port = uint16(port>>8 | port&0xff<<8) // network byte order
	iov := unix.Iovec{Base: &p[0]}
	iov.SetLen(len(p))
	var m struct {
		hdr unix.Msghdr
		len uint32
	}
	m.hdr.Name = (*byte)(unsafe.Pointer(&sa))
	m.hdr.Namelen = unix.SizeofSockaddrInet4
	m.hdr.Iov = &iov
	m.hdr.SetIovlen(1)
	r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(s), uintptr(unsafe.Pointer(&m)), 1, 0, 0, 0)
	runtime.KeepAlive(p)
	if e != 0 {
		return e
	}
	if r != 1 {
		return fmt.Errorf("sendmmsg sent %d messages", r)
	}
	return nil
}

// rawInet4 is a struct sockaddr_in whose first word (family and port)
// another thread can overwrite atomically.
type rawInet4 struct {
	familyPort uint32
	addr       [4]byte
	zero       [8]byte
}

func familyPort(port int) uint32 {
	return unix.AF_INET | uint32(port>>8|port&0xff<<8)<<16
}

// notifyRace connects N times to one sockaddr_in while another thread
// flips its port between a listening server (A) and a bound port with no
// listener (B). Whatever the supervisor reads, each outcome must be what
// the kernel made of the port it read itself: a connection whose peer is A,
// or ECONNREFUSED from B.
func notifyRace() {
	portA, portB, n := envInt(envTCP), envInt(envTCPDead), envInt(envN)
	sa := &rawInet4{familyPort: familyPort(portA), addr: [4]byte{127, 0, 0, 1}}
	var stop atomic.Bool
	flipped := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer close(flipped)
		a, b := familyPort(portA), familyPort(portB)
		for !stop.Load() {
			atomic.StoreUint32(&sa.familyPort, a)
			atomic.StoreUint32(&sa.familyPort, b)
		}
	}()
	var ok, refused, other, badPeer int
	for range n {
		s := socketOrFail(unix.AF_INET, unix.SOCK_STREAM)
		_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(s), uintptr(unsafe.Pointer(sa)), unix.SizeofSockaddrInet4)
		switch e {
		case 0:
			peer, err := unix.Getpeername(s)
			if in4, isIn4 := peer.(*unix.SockaddrInet4); err == nil && isIn4 && in4.Port == portA {
				ok++
			} else {
				badPeer++
			}
		case unix.ECONNREFUSED:
			refused++
		default:
			other++
			fmt.Printf("result race_error %s\n", describe(e))
		}
		unix.Close(s)
	}
	stop.Store(true)
	<-flipped
	runtime.KeepAlive(sa)
	fmt.Printf("result race_ok %d\nresult race_refused %d\nresult race_other %d\nresult race_badpeer %d\n",
		ok, refused, other, badPeer)
}

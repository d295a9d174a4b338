package seccomp

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// recorder collects Watch's records; safe for concurrent use.
type recorder struct {
	mu      sync.Mutex
	records []Attempt
}

func (r *recorder) record(a Attempt) {
	r.mu.Lock()
	r.records = append(r.records, a)
	r.mu.Unlock()
}

func (r *recorder) all() []Attempt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.records)
}

// watchChild runs Watch on c's listener and returns a channel that
// receives its result.
func watchChild(c *notifyChild, r *recorder) <-chan error {
	done := make(chan error, 1)
	go func() { done <- Watch(c.listener, r.record) }()
	return done
}

// waitWatch waits for Watch to return after the last target exited.
func waitWatch(t *testing.T, done <-chan error) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Watch: %v, want nil once the child is gone", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Watch did not return after the child exited")
	}
}

// tcpServer listens on 127.0.0.1 and counts the connections it accepts.
func tcpServer(t *testing.T) (port int, accepted <-chan struct{}) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port, acceptLoop(ln)
}

func acceptLoop(ln net.Listener) <-chan struct{} {
	ch := make(chan struct{}, 4096)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}()
	return ch
}

func expectEvent(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Errorf("%s: never happened, so the call did not really run", what)
	}
}

// TestNotifyRecords runs each notified call once, and calls that must not
// be notified, in a child under the notify filter. Every notified call is
// recorded with its address and caller, and happens as if unobserved (the
// servers see the connections and datagrams); the quiet calls leave no
// record.
func TestNotifyRecords(t *testing.T) {
	requireNotify(t)
	tcpPort, tcpAccepted := tcpServer(t)
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	datagrams := make(chan string, 8)
	go func() {
		buf := make([]byte, 64)
		for {
			n, _, err := udp.ReadFrom(buf)
			if err != nil {
				return
			}
			datagrams <- string(buf[:n])
		}
	}()
	udpPort := udp.LocalAddr().(*net.UDPAddr).Port
	unixPath := filepath.Join(t.TempDir(), "sock")
	unixLn, err := net.Listen("unix", unixPath)
	if err != nil {
		t.Fatal(err)
	}
	defer unixLn.Close()
	abstract := fmt.Sprintf("proctor-seccomp-notify-%d", os.Getpid())
	abstractLn, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer abstractLn.Close()
	unixAccepted, abstractAccepted := acceptLoop(unixLn), acceptLoop(abstractLn)

	child := startNotifyChild(t, notifyModeProbes,
		envTCP+"="+strconv.Itoa(tcpPort), envUDP+"="+strconv.Itoa(udpPort),
		envUnixPath+"="+unixPath, envAbstract+"="+abstract)
	var r recorder
	done := watchChild(child, &r)
	child.goAhead(t)
	res := child.results(t)
	waitWatch(t, done)

	// Outcomes: the audit changed nothing.
	for _, name := range []string{"connect_tcp", "sendto_udp", "sendmsg_udp", "sendmmsg_udp",
		"connect_unix", "connect_abstract", "open_read", "write_socket", "send_socket",
		"sendto_null_addrlen16", "recv_socket", "sendmsg_noname"} {
		if res[name] != "ok" {
			t.Errorf("%s: %q, want ok", name, res[name])
		}
	}
	for _, name := range []string{"connect_unroutable4", "connect_unroutable6"} {
		switch res[name] {
		case "EINPROGRESS", "ENETUNREACH", "EHOSTUNREACH", "EADDRNOTAVAIL":
		default:
			t.Errorf("%s: %q, want what the network says (EINPROGRESS or unreachable)", name, res[name])
		}
	}
	if runtime.GOARCH == "amd64" {
		t.Logf("x32 connect, let through: %s", res["x32_connect"])
	}
	expectEvent(t, tcpAccepted, "TCP connection accepted")
	expectEvent(t, unixAccepted, "unix connection accepted")
	expectEvent(t, abstractAccepted, "abstract unix connection accepted")
	got := map[string]bool{}
	for range 3 {
		select {
		case d := <-datagrams:
			got[d] = true
		case <-time.After(5 * time.Second):
		}
	}
	for _, d := range []string{"proctor-sendto", "proctor-sendmsg", "proctor-sendmmsg"} {
		if !got[d] {
			t.Errorf("datagram %q never arrived", d)
		}
	}

	// Records: exactly the notified calls, in order.
	type rec struct {
		syscall, family, addr string
		port                  int
	}
	want := []rec{
		{"connect", "inet", "127.0.0.1", tcpPort},
		{"sendto", "inet", "127.0.0.1", udpPort},
		{"sendmsg", "inet", "127.0.0.1", udpPort},
		{"sendmmsg", "inet", "127.0.0.1", udpPort},
		{"connect", "unix", unixPath, 0},
		{"connect", "unix", "@" + abstract, 0},
		{"connect", "inet", "198.51.100.1", 9},
		{"connect", "inet6", "2001:db8::1", 9},
		{"sendmsg", "", "", 0},
	}
	if runtime.GOARCH == "amd64" {
		want = append(want, rec{fmt.Sprintf("foreign(arch=%#x,nr=%d)", auditX64, 0x40000000|42), "", "", 0})
	}
	var have []rec
	for _, a := range r.all() {
		have = append(have, rec{a.Syscall, a.Family, a.Addr, a.Port})
		if a.PID != child.cmd.Process.Pid || a.TID != child.tid {
			t.Errorf("%s %s: PID %d TID %d, want %d and %d", a.Syscall, a.Addr, a.PID, a.TID, child.cmd.Process.Pid, child.tid)
		}
		if foreign := strings.HasPrefix(a.Syscall, "foreign("); foreign != (a.Unread != "") {
			t.Errorf("%s: unread: %q", a.Syscall, a.Unread)
		}
		if time.Since(a.Time) > time.Minute || a.Time.After(time.Now()) {
			t.Errorf("%s: time %v is not now", a.Syscall, a.Time)
		}
	}
	// A signal that interrupts a call before the supervisor receives it
	// restarts the call, which is then notified again.
	n := len(have)
	if have = slices.Compact(have); len(have) != n {
		t.Logf("%d repeated records (restarted calls)", n-len(have))
	}
	if !slices.Equal(have, want) {
		t.Errorf("records:\n%v\nwant:\n%v", have, want)
	}
}

// TestNotifyRace: while the child connects in a loop, another of its
// threads flips the address's port between a server and a refused port.
// The supervisor must keep going, every record must name one of the two
// ports (or say it could not read), and every outcome must be what the
// kernel made of the memory it read itself: the audit decides nothing.
func TestNotifyRace(t *testing.T) {
	requireNotify(t)
	const n = 400
	portA, _ := tcpServer(t)
	dead, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dead)
	if err := unix.Bind(dead, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(dead)
	if err != nil {
		t.Fatal(err)
	}
	portB := sa.(*unix.SockaddrInet4).Port

	child := startNotifyChild(t, notifyModeRace, envTCP+"="+strconv.Itoa(portA),
		envTCPDead+"="+strconv.Itoa(portB), envN+"="+strconv.Itoa(n))
	var r recorder
	done := watchChild(child, &r)
	child.goAhead(t)
	res := child.results(t)
	waitWatch(t, done)

	ok, _ := strconv.Atoi(res["race_ok"])
	refused, _ := strconv.Atoi(res["race_refused"])
	if res["race_other"] != "0" || res["race_badpeer"] != "0" || ok+refused != n {
		t.Errorf("outcomes %v: want only connections to port A and refusals from port B", res)
	}
	if ok == 0 || refused == 0 {
		t.Errorf("%d connected, %d refused: the flipping never raced the calls, so this run tested nothing", ok, refused)
	}
	counts := map[string]int{}
	for _, a := range r.all() {
		switch {
		case a.Syscall != "connect":
			t.Errorf("unexpected record %+v", a)
		case a.Unread != "":
			counts["unread"]++
		case a.Family == "inet" && a.Addr == "127.0.0.1" && a.Port == portA:
			counts["A"]++
		case a.Family == "inet" && a.Addr == "127.0.0.1" && a.Port == portB:
			counts["B"]++
		default:
			t.Errorf("record %+v names neither value the memory held", a)
		}
	}
	total := counts["A"] + counts["B"] + counts["unread"]
	if total < n {
		t.Errorf("%d records for %d connects", total, n)
	}
	t.Logf("outcomes: %d connected, %d refused; records: %d port A, %d port B, %d unread",
		ok, refused, counts["A"], counts["B"], counts["unread"])
}

// TestNotifyFailSafe: a supervisor that closes the listener does not let
// calls through unrecorded. A call waiting for its answer then fails with
// ENOSYS, and so does every later notified call; other calls go on.
func TestNotifyFailSafe(t *testing.T) {
	requireNotify(t)
	child := startNotifyChild(t, notifyModeFailSafe, envUDP+"=9")
	child.goAhead(t)
	// Wait until the child's connect is waiting for an answer.
	rc, err := child.listener.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var pollErr error
	var revents int16
	if err := rc.Control(func(fd uintptr) {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		_, pollErr = unix.Poll(pfd, 10_000)
		revents = pfd[0].Revents
	}); err != nil || pollErr != nil || revents&unix.POLLIN == 0 {
		t.Fatalf("no pending notification: %v, %v, revents %#x", err, pollErr, revents)
	}
	child.listener.Close()
	res := child.results(t)
	for name, want := range map[string]string{"pending": "ENOSYS", "later": "ENOSYS", "quiet": "ok"} {
		if res[name] != want {
			t.Errorf("%s: %q, want %s", name, res[name], want)
		}
	}
}

// TestNotifyWatchReturnsOnClose: Watch waits without spinning, and
// returns, wrapping os.ErrClosed, as soon as the listener is closed.
func TestNotifyWatchReturnsOnClose(t *testing.T) {
	requireNotify(t)
	child := startNotifyChild(t, notifyModeIdle)
	var r recorder
	done := watchChild(child, &r)
	child.goAhead(t)

	var before, after unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &before)
	time.Sleep(300 * time.Millisecond)
	unix.Getrusage(unix.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	if cpu > 100*time.Millisecond {
		t.Errorf("idle Watch used %v of CPU in 300ms: it spins", cpu)
	}

	start := time.Now()
	child.listener.Close()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Watch: %v, want an error wrapping os.ErrClosed", err)
		}
		t.Logf("Watch returned %v after Close", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Fatal("Watch did not return after the listener was closed")
	}
	child.results(t)
	if len(r.all()) != 0 {
		t.Errorf("records from an idle child: %+v", r.all())
	}
}

func TestNotifyWatchRejectsBlockingFile(t *testing.T) {
	requireNotify(t)
	f, err := os.Open("/dev/null") // a character device: not pollable
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := Watch(f, func(Attempt) { t.Error("record called") }); !errors.Is(err, ErrListenerNotPollable) {
		t.Errorf("Watch: %v, want ErrListenerNotPollable", err)
	}
}

func TestTakeListenerRejectsOther(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	rc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd int
	rc.Control(func(u uintptr) { fd = int(u) })
	f, err := TakeListener(os.Getpid(), fd)
	if !errors.Is(err, ErrNotListener) {
		t.Errorf("TakeListener of a pipe: %v, %v; want ErrNotListener", f, err)
	}
}

func TestInstallNotifyRequiresNoNewPrivs(t *testing.T) {
	requireNotify(t)
	if nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); err != nil || nnp == 1 {
		t.Skipf("no_new_privs unset: the test process already has it set (or cannot read it: %v)", err)
	}
	out, err := runNoNNPChild(t)
	if err != nil || out["no-nnp"] != "true" {
		t.Errorf("InstallNotify without no_new_privs was not refused with ErrNoNewPrivs: %v %v", out, err)
	}
}

func runNoNNPChild(t *testing.T) (map[string]string, error) {
	t.Helper()
	out, err := runNotifyHelper(notifyModeNoNNP)
	res := map[string]string{}
	for _, line := range out {
		var name, value string
		if n, _ := fmt.Sscanf(line, "result %s %s", &name, &value); n == 2 {
			res[name] = value
		}
	}
	return res, err
}

func TestInstallNotifyRejectsInvalidProgram(t *testing.T) {
	// Refused before any system call: safe in the test process.
	for _, prog := range [][]unix.SockFilter{nil, {}, make([]unix.SockFilter, 4097)} {
		if f, err := InstallNotify(prog); !errors.Is(err, ErrInvalidProgram) || f != nil {
			t.Errorf("InstallNotify(%d instructions): %v, want ErrInvalidProgram", len(prog), err)
		}
	}
}

// runNotifyHelper runs a helper child in a mode that does not hand over a
// listener, and returns its stdout lines.
func runNotifyHelper(mode string) ([]string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestNotifyHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), notifyHelperEnv+"="+mode)
	out, err := cmd.Output()
	return strings.Split(string(out), "\n"), err
}

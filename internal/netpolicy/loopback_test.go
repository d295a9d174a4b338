package netpolicy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestAllowListLoopback(t *testing.T) {
	tests := []struct {
		allow []string
		want  []string
	}{
		{[]string{"127.0.0.1:8000"}, []string{"127.0.0.1:8000"}},
		{[]string{"localhost:8000"}, []string{"127.0.0.1:8000", "[::1]:8000"}},
		{[]string{"LocalHost.:8000"}, []string{"127.0.0.1:8000", "[::1]:8000"}},
		{[]string{"localhost"}, []string{"127.0.0.1:80", "127.0.0.1:443", "[::1]:80", "[::1]:443"}},
		{[]string{"127.0.0.53:53", "[::1]:9", "::1"}, []string{"127.0.0.53:53", "[::1]:9", "[::1]:80", "[::1]:443"}},
		{[]string{"[::ffff:127.0.0.1]:8000"}, []string{"127.0.0.1:8000"}},
		{[]string{"127.0.0.1:8000", "localhost:8000", "[::1]:8000", "127.0.0.1:8000"}, []string{"127.0.0.1:8000", "[::1]:8000"}},
		// Never: a wildcard, another name (whatever it resolves to), an
		// address that is not loopback.
		{[]string{"*.example.com:8000", "*.example.com", "example.com:8000", "foo.localhost:8000",
			"localhost.example.com:8000", "10.0.0.1:8000", "0.0.0.0:8000", "[::]:8000", "[::ffff:10.0.0.1]:8000"}, nil},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.allow, ","), func(t *testing.T) {
			a, err := ParseAllowList(tt.allow)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, ap := range a.Loopback() {
				got = append(got, ap.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("Loopback() = %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := ParseRule("*.localhost:8000"); err == nil {
		t.Errorf(`"*.localhost:8000" parses: a wildcard over loopback names`)
	}
}

// forwardAt serves a forwarder at each of ports on the host's 127.0.0.1,
// standing in for the agent's loopback.
func (tp *testProxy) forwardAt(t *testing.T, ports ...int) {
	t.Helper()
	for _, port := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = tp.ServeLoopback(l) }()
	}
}

// exchange connects to 127.0.0.1:port, sends msg, half-closes, and returns
// what came back and the error that ended it (a reset can end the connect
// itself: on loopback it comes before the dialler looks).
func exchange(t *testing.T, port int, msg string) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	_ = c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	return string(b), err
}

// A connection to a forwarder reaches the host only when a rule names its
// address and port; it is relayed as it is and recorded like a request to
// the proxy.
func TestServeLoopback(t *testing.T) {
	up := startUpstream(t, true)
	// The forwarders' own ports are only known once they listen: the
	// allow-list is made for them, and the dialler sends what they ask for
	// to the upstream.
	allowed, denied := freePort(t), freePort(t)
	tp := startProxy(t, env{
		allow:    []string{"127.0.0.1:" + strconv.Itoa(allowed), "*.example.com:" + strconv.Itoa(denied), "example.com:" + strconv.Itoa(denied)},
		redirect: up.addr(),
	})
	tp.forwardAt(t, allowed, denied)

	a, d := tp.echoAndReset(t, allowed, denied, "SSH-2.0-anything\r\n")
	want := "127.0.0.1:" + strconv.Itoa(allowed)
	if !a.Allowed || a.Method != MethodDirect || a.Host != "127.0.0.1" || a.Rule != want || a.Addr != want ||
		a.BytesUp != 18 || a.BytesDown != 18 || a.Reason != "" {
		t.Errorf("allowed decision %+v", a)
	}
	if d.Allowed || d.Method != MethodDirect || d.Reason != "not on the allow-list" || d.Addr != "" || d.Rule != "" {
		t.Errorf("denied decision %+v", d)
	}
	if dials := tp.dials(); !slices.Equal(dials, []string{want}) {
		t.Errorf("dialled %v, want only %s", dials, want)
	}
	if n := up.accepts.Load(); n != 1 {
		t.Errorf("the upstream got %d connections, want 1", n)
	}
}

// A "localhost" rule means the host's loopback in either family: the
// forwarder dials its own family first and the other when it does not
// answer, and reports the address that did. An upstream that answers on
// neither gets the agent a reset and a denial on the record.
func TestServeLoopbackLocalhost(t *testing.T) {
	up := startUpstream(t, true)
	fallback, dead := freePort(t), freePort(t)
	var mu sync.Mutex
	var dials []string
	tp := startProxy(t, env{
		allow: []string{"localhost:" + strconv.Itoa(fallback), "localhost:" + strconv.Itoa(dead)},
		tweak: func(o *Options) {
			next := o.Dial
			o.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				mu.Lock()
				dials = append(dials, addr)
				mu.Unlock()
				if addr == "[::1]:"+strconv.Itoa(fallback) {
					addr = up.addr() // the service is on the host's ::1 only
				} else if ap := netip.MustParseAddrPort(addr); ap.Port() == uint16(fallback) || ap.Port() == uint16(dead) {
					return nil, errors.New("connection refused")
				}
				return next(ctx, network, addr)
			}
		},
	})
	tp.forwardAt(t, fallback, dead)
	f, d := tp.echoAndReset(t, fallback, dead, "ping")
	if !f.Allowed || f.Rule != "localhost:"+strconv.Itoa(fallback) || f.Addr != "[::1]:"+strconv.Itoa(fallback) || f.BytesDown != 4 {
		t.Errorf("fallback decision %+v", f)
	}
	if d.Allowed || !strings.HasPrefix(d.Reason, "dial: ") || d.BytesUp != 0 {
		t.Errorf("dead upstream decision %+v", d)
	}
	mu.Lock()
	ds := slices.Sorted(slices.Values(dials))
	mu.Unlock()
	want := []string{"127.0.0.1:" + strconv.Itoa(dead), "127.0.0.1:" + strconv.Itoa(fallback), "[::1]:" + strconv.Itoa(dead), "[::1]:" + strconv.Itoa(fallback)}
	slices.Sort(want)
	if !slices.Equal(ds, want) {
		t.Errorf("dialled %v, want %v", ds, want)
	}
}

// fakeListener is a listener at any address, accepting nothing.
type fakeListener struct {
	addr   net.Addr
	closed bool
}

func (f *fakeListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (f *fakeListener) Close() error              { f.closed = true; return nil }
func (f *fakeListener) Addr() net.Addr            { return f.addr }

// A forwarder is only ever served on loopback.
func TestServeLoopbackRefusesOtherAddresses(t *testing.T) {
	allow, _ := ParseAllowList([]string{"192.0.2.1:80", "[2001:db8::1]:80"})
	decisions := 0
	p, err := New(Options{Allow: allow, Record: func(Decision) { decisions++ }})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, a := range []string{"192.0.2.1:80", "[2001:db8::1]:80", "0.0.0.0:80"} {
		l := &fakeListener{addr: net.TCPAddrFromAddrPort(netip.MustParseAddrPort(a))}
		if err := p.ServeLoopback(l); err == nil || !l.closed {
			t.Errorf("ServeLoopback on %s: %v (closed %v), want an error and the listener closed", a, err, l.closed)
		}
	}
	if decisions != 0 {
		t.Errorf("%d decisions", decisions)
	}
}

// echoAndReset sends msg to the forwarder at echo, which must send it
// back, and to the one at reset, which must reset the connection, and
// returns their decisions.
func (tp *testProxy) echoAndReset(t *testing.T, echo, reset int, msg string) (Decision, Decision) {
	t.Helper()
	if got, err := exchange(t, echo, msg); err != nil || got != msg {
		t.Errorf("port %d: got %q, %v; want %q back", echo, got, err, msg)
	}
	if _, err := exchange(t, reset, msg); !isReset(err) {
		t.Errorf("port %d: %v, want a reset", reset, err)
	}
	recs := tp.rec.wait(t, 2)
	byPort := map[int]Decision{recs[0].Port: recs[0], recs[1].Port: recs[1]}
	return byPort[echo], byPort[reset]
}

// isReset reports whether err is the peer's reset (or a write that met it).
func isReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

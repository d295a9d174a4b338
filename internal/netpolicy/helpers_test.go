package netpolicy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// recorder collects Decisions.
type recorder struct {
	mu   sync.Mutex
	recs []Decision
}

func (r *recorder) record(d Decision) {
	r.mu.Lock()
	r.recs = append(r.recs, d)
	r.mu.Unlock()
}

func (r *recorder) all() []Decision {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Decision(nil), r.recs...)
}

// wait returns the decisions once there are n of them, or fails.
func (r *recorder) wait(t testing.TB, n int) []Decision {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := r.all()
		if len(got) >= n {
			if len(got) > n {
				t.Fatalf("got %d decisions, want %d: %+v", len(got), n, got)
			}
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("got %d decisions after 5s, want %d: %+v", len(got), n, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// testProxy is a Proxy serving on 127.0.0.1 with a recorder, a fake
// resolver and a dialer that checks what it is asked to dial.
type testProxy struct {
	*Proxy
	addr    string
	rec     *recorder
	serve   chan error
	dialled atomic.Int64 // calls to Dial
	lookups atomic.Int64 // calls to Resolve

	mu         sync.Mutex
	dialAddrs  []string
	lookupHost []string
}

// env describes a test proxy: the allow-list, what names resolve to, and
// where a dialled ip:port really goes (redirect; "" dials it as it is).
type env struct {
	allow     []string
	names     map[string][]string
	redirect  string
	hostAddrs []string
	tweak     func(*Options)
}

func startProxy(t testing.TB, e env) *testProxy {
	t.Helper()
	allow, err := ParseAllowList(e.allow)
	if err != nil {
		t.Fatal(err)
	}
	tp := &testProxy{rec: &recorder{}, serve: make(chan error, 1)}
	o := Options{
		Allow: allow,
		Record: func(d Decision) {
			for _, s := range []string{d.Reason, d.SNI, d.Host} {
				if clean(s) != s {
					t.Errorf("decision holds unclean text %q: %+v", s, d)
				}
			}
			if d.Time.IsZero() || d.Duration < 0 || (d.Allowed && d.Addr == "") || (!d.Allowed && d.BytesUp != 0) {
				t.Errorf("inconsistent decision %+v", d)
			}
			tp.rec.record(d)
		},
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			tp.lookups.Add(1)
			tp.mu.Lock()
			tp.lookupHost = append(tp.lookupHost, host)
			tp.mu.Unlock()
			ss, ok := e.names[host]
			if !ok {
				return nil, errors.New("no such host " + host)
			}
			var out []netip.Addr
			for _, s := range ss {
				out = append(out, netip.MustParseAddr(s))
			}
			return out, nil
		},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			tp.dialled.Add(1)
			if _, err := netip.ParseAddrPort(addr); err != nil || network != "tcp" {
				t.Errorf("Dial(%q, %q): not tcp to an ip:port", network, addr)
			}
			tp.mu.Lock()
			tp.dialAddrs = append(tp.dialAddrs, addr)
			tp.mu.Unlock()
			if e.redirect != "" {
				addr = e.redirect
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
		HostAddrs: []netip.Addr{},
	}
	for _, s := range e.hostAddrs {
		o.HostAddrs = append(o.HostAddrs, netip.MustParseAddr(s))
	}
	if e.tweak != nil {
		e.tweak(&o)
	}
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.Proxy, tp.addr = p, l.Addr().String()
	go func() { tp.serve <- p.Serve(l) }()
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case err := <-tp.serve:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("Serve did not return after Close")
		}
	})
	return tp
}

func (tp *testProxy) dials() []string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]string(nil), tp.dialAddrs...)
}

// dialProxy opens a connection to the proxy.
func (tp *testProxy) dialProxy(t testing.TB) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", tp.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// connect sends CONNECT target and reads the proxy's answer.
func (tp *testProxy) connect(t testing.TB, target string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	c := tp.dialProxy(t)
	if _, err := io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("reading the answer to CONNECT %s: %v", target, err)
	}
	return c, br, resp
}

// upstream is a raw TCP server on 127.0.0.1 that counts connections and
// keeps what each sends until EOF. With echo set it sends it back too.
type upstream struct {
	l       net.Listener
	accepts atomic.Int64
	echo    bool
	mu      sync.Mutex
	got     [][]byte
	wg      sync.WaitGroup
}

func startUpstream(t testing.TB, echo bool) *upstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &upstream{l: l, echo: echo}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u.accepts.Add(1)
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				var buf []byte
				b := make([]byte, 4096)
				for {
					n, err := c.Read(b)
					buf = append(buf, b[:n]...)
					if u.echo && n > 0 {
						if _, err := c.Write(b[:n]); err != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				u.mu.Lock()
				u.got = append(u.got, buf)
				u.mu.Unlock()
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); u.wg.Wait() })
	return u
}

func (u *upstream) addr() string { return u.l.Addr().String() }

func (u *upstream) received() [][]byte {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([][]byte(nil), u.got...)
}

// countConns counts the TCP connections an httptest server accepts. It
// must be called before the server starts.
func countConns(cfg *http.Server) *atomic.Int64 {
	n := new(atomic.Int64)
	cfg.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	return n
}

// readAll reads from r until EOF or an error, returning what was read.
func readAll(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}

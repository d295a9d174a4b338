package netpolicy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

func goroutines() int { return runtime.NumGoroutine() }

// waitGoroutines fails unless the goroutine count falls back to base.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		err  string
	}{
		{"no Record", Options{}, "Record is required"},
		{"negative timeout", Options{Record: func(Decision) {}, IdleTimeout: -1}, "negative"},
		{"negative limit", Options{Record: func(Decision) {}, MaxConns: -1}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.o); err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("err = %v, want %q", err, tt.err)
			}
		})
	}
	p, err := New(Options{Record: func(Decision) {}})
	if err != nil {
		t.Fatal(err)
	}
	if p.o.HeaderTimeout != 30*time.Second || p.o.MaxConns != 256 || p.o.MaxHeaderBytes != 32<<10 {
		t.Errorf("defaults: %+v", p.o)
	}
	if !p.check.host[netip.MustParseAddr("127.0.0.1")] {
		t.Errorf("host addresses from the interfaces lack loopback: %v", p.o.HostAddrs)
	}
}

// Slow or oversized request headers are cut off and recorded; a
// connection that never sends a byte is closed without a record.
func TestHeaderLimits(t *testing.T) {
	tests := []struct {
		name   string
		send   string
		status int
		reason string
	}{
		{"slow header", "GET http://api.provider.test/ HTTP/1.1\r\nX-Slow: ", 408, "header not received within 200ms"},
		{"silent", "", 0, ""},
		{"huge header", "GET http://api.provider.test/ HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 8000) + "\r\n\r\n", 431, "header larger than 1024 bytes"},
		{"huge CONNECT", "CONNECT api.provider.test:443 HTTP/1.1\r\n" + strings.Repeat("X-A: b\r\n", 1000) + "\r\n", 431, "header larger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := startProxy(t, env{tweak: func(o *Options) {
				o.HeaderTimeout = 200 * time.Millisecond
				o.MaxHeaderBytes = 1024
			}})
			c := tp.dialProxy(t)
			io.WriteString(c, tt.send)
			got := readAll(c)
			if tt.status == 0 {
				if got != "" {
					t.Errorf("got %q", got)
				}
				time.Sleep(50 * time.Millisecond)
				if recs := tp.rec.all(); len(recs) != 0 {
					t.Errorf("recorded %+v", recs)
				}
				return
			}
			if !strings.HasPrefix(got, fmt.Sprintf("HTTP/1.1 %d ", tt.status)) || !strings.Contains(got, tt.reason) {
				t.Errorf("got %q", got)
			}
			if d := tp.rec.wait(t, 1)[0]; d.Allowed || !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("decision %+v", d)
			}
		})
	}
}

// With MaxConns connections open, the next waits in the backlog until
// one closes.
func TestMaxConns(t *testing.T) {
	tp := startProxy(t, env{tweak: func(o *Options) { o.MaxConns = 2 }})
	a, b := tp.dialProxy(t), tp.dialProxy(t)
	time.Sleep(50 * time.Millisecond)
	c := tp.dialProxy(t)
	io.WriteString(c, "CONNECT evil.test:443 HTTP/1.1\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); n != 0 || !isTimeout(err) {
		t.Fatalf("third connection served while two were open: %d, %v", n, err)
	}
	a.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 403 {
		t.Fatalf("after a slot freed: %v, %v", resp, err)
	}
	b.Close()
}

// Many tunnels and requests at once: one Decision each, and no goroutine
// left once the proxy is closed.
func TestConcurrentNoLeak(t *testing.T) {
	base := goroutines()
	up := startUpstream(t, true)
	tp := startProxy(t, env{allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"127.0.0.1"}}, redirect: up.addr()})
	const n = 40
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", tp.addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			target := "api.provider.test:443"
			if i%2 == 1 {
				target = "evil.test:443"
			}
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", target)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
			if err != nil {
				t.Error(err)
				return
			}
			if resp.StatusCode == 200 {
				c.Write([]byte(strings.Repeat("z", 9999) + "\n")) // an opaque protocol's first line
				io.ReadFull(br, make([]byte, 10000))
			}
		}()
	}
	wg.Wait()
	recs := tp.rec.wait(t, n)
	allowed := 0
	for _, d := range recs {
		if d.Allowed {
			allowed++
			if d.BytesUp != 10000 || d.BytesDown != 10000 {
				t.Errorf("%+v", d)
			}
		}
	}
	if allowed != n/2 {
		t.Errorf("%d allowed, want %d", allowed, n/2)
	}
	tp.Close()
	<-tp.serve
	tp.serve <- nil
	up.l.Close()
	up.wg.Wait()
	waitGoroutines(t, base)
}

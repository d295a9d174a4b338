package netpolicy

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A real TLS client through CONNECT: the right name gets a working
// handshake and HTTP exchange; an evil ServerName inside an allowed
// CONNECT gets an access_denied alert and never reaches the server.
func TestConnectTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secret data for "+r.Host)
	}))
	conns := countConns(srv.Config)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	tests := []struct {
		name       string
		serverName string
		wantErr    string
	}{
		{name: "matching SNI", serverName: "example.com"},
		{name: "evil SNI", serverName: "evil.test", wantErr: "access denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := conns.Load()
			tp := startProxy(t, env{
				allow: []string{"example.com:" + port},
				names: map[string][]string{"example.com": {"127.0.0.1"}, "evil.test": {"127.0.0.1"}},
			})
			c, br, resp := tp.connect(t, "example.com:"+port)
			if resp.StatusCode != 200 || br.Buffered() != 0 {
				t.Fatalf("CONNECT: %d", resp.StatusCode)
			}
			tc := tls.Client(c, &tls.Config{ServerName: tt.serverName, RootCAs: pool, InsecureSkipVerify: tt.wantErr != ""})
			err := tc.Handshake()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("handshake: %v, want %q", err, tt.wantErr)
				}
				d := tp.rec.wait(t, 1)[0]
				if d.Allowed || d.SNI != tt.serverName || !strings.Contains(d.Reason, "does not match") {
					t.Errorf("decision %+v", d)
				}
				if n := conns.Load() - before; n != 0 {
					t.Errorf("server saw %d connections", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(tc, "GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
			if got := readAll(tc); !strings.Contains(got, "secret data for example.com") {
				t.Fatalf("response %q", got)
			}
			tc.Close()
			d := tp.rec.wait(t, 1)[0]
			if !d.Allowed || d.SNI != "example.com" || d.Addr != "127.0.0.1:"+port || d.BytesUp < 200 || d.BytesDown < 200 || d.Duration <= 0 {
				t.Errorf("decision %+v", d)
			}
		})
	}
}

// Close cuts an open tunnel, records it once with its bytes, and leaves
// no goroutine behind.
func TestCloseMidTunnel(t *testing.T) {
	base := goroutines()
	up := startUpstream(t, true)
	tp := startProxy(t, env{allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"127.0.0.1"}}, redirect: up.addr()})
	var tunnels []net.Conn
	for i := 0; i < 5; i++ {
		c, br, resp := tp.connect(t, "api.provider.test:443")
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
		c.Write([]byte("pin\n")) // an opaque protocol's first line
		b := make([]byte, 4)
		if _, err := io.ReadFull(br, b); err != nil {
			t.Fatal(err)
		}
		tunnels = append(tunnels, c)
	}
	idle := tp.dialProxy(t) // a connection that never sent a request
	if got := tp.rec.all(); len(got) != 0 {
		t.Fatalf("recorded before the tunnels ended: %+v", got)
	}
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	// Close has returned: every Record call has returned too.
	recs := tp.rec.all()
	if len(recs) != 5 {
		t.Fatalf("%d decisions after Close, want 5: %+v", len(recs), recs)
	}
	for _, d := range recs {
		if !d.Allowed || d.BytesUp != 4 || d.BytesDown != 4 || d.Reason != "cut by proxy close" || d.Duration <= 0 {
			t.Errorf("decision %+v", d)
		}
	}
	for _, c := range append(tunnels, idle) {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("agent connection still open after Close: %v", err)
		}
		c.Close()
	}
	if err := <-tp.serve; err != nil {
		t.Errorf("Serve: %v", err)
	}
	tp.serve <- nil // for the cleanup
	up.l.Close()
	up.wg.Wait()
	waitGoroutines(t, base)
}

// Close waits for Record calls in progress.
func TestCloseWaitsForRecord(t *testing.T) {
	entered := make(chan struct{})
	returned := false
	tp := startProxy(t, env{tweak: func(o *Options) {
		o.Record = func(Decision) {
			close(entered)
			time.Sleep(200 * time.Millisecond)
			returned = true
		}
	}})
	c, _, resp := tp.connect(t, "evil.test:443")
	if resp.StatusCode != 403 {
		t.Fatal(resp.Status)
	}
	c.Close()
	<-entered
	tp.Close()
	if !returned {
		t.Error("Close returned while Record was running")
	}
}

func TestServeAfterClose(t *testing.T) {
	p, err := New(Options{Record: func(Decision) {}})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Serve(l); err != ErrClosed {
		t.Errorf("Serve after Close: %v", err)
	}
	if _, err := l.Accept(); err == nil {
		t.Error("listener left open")
	}
}

// A tunnel with no bytes in either direction for IdleTimeout is closed;
// one where only the upstream talks stays open.
func TestIdleTimeout(t *testing.T) {
	const idle = 200 * time.Millisecond
	talker, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { talker.Close() })
	go func() {
		for {
			c, err := talker.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for i := 0; i < 10; i++ { // 10 bytes over 5 idle periods
					time.Sleep(idle / 2)
					if _, err := c.Write([]byte{'x'}); err != nil {
						return
					}
				}
			}()
		}
	}()
	silent := startUpstream(t, false)
	tests := []struct {
		name     string
		upstream string
		want     string
	}{
		{"silent both ways", silent.addr(), ""},
		{"upstream talking", talker.Addr().String(), "xxxxxxxxxx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := startProxy(t, env{allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"127.0.0.1"}},
				redirect: tt.upstream, tweak: func(o *Options) { o.IdleTimeout = idle }})
			c, br, _ := tp.connect(t, "api.provider.test:443")
			c.Write([]byte("SSH-2.0-test\r\n")) // not TLS, to get past the first-bytes check
			start := time.Now()
			got := readAll(br)
			if got != tt.want {
				t.Errorf("agent read %q, want %q", got, tt.want)
			}
			d := tp.rec.wait(t, 1)[0]
			if tt.want == "" && (!strings.HasPrefix(d.Reason, "idle for") || time.Since(start) > 10*idle) {
				t.Errorf("decision %+v after %v", d, time.Since(start))
			}
			if tt.want != "" && d.BytesDown != int64(len(tt.want)) {
				t.Errorf("decision %+v", d)
			}
		})
	}
}

// Plain HTTP inside a tunnel could name any site behind the address in its
// Host header: refused, whatever the split, and the upstream sees nothing.
func TestConnectPlainHTTPRefused(t *testing.T) {
	for _, tt := range []struct {
		name  string
		parts []string
		ok    bool
	}{
		{"request line", []string{"GET / HTTP/1.1\r\nHost: other.example\r\n\r\n"}, false},
		{"split request line", []string{"G", "ET / HTT", "P/1.1\r\nHost: other.example\r\n\r\n"}, false},
		{"h2 preface", []string{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"}, false},
		{"lower case", []string{"get / http/1.0\n\n"}, false},
		{"no line break", []string{"GET / HTTP/1.1"}, false},
		{"ssh banner", []string{"SSH-2.0-OpenSSH_9.6\r\n"}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, true)
			tp := startProxy(t, env{allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"127.0.0.1"}},
				redirect: up.addr(), tweak: func(o *Options) { o.HelloTimeout = 300 * time.Millisecond }})
			c, _, resp := tp.connect(t, "api.provider.test:443")
			if resp.StatusCode != 200 {
				t.Fatal(resp.Status)
			}
			for _, p := range tt.parts {
				c.Write([]byte(p))
				time.Sleep(20 * time.Millisecond)
			}
			if tt.ok {
				time.Sleep(100 * time.Millisecond)
				c.Close() // an allowed tunnel is recorded when it ends
			}
			d := tp.rec.wait(t, 1)[0]
			if d.Allowed != tt.ok {
				t.Fatalf("decision %+v, want allowed=%t", d, tt.ok)
			}
			if n := up.accepts.Load(); !tt.ok && n != 0 {
				t.Errorf("the upstream saw %d connection(s)", n)
			}
		})
	}
}

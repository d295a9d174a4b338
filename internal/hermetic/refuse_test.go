package hermetic

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proctor-sandbox/proctor/internal/netpolicy"
)

// recordWorld records a few fetches, refusals among them, and replays
// them with the internet taken down.
func recordWorld(t *testing.T) (*session, *replaying) {
	t.Helper()
	s := record(t, nil)
	do(t, s.c, "GET", "https://astral.sh/uv/0.9.5/install.sh", "")
	do(t, s.c, "GET", "http://deb.example.org/debian/dists/stable/InRelease", "")
	// Refused while recording: a host off the list, plain and tunnelled.
	if got := rawPlain(t, s.addr, "GET http://other.example.net/x HTTP/1.1\r\nHost: other.example.net\r\n\r\n"); !strings.HasPrefix(got, "HTTP/1.1 403 ") {
		t.Fatalf("off the list, recording:\n%s", got)
	}
	if c, got := connect(t, s.addr, "other.example.net:443"); c != nil || !strings.Contains(got, "403") {
		t.Fatalf("tunnel off the list, recording: %s", got)
	}
	r := s.finish()
	s.w.stop()
	return s, s.replay(r)
}

// TestReplayRefuses: whatever the recording does not hold is refused and
// reported as a violation; a refusal it holds is refused again in the
// same words, and is not one.
func TestReplayRefuses(t *testing.T) {
	s, rp := recordWorld(t)
	tr, addr, pd := s.tr, rp.addr, &rp.pd
	tests := []struct {
		name      string
		do        func() string // what the client got
		want      string        // in what the client got
		method    string        // of the decision
		url       string
		violation bool
	}{
		{"unrecorded path, recorded host", func() string {
			s, _ := rawTLS(t, addr, astralHost, astralHost, tr.Bundle, "GET /uv/0.9.6/install.sh HTTP/1.1\r\nHost: astral.sh\r\nConnection: close\r\n\r\n")
			return s
		}, "HTTP/1.1 403 Forbidden", "GET", "https://astral.sh/uv/0.9.6/install.sh", true},
		{"recorded path, another method", func() string {
			s, _ := rawTLS(t, addr, astralHost, astralHost, tr.Bundle, "DELETE /uv/0.9.5/install.sh HTTP/1.1\r\nHost: astral.sh\r\nConnection: close\r\n\r\n")
			return s
		}, "HTTP/1.1 403 Forbidden", "DELETE", "https://astral.sh/uv/0.9.5/install.sh", true},
		{"recorded path, another Accept", func() string {
			s, _ := rawTLS(t, addr, astralHost, astralHost, tr.Bundle, "GET /uv/0.9.5/install.sh HTTP/1.1\r\nHost: astral.sh\r\nAccept: application/json\r\nConnection: close\r\n\r\n")
			return s
		}, "HTTP/1.1 403 Forbidden", "GET", "https://astral.sh/uv/0.9.5/install.sh", true},
		{"unrecorded host", func() string {
			_, s := connect(t, addr, "solutions.example.com:443")
			return s
		}, "403 Forbidden", "CONNECT", "solutions.example.com:443", true},
		{"recorded host, another port", func() string {
			_, s := connect(t, addr, "astral.sh:8443")
			return s
		}, "403 Forbidden", "CONNECT", "astral.sh:8443", true},
		{"recorded host by its address", func() string {
			_, s := connect(t, addr, "127.0.0.1:443")
			return s
		}, "403 Forbidden", "CONNECT", "127.0.0.1:443", true},
		{"plain http, unrecorded", func() string {
			return rawPlain(t, addr, "GET http://deb.example.org/debian/dists/sid/InRelease HTTP/1.1\r\nHost: deb.example.org\r\n\r\n")
		}, "HTTP/1.1 403 Forbidden", "GET", "http://deb.example.org/debian/dists/sid/InRelease", true},
		{"plain http to an https-only host", func() string {
			return rawPlain(t, addr, "GET http://astral.sh/uv/0.9.5/install.sh HTTP/1.1\r\nHost: astral.sh\r\n\r\n")
		}, "HTTP/1.1 403 Forbidden", "GET", "http://astral.sh/uv/0.9.5/install.sh", true},
		{"origin form to the proxy", func() string {
			return rawPlain(t, addr, "GET /debian/dists/stable/InRelease HTTP/1.1\r\nHost: deb.example.org\r\n\r\n")
		}, "HTTP/1.1 400 Bad Request", "GET", "", true},
		{"https in absolute form to the proxy", func() string {
			return rawPlain(t, addr, "GET https://astral.sh/uv/0.9.5/install.sh HTTP/1.1\r\nHost: astral.sh\r\n\r\n")
		}, "HTTP/1.1 400 Bad Request", "GET", "", true},
		{"Host of another site inside a recorded tunnel", func() string {
			s, _ := rawTLS(t, addr, astralHost, astralHost, tr.Bundle, "GET /uv/0.9.5/install.sh HTTP/1.1\r\nHost: index.example.org\r\nConnection: close\r\n\r\n")
			return s
		}, "HTTP/1.1 421 Misdirected Request", "GET", "", true},
		{"absolute URL of another site inside a tunnel", func() string {
			s, _ := rawTLS(t, addr, astralHost, astralHost, tr.Bundle, "GET https://index.example.org/x HTTP/1.1\r\nHost: astral.sh\r\nConnection: close\r\n\r\n")
			return s
		}, "HTTP/1.1 421 Misdirected Request", "GET", "", true},
		{"TLS server name of another site", func() string {
			_, err := rawTLS(t, addr, astralHost, indexHost, tr.Bundle, "")
			return fmt.Sprint(err)
		}, "internal error", "CONNECT", "astral.sh:443", true},
		{"not TLS inside a tunnel", func() string {
			c, _ := connect(t, addr, "astral.sh:443")
			io.WriteString(c, "GET /uv/0.9.5/install.sh HTTP/1.1\r\nHost: astral.sh\r\n\r\n")
			b, _ := io.ReadAll(c)
			c.Close()
			return "read " + fmt.Sprint(len(b)) + " bytes"
		}, "read ", "CONNECT", "astral.sh:443", true},
		{"off the list when recorded: refused again, no violation", func() string {
			return rawPlain(t, addr, "GET http://other.example.net/x HTTP/1.1\r\nHost: other.example.net\r\n\r\n")
		}, "HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Length: 40\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nproctor hermetic: not on the allow-list\n",
			"GET", "http://other.example.net/x", false},
		{"tunnel off the list when recorded: refused again, no violation", func() string {
			_, s := connect(t, addr, "other.example.net:443")
			return s
		}, "403 Forbidden\nproctor hermetic: not on the allow-list\n", "CONNECT", "other.example.net:443", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(pd.list())
			got := tt.do()
			if !strings.Contains(got, tt.want) {
				t.Fatalf("client got:\n%q\nwant it to hold %q", got, tt.want)
			}
			var ds []Decision
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				if ds = pd.list()[before:]; len(ds) > 0 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			var mine *Decision
			for i := range ds {
				if ds[i].Method == tt.method && ds[i].URL == tt.url && !ds[i].Served {
					mine = &ds[i]
				}
			}
			if mine == nil {
				t.Fatalf("no refusal of %s %q reported; got %+v", tt.method, tt.url, ds)
			}
			if mine.Violation != tt.violation || mine.Reason == "" {
				t.Errorf("decision %+v, want violation %v", *mine, tt.violation)
			}
		})
	}
	if rp.Violations() != len(pd.violations()) {
		t.Errorf("Violations() %d, reported %d", rp.Violations(), len(pd.violations()))
	}
}

// TestRecorderDecides: the recorder decides on the name asked for, dials
// only addresses netpolicy allows, and records each refusal; a host
// mapping is the operator's word for the name.
func TestRecorderDecides(t *testing.T) {
	w := newWorld(t)
	astral := w.hostMap[astralHost]
	tests := []struct {
		name    string
		allow   []string
		hostMap map[string]string
		names   map[string][]string // what Resolve answers
		roots   bool                // trust the test's internet
		url     string
		status  int
		reason  string // in the refusal
		dialled string // the address dialled, "" for none
	}{
		{"on the list, mapped", []string{"astral.sh"}, map[string]string{"astral.sh": astral.String()}, nil, true,
			"https://astral.sh/uv/0.9.5/install.sh", 200, "", astral.String()},
		{"not on the list", []string{"index.example.org"}, map[string]string{"astral.sh": astral.String()}, nil, true,
			"http://astral.sh/uv/0.9.5/install.sh", 403, "not on the allow-list", ""},
		{"wildcard, resolves to loopback", []string{"*.example.org"}, nil, map[string][]string{"index.example.org": {"127.0.0.1"}}, true,
			"http://index.example.org/x", 403, "loopback address 127.0.0.1", ""},
		{"wildcard, resolves to a private and a public address", []string{"*.example.org"}, nil,
			map[string][]string{"deb.example.org": {"10.1.2.3", "93.184.216.34"}}, true,
			"http://deb.example.org/debian/dists/stable/InRelease", 502, "dial", "93.184.216.34:80"},
		{"exact, mapped to the metadata address", []string{"meta.example.org"}, map[string]string{"meta.example.org": "169.254.169.254"}, nil, true,
			"http://meta.example.org/latest/meta-data/", 403, "metadata address 169.254.169.254", ""},
		{"wildcard, mapped to loopback: the operator's word", []string{"*.example.org"}, map[string]string{"deb.example.org": w.hostMap[debHost].String()}, nil, true,
			"http://deb.example.org/debian/dists/stable/InRelease", 200, "", w.hostMap[debHost].String()},
		{"mapped name: not resolved", []string{"deb.example.org"}, map[string]string{"deb.example.org": w.hostMap[debHost].String()},
			map[string][]string{"deb.example.org": {"169.254.169.254"}}, true,
			"http://deb.example.org/debian/dists/stable/InRelease", 200, "", w.hostMap[debHost].String()},
		{"IP literal not on the list", []string{"deb.example.org"}, nil, nil, true,
			"http://127.0.0.1:" + fmt.Sprint(w.hostMap[debHost].Port()) + "/debian/dists/stable/InRelease", 403, "not on the allow-list", ""},
		{"IP literal of the metadata service on the list", []string{"169.254.169.254"}, nil, nil, true,
			"http://169.254.169.254/latest/", 403, "metadata address", ""},
		{"does not resolve", []string{"deb.example.org"}, nil, nil, true,
			"http://deb.example.org/x", 502, "dns: no such host", ""},
		{"upstream certificate not trusted", []string{"astral.sh"}, map[string]string{"astral.sh": astral.String()}, nil, false,
			"https://astral.sh/uv/0.9.5/install.sh", 502, "upstream TLS", astral.String()},
		{"upstream certificate for another name", []string{"index.example.org"}, map[string]string{"index.example.org": astral.String()}, nil, true,
			"https://index.example.org/simple/tinypkg/", 502, "upstream TLS", astral.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			var rd decisions
			var mu sync.Mutex
			var dialled []string
			allow, err := netpolicy.ParseAllowList(tt.allow)
			if err != nil {
				t.Fatal(err)
			}
			var hm []string
			for k, v := range tt.hostMap {
				hm = append(hm, k+"="+v)
			}
			m, err := ParseHostMap(hm)
			if err != nil {
				t.Fatal(err)
			}
			rec, addr := newRecorder(t, st, w, &rd, func(o *RecordOptions) {
				o.Allow, o.HostMap = allow, m
				if !tt.roots {
					o.Roots = nil
				}
				o.HostAddrs = []netip.Addr{}
				o.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
					var out []netip.Addr
					for _, a := range tt.names[host] {
						out = append(out, netip.MustParseAddr(a))
					}
					if out == nil {
						return nil, fmt.Errorf("no such host %s", host)
					}
					return out, nil
				}
				o.Dial = func(ctx context.Context, network, a string) (net.Conn, error) {
					mu.Lock()
					dialled = append(dialled, a)
					mu.Unlock()
					if ap := netip.MustParseAddrPort(a); !ap.Addr().IsLoopback() {
						return nil, fmt.Errorf("test: no route to %s", a)
					}
					return (&net.Dialer{}).DialContext(ctx, network, a)
				}
			})
			tr := trustOf(t, st)
			got := do(t, client(t, addr, tr.Bundle), "GET", tt.url, "")
			if got.Status != tt.status || !strings.Contains(got.Body, tt.reason) {
				t.Errorf("client got %d %q, want %d and %q", got.Status, got.Body, tt.status, tt.reason)
			}
			mu.Lock()
			if (tt.dialled == "") != (len(dialled) == 0) || tt.dialled != "" && dialled[len(dialled)-1] != tt.dialled {
				t.Errorf("dialled %v, want %q", dialled, tt.dialled)
			}
			mu.Unlock()
			rec.Close()
			r, err := rec.Recording()
			if err != nil {
				t.Fatal(err)
			}
			ex := r.Exchanges()
			if len(ex) != 1 || ex[0].Status != tt.status || (tt.status != 200) != (ex[0].Refused != "") {
				t.Errorf("recorded %+v", ex)
			}
			for _, d := range rd.find("GET", tt.url) {
				if d.Violation || d.Served != (tt.status == 200) || (tt.status == 200 && d.Addr != tt.dialled) {
					t.Errorf("decision %+v", d)
				}
			}
		})
	}
}

// TestUpstreamRootsOnlyUpstream: the recorder trusts the operator's extra
// roots for upstreams; the client trusts only the store's CA, and a
// client that trusts only the internet's roots fails the handshake.
func TestUpstreamRootsOnlyUpstream(t *testing.T) {
	s := record(t, nil)
	pool := x509.NewCertPool()
	pool.AddCert(s.w.ca.cert)
	c, _ := connect(t, s.addr, "astral.sh:443")
	defer c.Close()
	err := tls.Client(c, &tls.Config{ServerName: astralHost, RootCAs: pool}).Handshake()
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("handshake trusting only the upstream's roots: %v", err)
	}
}

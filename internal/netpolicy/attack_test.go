package netpolicy

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

// Every CONNECT here must be refused before anything is dialled: the
// test dialer sends whatever it is asked for to a live upstream, so a
// policy hole shows up as a connection there.
func TestConnectRefused(t *testing.T) {
	up := startUpstream(t, false)
	public := []string{"93.184.216.34"}
	tests := []struct {
		name   string
		allow  []string
		names  map[string][]string
		target string
		status int
		reason string
	}{
		{name: "host not listed", allow: []string{"api.provider.test"}, names: map[string][]string{"evil.test": public},
			target: "evil.test:443", status: 403, reason: "not on the allow-list"},
		{name: "port not listed", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": public},
			target: "api.provider.test:22", status: 403, reason: "not on the allow-list"},
		{name: "below an exact name", allow: []string{"api.provider.test"}, names: map[string][]string{"x.api.provider.test": public},
			target: "x.api.provider.test:443", status: 403, reason: "not on the allow-list"},
		{name: "wildcard base itself", allow: []string{"*.provider.test"}, names: map[string][]string{"provider.test": public},
			target: "provider.test:443", status: 403, reason: "not on the allow-list"},
		{name: "suffix trick", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test.evil.test": public},
			target: "api.provider.test.evil.test:443", status: 403, reason: "not on the allow-list"},
		{name: "wildcard to loopback", allow: []string{"*.provider.test"}, names: map[string][]string{"api.provider.test": {"127.0.0.1"}},
			target: "api.provider.test:443", status: 403, reason: "resolves to a loopback address 127.0.0.1"},
		{name: "wildcard to mapped loopback", allow: []string{"*.provider.test"}, names: map[string][]string{"api.provider.test": {"::ffff:127.0.0.1"}},
			target: "api.provider.test:443", status: 403, reason: "loopback address 127.0.0.1"},
		{name: "wildcard to private", allow: []string{"*.provider.test"}, names: map[string][]string{"api.provider.test": {"10.0.0.1", "192.168.1.1", "fd00::1"}},
			target: "api.provider.test:443", status: 403, reason: "resolves to a private address 10.0.0.1"},
		{name: "wildcard to CGNAT", allow: []string{"*.provider.test"}, names: map[string][]string{"api.provider.test": {"100.64.1.1"}},
			target: "api.provider.test:443", status: 403, reason: "private address 100.64.1.1"},
		{name: "wildcard to host address", allow: []string{"*.provider.test"}, names: map[string][]string{"api.provider.test": {"203.0.113.5"}},
			target: "api.provider.test:443", status: 403, reason: "resolves to a host address 203.0.113.5"},
		{name: "exact to metadata", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"169.254.169.254"}},
			target: "api.provider.test:443", status: 403, reason: "resolves to a metadata address 169.254.169.254"},
		{name: "exact to mapped metadata", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"::ffff:169.254.169.254"}},
			target: "api.provider.test:443", status: 403, reason: "metadata address 169.254.169.254"},
		{name: "exact to NAT64 metadata", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"64:ff9b::a9fe:a9fe"}},
			target: "api.provider.test:443", status: 403, reason: "metadata address 169.254.169.254"},
		{name: "exact to AWS IPv6 metadata", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"fd00:ec2::254"}},
			target: "api.provider.test:443", status: 403, reason: "metadata address fd00:ec2::254"},
		{name: "exact to link-local", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"fe80::1", "169.254.10.10"}},
			target: "api.provider.test:443", status: 403, reason: "link-local address fe80::1"},
		{name: "exact to unspecified", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"0.0.0.0"}},
			target: "api.provider.test:443", status: 403, reason: "resolves to an unspecified address 0.0.0.0"},
		{name: "exact to multicast", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"224.0.0.251"}},
			target: "api.provider.test:443", status: 403, reason: "multicast"},
		{name: "exact to broadcast", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"255.255.255.255"}},
			target: "api.provider.test:443", status: 403, reason: "broadcast"},
		{name: "dns failure", allow: []string{"api.provider.test"}, names: map[string][]string{},
			target: "api.provider.test:443", status: 502, reason: "dns: no such host api.provider.test"},
		{name: "dns no addresses", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {}},
			target: "api.provider.test:443", status: 502, reason: "dns: no addresses"},
		{name: "IP literal not listed", allow: []string{"api.provider.test"},
			target: "127.0.0.1:443", status: 403, reason: "IP literal not allowed"},
		{name: "mapped IP literal not listed", allow: []string{"api.provider.test"},
			target: "[::ffff:127.0.0.1]:443", status: 403, reason: "IP literal not allowed"},
		{name: "IPv6 literal not listed", allow: []string{"api.provider.test"},
			target: "[::1]:443", status: 403, reason: "IP literal not allowed"},
		{name: "metadata literal on the list", allow: []string{"169.254.169.254"},
			target: "169.254.169.254:80", status: 403, reason: "metadata address 169.254.169.254"},
		{name: "decimal IP", allow: []string{"127.0.0.1"}, target: "2130706433:443", status: 403, reason: "not a dotted quad"},
		{name: "hex IP", allow: []string{"127.0.0.1"}, target: "0x7f.1:443", status: 403, reason: "not a dotted quad"},
		{name: "hex dword", allow: []string{"127.0.0.1"}, target: "0x7f000001:443", status: 403, reason: "not a dotted quad"},
		{name: "short IP", allow: []string{"127.0.0.1"}, target: "127.1:443", status: 403, reason: "not a dotted quad"},
		{name: "octal IP", allow: []string{"127.0.0.1"}, target: "0177.0.0.1:443", status: 403, reason: "not a dotted quad"},
		{name: "numeric TLD", allow: []string{"127.0.0.1"}, target: "localhost.0:443", status: 403, reason: "not a dotted quad"},
		{name: "no port", allow: []string{"api.provider.test"}, target: "api.provider.test", status: 400, reason: "missing port"},
		{name: "port zero", allow: []string{"api.provider.test"}, target: "api.provider.test:0", status: 400, reason: "out of range"},
		{name: "user info", allow: []string{"api.provider.test"}, target: "user@api.provider.test:443", status: 400, reason: "user info"},
		{name: "URL", allow: []string{"api.provider.test"}, target: "http://api.provider.test:443", status: 400, reason: "bad request"},
		{name: "path", allow: []string{"api.provider.test"}, target: "api.provider.test:443/x", status: 400, reason: "bad request"},
		{name: "non-ASCII", allow: []string{"api.provider.test"}, target: "\u0430pi.provider.test:443", status: 400, reason: "punycode"},
		{name: "Kelvin sign", allow: []string{"kapi.provider.test"}, target: "\u212aapi.provider.test:443", status: 400, reason: "punycode"},
		{name: "bare IPv6", allow: []string{"::1"}, target: "::1:443", status: 400, reason: "bad request"},
		{name: "zone", allow: []string{"api.provider.test"}, target: "[fe80::1%25eth0]:443", status: 400, reason: "bad request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := up.accepts.Load()
			tp := startProxy(t, env{allow: tt.allow, names: tt.names, redirect: up.addr(), hostAddrs: []string{"203.0.113.5"}})
			c, br, resp := tp.connect(t, tt.target)
			body := readAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.reason) {
				t.Errorf("answer %d %q, want %d with %q", resp.StatusCode, body, tt.status, tt.reason)
			}
			if rest, _ := io.ReadAll(br); len(rest) != 0 {
				t.Errorf("proxy sent more after the denial: %q", rest)
			}
			c.Close()
			recs := tp.rec.wait(t, 1)
			d := recs[0]
			if d.Allowed || (d.Method != "CONNECT" && d.Method != "") || !strings.Contains(d.Reason, tt.reason) || d.Addr != "" || d.BytesUp != 0 {
				t.Errorf("decision %+v, want denied with %q", d, tt.reason)
			}
			if n := tp.dialled.Load(); n != 0 {
				t.Errorf("proxy dialled %d times: %v", n, tp.dials())
			}
			if strings.ContainsAny(tt.target, "0123456789") && strings.HasPrefix(tt.reason, "not a dotted") && tp.lookups.Load() != 0 {
				t.Errorf("a numeric host was resolved as a name")
			}
			if n := up.accepts.Load() - before; n != 0 {
				t.Errorf("upstream saw %d connections", n)
			}
		})
	}
}

// Allowed tunnels carry plain bytes (not TLS) to the upstream, which
// echoes them, and dial exactly the permitted address.
func TestConnectAllowed(t *testing.T) {
	up := startUpstream(t, true)
	tests := []struct {
		name   string
		allow  []string
		names  map[string][]string
		target string
		dialed string // the address the proxy must dial
		rule   string
	}{
		{name: "exact name to loopback", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"127.0.0.1"}},
			target: "api.provider.test:443", dialed: "127.0.0.1:443", rule: "api.provider.test"},
		{name: "resolver gives mapped IPv4", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"::ffff:127.0.0.1"}},
			target: "api.provider.test:443", dialed: "127.0.0.1:443", rule: "api.provider.test"},
		{name: "case and trailing dot", allow: []string{"api.provider.test"}, names: map[string][]string{"api.provider.test": {"127.0.0.1"}},
			target: "API.Provider.TEST.:443", dialed: "127.0.0.1:443", rule: "api.provider.test"},
		{name: "exact name to private", allow: []string{"db.internal:5432"}, names: map[string][]string{"db.internal": {"10.9.8.7"}},
			target: "db.internal:5432", dialed: "10.9.8.7:5432", rule: "db.internal:5432"},
		{name: "wildcard to public", allow: []string{"*.provider.test"}, names: map[string][]string{"api.provider.test": {"93.184.216.34"}},
			target: "api.provider.test:443", dialed: "93.184.216.34:443", rule: "*.provider.test"},
		{name: "wildcard skips private", allow: []string{"*.provider.test"}, names: map[string][]string{"api.provider.test": {"10.0.0.1", "127.0.0.1", "169.254.169.254", "2606:2800:220:1::1"}},
			target: "api.provider.test:80", dialed: "[2606:2800:220:1::1]:80", rule: "*.provider.test"},
		{name: "IP literal on the list", allow: []string{"127.0.0.1:8080"},
			target: "127.0.0.1:8080", dialed: "127.0.0.1:8080", rule: "127.0.0.1:8080"},
		{name: "mapped IP literal", allow: []string{"127.0.0.1"},
			target: "[::ffff:127.0.0.1]:443", dialed: "127.0.0.1:443", rule: "127.0.0.1"},
		{name: "IPv6 literal", allow: []string{"[::1]:443"},
			target: "[::1]:443", dialed: "[::1]:443", rule: "[::1]:443"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := startProxy(t, env{allow: tt.allow, names: tt.names, redirect: up.addr(), hostAddrs: []string{"203.0.113.5"}})
			c, br, resp := tp.connect(t, tt.target)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, readAll(resp.Body))
			}
			msg := []byte("SSH-2.0-OpenSSH_9.6\r\nnot TLS at all\n")
			if _, err := c.Write(msg); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, len(msg))
			if _, err := io.ReadFull(br, got); err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("echo %q, %v", got, err)
			}
			c.Close()
			d := tp.rec.wait(t, 1)[0]
			if !d.Allowed || d.Addr != tt.dialed || d.Rule != tt.rule || d.BytesUp != int64(len(msg)) || d.BytesDown != int64(len(msg)) || d.SNI != "" {
				t.Errorf("decision %+v, want allowed via %s to %s with %d bytes each way", d, tt.rule, tt.dialed, len(msg))
			}
			if ds := tp.dials(); len(ds) != 1 || ds[0] != tt.dialed {
				t.Errorf("dialled %v, want only %s", ds, tt.dialed)
			}
			if n := tp.lookups.Load(); n > 1 {
				t.Errorf("%d lookups for one request", n)
			}
		})
	}
}

// The SNI check runs before the proxy dials: a refused ClientHello never
// reaches the upstream, and the agent gets a TLS alert.
func TestConnectSNI(t *testing.T) {
	good := buildHello("api.provider.test")
	tests := []struct {
		name   string
		target string
		send   func(t *testing.T, w io.Writer)
		sni    string
		reason string // "" for allowed
	}{
		{name: "matching SNI", target: "api.provider.test:443", send: writeAll(good), sni: "api.provider.test"},
		{name: "SNI in other case with dot", target: "api.provider.test:443", send: writeAll(buildHello("API.provider.test.")), sni: "API.provider.test."},
		{name: "evil SNI", target: "api.provider.test:443", send: writeAll(buildHello("evil.test")), sni: "evil.test",
			reason: `SNI "evil.test" does not match CONNECT host "api.provider.test"`},
		{name: "SNI of a sub-name", target: "api.provider.test:443", send: writeAll(buildHello("x.api.provider.test")), reason: "does not match"},
		{name: "IP SNI for a name", target: "api.provider.test:443", send: writeAll(buildHello("127.0.0.1")), reason: "does not match"},
		{name: "no SNI", target: "api.provider.test:443", send: writeAll(buildHello("")), reason: `no SNI in ClientHello for CONNECT host "api.provider.test"`},
		{name: "ECH", target: "api.provider.test:443", send: writeAll(buildHello("api.provider.test", ext{extECH, []byte{0, 1}})), reason: "ECH"},
		{name: "two SNIs", target: "api.provider.test:443", send: writeAll(records(helloMsg(sniExt("api.provider.test", "evil.test")), 2000)), reason: "more than one host_name"},
		{name: "NUL in SNI", target: "api.provider.test:443", send: writeAll(buildHello("api.provider.test\x00.evil.test")), reason: "does not match"},
		{name: "split records and reads", target: "api.provider.test:443", send: trickle(records(helloMsg(sniExt("api.provider.test")), 3), 7), sni: "api.provider.test"},
		{name: "IP target without SNI", target: "127.0.0.1:443", send: writeAll(buildHello(""))},
		{name: "IP target with its SNI", target: "127.0.0.1:443", send: writeAll(buildHello("127.0.0.1")), sni: "127.0.0.1"},
		{name: "IP target with a name SNI", target: "127.0.0.1:443", send: writeAll(buildHello("evil.test")), reason: "does not match"},
		{name: "garbage after record type", target: "api.provider.test:443", send: writeAll([]byte{0x16, 9, 9, 9, 9, 9, 9}), reason: "ClientHello: bad record version"},
		{name: "incomplete and silent", target: "api.provider.test:443", send: writeAll(good[:40]), reason: "ClientHello incomplete: nothing within"},
		{name: "incomplete and closed", target: "api.provider.test:443", send: closeAfter(good[:40]), reason: "ClientHello incomplete: connection closed"},
		{name: "silent", target: "api.provider.test:443", send: writeAll(nil), reason: "no data from the agent: nothing within"},
		{name: "closed at once", target: "api.provider.test:443", send: closeAfter(nil), reason: "before any data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := startUpstream(t, false)
			tp := startProxy(t, env{
				allow:    []string{"api.provider.test", "127.0.0.1"},
				names:    map[string][]string{"api.provider.test": {"127.0.0.1"}, "evil.test": {"127.0.0.1"}},
				redirect: up.addr(),
				tweak:    func(o *Options) { o.HelloTimeout = 300 * time.Millisecond },
			})
			c, br, resp := tp.connect(t, tt.target)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			tt.send(t, c)
			if tt.reason != "" {
				rest, _ := io.ReadAll(br)
				if len(rest) > 0 && !bytes.Equal(rest, alertAccessDenied) {
					t.Errorf("agent got %x, want nothing or an access_denied alert", rest)
				}
				d := tp.rec.wait(t, 1)[0]
				if d.Allowed || !strings.Contains(d.Reason, tt.reason) || d.BytesUp != 0 || d.Addr != "" {
					t.Errorf("decision %+v, want denied with %q", d, tt.reason)
				}
				if n := up.accepts.Load(); n != 0 || tp.dialled.Load() != 0 {
					t.Errorf("upstream saw %d connections after a refused ClientHello", n)
				}
				return
			}
			if cw, ok := c.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			_, _ = io.ReadAll(br)
			d := tp.rec.wait(t, 1)[0]
			if !d.Allowed || d.SNI != tt.sni || d.Reason != "" {
				t.Errorf("decision %+v, want allowed with SNI %q", d, tt.sni)
			}
			got := up.received()
			if len(got) != 1 || int64(len(got[0])) != d.BytesUp || got[0][0] != recordTypeHandshake {
				t.Errorf("upstream got %d connections, first %d bytes; decision says %d", len(got), len(got[0]), d.BytesUp)
			}
		})
	}
}

func writeAll(b []byte) func(*testing.T, io.Writer) {
	return func(t *testing.T, w io.Writer) {
		if _, err := w.Write(b); err != nil {
			t.Fatal(err)
		}
	}
}

// closeAfter writes b and then half-closes the connection.
func closeAfter(b []byte) func(*testing.T, io.Writer) {
	return func(t *testing.T, w io.Writer) {
		writeAll(b)(t, w)
		if cw, ok := w.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
	}
}

// trickle writes b in pieces of n bytes with pauses, so that the proxy
// sees many short reads.
func trickle(b []byte, n int) func(*testing.T, io.Writer) {
	return func(t *testing.T, w io.Writer) {
		for i := 0; len(b) > 0; i++ {
			k := min(n, len(b))
			writeAll(b[:k])(t, w)
			b = b[k:]
			if i%10 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}
}

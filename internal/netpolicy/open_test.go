package netpolicy

import (
	"io"
	"net/netip"
	"strings"
	"testing"
)

// Open egress (Options.Open) lets any public name or address through on
// any port, records each as the rule "*", and still refuses the metadata,
// loopback, private and host addresses, whatever the name.
func TestOpenEgress(t *testing.T) {
	up := startUpstream(t, true)
	names := map[string][]string{
		"pypi.example":     {"93.184.216.34"},
		"inside.example":   {"10.1.2.3"},
		"local.example":    {"127.0.0.1"},
		"metadata.example": {"169.254.169.254"},
		"myself.example":   {"203.0.113.5"},
		"mixed.example":    {"10.0.0.1", "93.184.216.35"},
	}
	open := func(o *Options) { o.Open = true }
	for _, c := range []struct {
		target, dialed string
		allowed        bool
	}{
		{"pypi.example:443", "93.184.216.34:443", true},
		{"pypi.example:8443", "93.184.216.34:8443", true}, // any port
		{"93.184.216.34:22", "93.184.216.34:22", true},    // a public IP literal
		{"mixed.example:443", "93.184.216.35:443", true},  // the private address skipped
		{"inside.example:443", "", false},
		{"local.example:443", "", false},
		{"metadata.example:80", "", false},
		{"myself.example:443", "", false},
		{"169.254.169.254:80", "", false},
		{"10.0.0.1:443", "", false},
		{"127.0.0.1:3128", "", false},
	} {
		t.Run(c.target, func(t *testing.T) {
			tp := startProxy(t, env{names: names, redirect: up.addr(), hostAddrs: []string{"203.0.113.5"}, tweak: open})
			conn, br, resp := tp.connect(t, c.target)
			if resp.StatusCode == 200 {
				// The proxy dials once the agent's first bytes are in.
				msg := []byte("SSH-2.0-OpenSSH_9.6\r\n")
				if _, err := conn.Write(msg); err != nil {
					t.Fatal(err)
				}
				if _, err := io.ReadFull(br, make([]byte, len(msg))); err != nil {
					t.Fatalf("echo: %v", err)
				}
			}
			conn.Close()
			d := tp.rec.wait(t, 1)[0]
			if c.allowed != (resp.StatusCode == 200) || d.Allowed != c.allowed {
				t.Fatalf("status %d, decision %+v; want allowed %v", resp.StatusCode, d, c.allowed)
			}
			if c.allowed && (d.Rule != "*" || d.Addr != c.dialed) {
				t.Errorf("decision %+v, want rule * to %s", d, c.dialed)
			}
			if !c.allowed && len(tp.dials()) != 0 {
				t.Errorf("dialled %v for a refused request", tp.dials())
			}
		})
	}
	// Without Open the same public name is refused: the list is empty.
	tp := startProxy(t, env{names: names, redirect: up.addr()})
	conn, _, resp := tp.connect(t, "pypi.example:443")
	conn.Close()
	if resp.StatusCode == 200 {
		t.Errorf("an empty allow-list let pypi.example through")
	}
}

// A mapped name is decided on its name, never looked up, and dialled at
// the operator's address, loopback included; a name the policy refuses is
// refused whatever it maps to.
func TestHostMap(t *testing.T) {
	up := startUpstream(t, true)
	upAddr := netip.MustParseAddrPort(up.addr())
	hm, err := ParseHostMap([]string{"Astral.Example.=" + up.addr(), "other.example=127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if hm["astral.example"] != upAddr || hm["other.example"].Port() != 0 {
		t.Fatalf("ParseHostMap: %v", hm)
	}
	for _, c := range []struct {
		name    string
		allow   []string
		open    bool
		target  string
		allowed bool
	}{
		{"open egress to a mapped name on loopback", nil, true, "astral.example:443", true},
		{"an allow-list rule for a mapped name", []string{"astral.example"}, false, "astral.example:443", true},
		{"a mapped name off the allow-list", []string{"pypi.example"}, false, "astral.example:443", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tp := startProxy(t, env{allow: c.allow, tweak: func(o *Options) { o.Open, o.HostMap = c.open, hm }})
			conn, br, resp := tp.connect(t, c.target)
			if c.allowed != (resp.StatusCode == 200) {
				t.Fatalf("status %d, want allowed %v", resp.StatusCode, c.allowed)
			}
			if c.allowed {
				msg := []byte("SSH-2.0-OpenSSH_9.6\r\n")
				conn.Write(msg)
				if _, err := io.ReadFull(br, make([]byte, len(msg))); err != nil {
					t.Fatalf("echo: %v", err)
				}
			}
			conn.Close()
			d := tp.rec.wait(t, 1)[0]
			if c.allowed && (d.Addr != up.addr() || d.Host != "astral.example") {
				t.Errorf("decision %+v, want astral.example dialled at %s", d, up.addr())
			}
			if tp.lookups.Load() != 0 {
				t.Errorf("a mapped name was looked up")
			}
		})
	}
	for _, bad := range []string{"noequals", "=1.2.3.4", "x.example=not-an-ip", "x.example=1.2.3.4:0", "x.example=1.2.3.4:99999", "a.example=1.2.3.4,a.example=5.6.7.8"} {
		if _, err := ParseHostMap(strings.Split(bad, ",")); err == nil {
			t.Errorf("ParseHostMap(%q) accepted", bad)
		}
	}
}

package netpolicy

import (
	"bufio"
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

func TestAddrRefusal(t *testing.T) {
	c := addrCheck{host: map[netip.Addr]bool{netip.MustParseAddr("203.0.113.5"): true}}
	// The exported check, as another proxy (internal/hermetic) uses it,
	// must decide exactly as the proxy's own.
	pol, err := NewAddrPolicy([]netip.Addr{netip.MustParseAddr("::ffff:203.0.113.5")})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		addr     string
		exact    string // refusal under an exact rule; "" for allowed
		wildcard string // refusal under a wildcard rule; "" for allowed
	}{
		{"93.184.216.34", "", ""},
		{"2606:2800:220:1::1", "", ""},
		{"169.254.169.254", "metadata", "metadata"},
		{"::ffff:169.254.169.254", "metadata", "metadata"},
		{"fd00:ec2::254", "metadata", "metadata"},
		{"100.100.100.200", "metadata", "metadata"},
		{"169.254.1.1", "link-local", "link-local"},
		{"fe80::1", "link-local", "link-local"},
		{"0.0.0.0", "unspecified", "unspecified"},
		{"0.1.2.3", "unspecified", "unspecified"},
		{"::", "unspecified", "unspecified"},
		{"::ffff:0.0.0.0", "unspecified", "unspecified"},
		{"224.0.0.1", "multicast", "multicast"},
		{"ff02::1", "multicast", "multicast"},
		{"255.255.255.255", "broadcast", "broadcast"},
		{"240.0.0.1", "reserved", "reserved"},
		{"::127.0.0.1", "IPv4-compatible", "IPv4-compatible"},
		{"64:ff9b::a9fe:a9fe", "metadata address 169.254.169.254 (embedded in 64:ff9b::a9fe:a9fe)", "metadata"},
		{"64:ff9b::7f00:1", "", "loopback address 127.0.0.1 (embedded"},
		{"64:ff9b::5db8:d822", "", ""},
		{"2002:a9fe:a9fe::1", "metadata", "metadata"},
		{"2002:0a00:0001::1", "", "private address 10.0.0.1"},
		{"127.0.0.1", "", "loopback address 127.0.0.1"},
		{"127.8.9.10", "", "loopback"},
		{"::1", "", "loopback"},
		{"::ffff:127.0.0.1", "", "loopback address 127.0.0.1 (as ::ffff:127.0.0.1)"},
		{"10.0.0.1", "", "private address 10.0.0.1"},
		{"172.16.0.1", "", "private"},
		{"172.31.255.255", "", "private"},
		{"172.32.0.1", "", ""},
		{"192.168.1.1", "", "private"},
		{"100.64.0.1", "", "private"},
		{"100.127.255.255", "", "private"},
		{"fd12::1", "", "private"},
		{"fc00::1", "", "private"},
		{"fec0::1", "", "private"},
		{"64:ff9b:1::a00:1", "", "private"},
		{"198.18.0.1", "", "private"},
		{"192.0.0.192", "", "private"},
		{"::ffff:10.0.0.1", "", "private address 10.0.0.1"},
		{"203.0.113.5", "", "host address 203.0.113.5"},
		{"::ffff:203.0.113.5", "", "host address"},
		{"fe80::1%eth0", "zoned", "zoned"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			a := netip.MustParseAddr(tt.addr)
			for _, w := range []struct {
				wildcard bool
				want     string
			}{{false, tt.exact}, {true, tt.wildcard}} {
				got := c.refusal(a, w.wildcard)
				if (got == "") != (w.want == "") || !strings.Contains(got, w.want) {
					t.Errorf("refusal(%s, wildcard %v) = %q, want %q", a, w.wildcard, got, w.want)
				}
				if exp := pol.Refusal(a, w.wildcard); exp != got {
					t.Errorf("AddrPolicy.Refusal(%s, wildcard %v) = %q, the proxy's %q", a, w.wildcard, exp, got)
				}
			}
		})
	}
}

func TestAddrPolicyDefaults(t *testing.T) {
	// The zero value refuses what is always refused and knows no host
	// address; nil host addresses are the host's interfaces, so the
	// host's loopback is one of them.
	var zero AddrPolicy
	if r := zero.Refusal(netip.MustParseAddr("169.254.169.254"), false); !strings.Contains(r, "metadata") {
		t.Errorf("zero AddrPolicy: metadata address allowed (%q)", r)
	}
	p, err := NewAddrPolicy(nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := p.Refusal(netip.MustParseAddr("127.0.0.1"), true); r == "" {
		t.Error("wildcard rule: loopback allowed")
	}
	if r := p.Refusal(netip.MustParseAddr("127.0.0.1"), false); r != "" {
		t.Errorf("exact rule: loopback refused (%q)", r)
	}
}

func TestParseHostExported(t *testing.T) {
	tests := []struct {
		in, want string
		ip       bool
	}{
		{"Astral.SH.", "astral.sh", false},
		{"10.1.2.3", "10.1.2.3", true},
		{"[2001:DB8::1]", "[2001:db8::1]", true},
		{"[::ffff:127.0.0.1]", "127.0.0.1", true},
		{"2130706433", "", false},
		{"127.1", "", false},
		{"0x7f.1", "", false},
		{"bad host", "", false},
		{"2001:db8::1", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ip, err := ParseHost(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParseHost(%q) = %q, want an error", tt.in, got)
				}
				return
			}
			if err != nil || got != tt.want || ip.IsValid() != tt.ip {
				t.Fatalf("ParseHost(%q) = %q, %v, %v; want %q (IP %v)", tt.in, got, ip, err, tt.want, tt.ip)
			}
		})
	}
}

// TestExportedHelpers: Clean and ReadResponse, as internal/hermetic uses
// them, are the proxy's own.
func TestExportedHelpers(t *testing.T) {
	for _, s := range []string{"plain", "tab\tnew\nline", "ünïcode", strings.Repeat("x", 1000)} {
		if Clean(s) != clean(s) || len(Clean(s)) > maxReason+3 {
			t.Errorf("Clean(%.20q) = %.20q", s, Clean(s))
		}
	}
	in := "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	resp, err := ReadResponse(bufio.NewReader(strings.NewReader(in)), &http.Request{Method: "GET"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("ReadResponse: %v, %v", resp, err)
	}
	up := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n"
	if _, err := ReadResponse(bufio.NewReader(strings.NewReader(up)), &http.Request{Method: "GET"}); err == nil {
		t.Error("ReadResponse took a 101")
	}
}

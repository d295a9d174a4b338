package netpolicy

import (
	"net/netip"
	"strings"
	"testing"
)

func TestAddrRefusal(t *testing.T) {
	c := addrCheck{host: map[netip.Addr]bool{netip.MustParseAddr("203.0.113.5"): true}}
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
			}
		})
	}
}

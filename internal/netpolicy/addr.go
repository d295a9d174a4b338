package netpolicy

import (
	"fmt"
	"net"
	"net/netip"
)

// Address ranges the proxy refuses (see the package documentation).
var (
	// metadataAddrs are cloud instance metadata services: AWS, GCP and
	// Azure (169.254.169.254), AWS over IPv6 (fd00:ec2::254), Alibaba
	// Cloud (100.100.100.200). Always refused.
	metadataAddrs = []netip.Addr{
		netip.MustParseAddr("169.254.169.254"),
		netip.MustParseAddr("fd00:ec2::254"),
		netip.MustParseAddr("100.100.100.200"),
	}

	// Always refused, whatever rule matched.
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")      // "this network"; 0.0.0.0 reaches the local host on Linux
	reserved4   = netip.MustParsePrefix("240.0.0.0/4")    // reserved, includes 255.255.255.255
	v4Compat    = netip.MustParsePrefix("::/96")          // deprecated IPv4-compatible IPv6 (:: and ::1 are checked first)
	nat64       = netip.MustParsePrefix("64:ff9b::/96")   // NAT64 well-known prefix: the last 32 bits are an IPv4 address
	nat64Local  = netip.MustParsePrefix("64:ff9b:1::/48") // NAT64 local-use prefix, treated as private
	sixToFour   = netip.MustParsePrefix("2002::/16")      // 6to4: bits 16-47 are an IPv4 address
	siteLocal   = netip.MustParsePrefix("fec0::/10")      // deprecated site-local, treated as private
	cgnat       = netip.MustParsePrefix("100.64.0.0/10")  // carrier-grade NAT, treated as private
	broadcast   = netip.MustParseAddr("255.255.255.255")  // limited broadcast
	benchmark   = netip.MustParsePrefix("198.18.0.0/15")  // benchmarking; fake-IP DNS proxies hand these out
	ietfProto   = netip.MustParsePrefix("192.0.0.0/24")   // IETF protocol assignments (includes 192.0.0.192, OCI metadata)
)

// addrCheck decides about the addresses one request may be dialled to.
type addrCheck struct {
	host map[netip.Addr]bool // the host's own addresses, unmapped, no zone
}

func newAddrCheck(hostAddrs []netip.Addr) addrCheck {
	c := addrCheck{host: make(map[netip.Addr]bool)}
	for _, a := range hostAddrs {
		c.host[a.Unmap().WithZone("")] = true
	}
	return c
}

// interfaceAddrs returns the host's own addresses, as Options.HostAddrs
// defaults to.
func interfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("netpolicy: listing the host's addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, ip)
			}
		}
	}
	return out, nil
}

// AddrPolicy is the proxy's check of the addresses a request may be
// dialled to (steps 3 and 4 of the package documentation), for another
// proxy that decides as this one does. It is an immutable value, safe
// for concurrent use.
type AddrPolicy struct{ c addrCheck }

// NewAddrPolicy returns the check with hostAddrs as the host's own
// addresses (refused to wildcard rules); nil means the addresses of
// net.InterfaceAddrs, as for Options.HostAddrs.
func NewAddrPolicy(hostAddrs []netip.Addr) (AddrPolicy, error) {
	if hostAddrs == nil {
		var err error
		if hostAddrs, err = interfaceAddrs(); err != nil {
			return AddrPolicy{}, err
		}
	}
	return AddrPolicy{c: newAddrCheck(hostAddrs)}, nil
}

// Refusal says why a may not be dialled for a request allowed by a
// wildcard rule (wildcard true) or by an exact name or IP-literal rule
// (false), as a noun phrase ("metadata address 169.254.169.254"); ""
// when it may. Metadata, link-local, unspecified, multicast, broadcast
// and reserved addresses are refused whatever the rule; loopback,
// private and host addresses only to a wildcard rule.
func (p AddrPolicy) Refusal(a netip.Addr, wildcard bool) string {
	return p.c.refusal(a, wildcard) // a zero AddrPolicy knows no host address
}

// refusal says why a may not be dialled for a request allowed by a
// wildcard rule (wildcard true) or by an exact name or IP-literal rule
// (wildcard false), or returns "" when it may. The text is a noun
// phrase, "private address 10.0.0.1", which the caller places in a
// sentence.
func (c addrCheck) refusal(a netip.Addr, wildcard bool) string {
	if a.Zone() != "" {
		return "zoned address " + a.String()
	}
	orig := a
	a = a.Unmap()
	suffix := " " + a.String()
	if orig != a {
		suffix = " " + a.String() + " (as " + orig.String() + ")"
	}
	for _, m := range metadataAddrs {
		if a == m {
			return "metadata address" + suffix
		}
	}
	switch {
	case !a.IsValid():
		return "invalid address"
	case a.IsUnspecified() || thisNetwork.Contains(a):
		return "unspecified address" + suffix
	case a.IsLinkLocalUnicast():
		return "link-local address" + suffix
	case a.IsMulticast():
		return "multicast address" + suffix
	case a == broadcast:
		return "broadcast address" + suffix
	case reserved4.Contains(a):
		return "reserved address" + suffix
	case a.Is6() && !a.IsLoopback() && v4Compat.Contains(a):
		return "IPv4-compatible address" + suffix
	}
	if inner, ok := embeddedIPv4(a); ok {
		if r := c.refusal(inner, wildcard); r != "" {
			return r + " (embedded in " + a.String() + ")"
		}
	}
	if !wildcard {
		return ""
	}
	switch {
	case a.IsLoopback():
		return "loopback address" + suffix
	case a.IsPrivate() || cgnat.Contains(a) || siteLocal.Contains(a) || nat64Local.Contains(a) ||
		benchmark.Contains(a) || ietfProto.Contains(a):
		return "private address" + suffix
	case c.host[a]:
		return "host address" + suffix
	}
	return ""
}

// embeddedIPv4 returns the IPv4 address inside a NAT64 or 6to4 address.
func embeddedIPv4(a netip.Addr) (netip.Addr, bool) {
	b := a.As16()
	switch {
	case !a.Is6():
		return netip.Addr{}, false
	case nat64.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// article returns s preceded by "a" or "an".
func article(s string) string {
	if s != "" && (s[0] == 'a' || s[0] == 'e' || s[0] == 'i' || s[0] == 'o' || s[0] == 'u' || s[0] == 'I') {
		return "an " + s
	}
	return "a " + s
}

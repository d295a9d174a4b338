package netpolicy

import (
	"fmt"
	"net/netip"
	"strings"
)

// ParseHostMap reads host mappings written NAME=ADDR[:PORT] (an IPv6
// address in brackets: NAME=[::1]:8443), as curl --resolve takes them, for
// Options.HostMap. A name appears once.
func ParseHostMap(entries []string) (map[string]netip.AddrPort, error) {
	m := map[string]netip.AddrPort{}
	for _, e := range entries {
		name, addr, ok := strings.Cut(e, "=")
		if !ok {
			return nil, fmt.Errorf("host map %q: want NAME=ADDR[:PORT]", e)
		}
		n, err := parseName(strings.TrimSuffix(strings.ToLower(name), "."))
		if err != nil {
			return nil, fmt.Errorf("host map %q: name: %w", e, err)
		}
		var ap netip.AddrPort
		if a, err := netip.ParseAddr(strings.Trim(addr, "[]")); err == nil && !strings.Contains(addr, "]:") {
			ap = netip.AddrPortFrom(a.Unmap(), 0)
		} else if ap, err = netip.ParseAddrPort(addr); err != nil {
			return nil, fmt.Errorf("host map %q: address: want ADDR or ADDR:PORT", e)
		} else if ap.Port() == 0 {
			return nil, fmt.Errorf("host map %q: port 0", e)
		}
		if ap.Addr().Zone() != "" {
			return nil, fmt.Errorf("host map %q: a zoned address", e)
		}
		if _, dup := m[n]; dup {
			return nil, fmt.Errorf("host map %q: %s is mapped twice", e, n)
		}
		m[n] = ap
	}
	return m, nil
}

package netpolicy

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// HostMap sends the connections for a host name to another address, as
// curl's --resolve does: the proxy decides on the name (allow-list,
// TLS server name, a recording's URLs), and dials the address instead
// of resolving the name. A mapping's port, when not zero, replaces the
// port asked for. It is a plain map: safe for concurrent reads.
type HostMap map[string]netip.AddrPort

// ParseHostMap parses entries of the form NAME=ADDR[:PORT]: NAME a DNS
// name (not an IP address), ADDR an IPv4 address in dotted-quad form or
// an IPv6 address in brackets, PORT 1-65535. A name may be mapped once.
// The error is a *HostMapError naming the first bad entry.
func ParseHostMap(entries []string) (HostMap, error) {
	m := HostMap{}
	for i, e := range entries {
		name, ap, err := parseMapping(strings.TrimSpace(e))
		if err != nil {
			return nil, &HostMapError{Index: i, Entry: e, Reason: err.Error()}
		}
		if _, dup := m[name]; dup {
			return nil, &HostMapError{Index: i, Entry: e, Reason: "name " + name + " mapped twice"}
		}
		m[name] = ap
	}
	return m, nil
}

func parseMapping(e string) (string, netip.AddrPort, error) {
	name, addr, ok := strings.Cut(e, "=")
	if !ok {
		return "", netip.AddrPort{}, fmt.Errorf("want NAME=ADDR[:PORT]")
	}
	h, ip, err := ParseHost(name)
	switch {
	case err != nil:
		return "", netip.AddrPort{}, fmt.Errorf("name: %v", err)
	case ip.IsValid():
		return "", netip.AddrPort{}, fmt.Errorf("name: an IP address, not a name")
	}
	hostPart, portPart := addr, ""
	if strings.HasPrefix(addr, "[") {
		j := strings.IndexByte(addr, ']')
		if j < 0 {
			return "", netip.AddrPort{}, fmt.Errorf("address: missing ']'")
		}
		hostPart, portPart = addr[:j+1], addr[j+1:]
		if portPart != "" && portPart[0] != ':' {
			return "", netip.AddrPort{}, fmt.Errorf("address: text after ']'")
		}
		portPart = strings.TrimPrefix(portPart, ":")
	} else if j := strings.LastIndexByte(addr, ':'); j >= 0 {
		hostPart, portPart = addr[:j], addr[j+1:]
		if portPart == "" {
			return "", netip.AddrPort{}, fmt.Errorf("address: empty port")
		}
	}
	_, a, err := ParseHost(hostPart)
	if err != nil || !a.IsValid() {
		return "", netip.AddrPort{}, fmt.Errorf("address %q: not an IP address (dotted quad, or IPv6 in brackets)", hostPart)
	}
	port := 0
	if portPart != "" || strings.HasSuffix(addr, ":") {
		n, err := strconv.Atoi(portPart)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != portPart {
			return "", netip.AddrPort{}, fmt.Errorf("port %q: not 1-65535", portPart)
		}
		port = n
	}
	return h, netip.AddrPortFrom(a, uint16(port)), nil
}

// Strings returns the mapping as ParseHostMap reads it back, sorted.
func (m HostMap) Strings() []string {
	out := make([]string, 0, len(m))
	for name, ap := range m {
		a := ap.Addr().String()
		if ap.Addr().Is6() {
			a = "[" + a + "]"
		}
		if ap.Port() != 0 {
			a += ":" + strconv.Itoa(int(ap.Port()))
		}
		out = append(out, name+"="+a)
	}
	sort.Strings(out)
	return out
}

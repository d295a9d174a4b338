package netpolicy

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// host is a parsed host: either a name (lower case, no trailing dot) or an
// IP address (unmapped, no zone). Exactly one of the two is set.
type host struct {
	name string
	ip   netip.Addr
}

func (h host) isIP() bool { return h.ip.IsValid() }

// String gives the host as it is written in an authority: a name, a dotted
// quad, or a bracketed IPv6 address.
func (h host) String() string {
	if !h.isIP() {
		return h.name
	}
	if h.ip.Is4() {
		return h.ip.String()
	}
	return "[" + h.ip.String() + "]"
}

// Errors of parseHost that callers tell apart.
var (
	// errNumericHost is a host that a C library or a browser would read as
	// an IPv4 address but that is not a plain dotted quad: "2130706433",
	// "0x7f.1", "127.1", "0177.0.0.1". It is refused, never resolved.
	errNumericHost = errors.New("IP address not in dotted-quad form")
	errNotASCII    = errors.New("non-ASCII name: write an IDN in punycode (xn--...)")
)

const (
	maxNameLen  = 253
	maxLabelLen = 63
)

// parseHost parses a host without a port: a DNS name, a dotted-quad IPv4
// address, or an IPv6 address in brackets. A single trailing dot is
// ignored and ASCII letters are folded to lower case. An IPv4-mapped IPv6
// address is unmapped, so "[::ffff:127.0.0.1]" is the IP literal
// 127.0.0.1. Anything that looks like a number in its last label is an IP
// address or an error, never a name.
func parseHost(s string) (host, error) {
	if s == "" {
		return host{}, errors.New("empty host")
	}
	if s[0] == '[' {
		if s[len(s)-1] != ']' {
			return host{}, errors.New("missing ']' after IPv6 address")
		}
		a, err := parseIPv6(s[1 : len(s)-1])
		if err != nil {
			return host{}, err
		}
		return host{ip: a}, nil
	}
	if strings.Contains(s, ":") {
		return host{}, errors.New("IPv6 address must be in brackets")
	}
	s = strings.TrimSuffix(s, ".")
	if s == "" {
		return host{}, errors.New("empty host")
	}
	last := s[strings.LastIndexByte(s, '.')+1:]
	if isNumericLabel(last) {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.Is4() {
			return host{}, errNumericHost
		}
		return host{ip: a}, nil
	}
	name, err := parseName(s)
	if err != nil {
		return host{}, err
	}
	return host{name: name}, nil
}

// ParseHost reads a host (without a port) as the proxy reads one from a
// request: a DNS name, a dotted-quad IPv4 address, or an IPv6 address in
// brackets. It returns the host in the form Decision.Host gives (a name
// in lower case without a trailing dot, a dotted quad, a bracketed IPv6
// address) and, for an IP literal, its address (unmapped). A host that
// is numeric in its last label but not a dotted quad ("2130706433",
// "127.1"), a non-ASCII name, or any other form is an error: such a
// host is refused, never resolved.
func ParseHost(s string) (canonical string, ip netip.Addr, err error) {
	h, err := parseHost(s)
	if err != nil {
		return "", netip.Addr{}, err
	}
	return h.String(), h.ip, nil
}

// parseIPv6 parses the inside of brackets. It refuses zones and IPv4
// addresses, and unmaps IPv4-mapped addresses.
func parseIPv6(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || !a.Is6() {
		return netip.Addr{}, errors.New("invalid IPv6 address")
	}
	if a.Zone() != "" {
		return netip.Addr{}, errors.New("IPv6 zone not allowed")
	}
	return a.Unmap(), nil
}

// isNumericLabel reports whether a label is a number in the sense of the
// WHATWG URL standard's IPv4 parser and of inet_aton: decimal digits, or
// "0x" followed by hex digits (possibly none).
func isNumericLabel(l string) bool {
	if l == "" {
		return false
	}
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		for i := 2; i < len(l); i++ {
			if !isHex(l[i]) {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// parseName checks a DNS name without a trailing dot and returns it in
// lower case. Labels are 1 to 63 ASCII letters, digits, '-' and '_', not
// starting or ending with '-'. Only ASCII letters are folded: a name with
// any other byte is refused, so no Unicode case folding (the Kelvin sign
// K lowering to 'k') can make two different names equal.
func parseName(s string) (string, error) {
	if len(s) > maxNameLen {
		return "", errors.New("name longer than 253 bytes")
	}
	b := []byte(s)
	start := 0
	for i := 0; i <= len(b); i++ {
		if i < len(b) && b[i] != '.' {
			c := b[i]
			switch {
			case c >= 0x80:
				return "", errNotASCII
			case c >= 'A' && c <= 'Z':
				b[i] = c + 'a' - 'A'
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
			case c == '*':
				return "", errors.New("'*' is allowed only as a whole first label \"*.\"")
			default:
				return "", errors.New("invalid character " + strconv.QuoteRune(rune(c)) + " in name")
			}
			continue
		}
		label := b[start:i]
		switch {
		case len(label) == 0:
			return "", errors.New("empty label in name")
		case len(label) > maxLabelLen:
			return "", errors.New("label longer than 63 bytes")
		case label[0] == '-' || label[len(label)-1] == '-':
			return "", errors.New("label starts or ends with '-'")
		}
		start = i + 1
	}
	return string(b), nil
}

// parsePort parses a decimal port 1 to 65535, digits only.
func parsePort(s string) (int, error) {
	if s == "" || len(s) > 5 {
		return 0, errors.New("bad port " + strconv.Quote(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("bad port " + strconv.Quote(s))
		}
	}
	n, _ := strconv.Atoi(s)
	if n < 1 || n > 65535 {
		return 0, errors.New("port " + s + " out of range 1-65535")
	}
	return n, nil
}

// splitHostPort splits an authority "host", "host:port", "[v6]" or
// "[v6]:port". port is 0 when there is none. It refuses user info,
// paths and any other URL syntax.
func splitHostPort(s string) (hostPart string, port int, err error) {
	if i := strings.IndexAny(s, "/?#@ \t\\%"); i >= 0 {
		switch s[i] {
		case '@':
			return "", 0, errors.New("user info not allowed")
		case '/', '?', '#', '\\':
			return "", 0, errors.New("path, query or fragment not allowed")
		case '%':
			return "", 0, errors.New("percent-encoding not allowed")
		default:
			return "", 0, errors.New("white space not allowed")
		}
	}
	hostPart, portPart, hasPort := s, "", false
	if strings.HasPrefix(s, "[") {
		i := strings.IndexByte(s, ']')
		if i < 0 {
			return "", 0, errors.New("missing ']' after IPv6 address")
		}
		hostPart = s[:i+1]
		if rest := s[i+1:]; rest != "" {
			if rest[0] != ':' {
				return "", 0, errors.New("unexpected text after ']'")
			}
			portPart, hasPort = rest[1:], true
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		if strings.Count(s, ":") > 1 {
			return "", 0, errors.New("IPv6 address must be in brackets")
		}
		hostPart, portPart, hasPort = s[:i], s[i+1:], true
	}
	if hasPort {
		if port, err = parsePort(portPart); err != nil {
			return "", 0, err
		}
	}
	return hostPart, port, nil
}

// parseTarget parses the authority a client asks the proxy for. A missing
// port is defaultPort, or an error when defaultPort is 0.
func parseTarget(s string, defaultPort int) (host, int, error) {
	hp, port, err := splitHostPort(s)
	if err != nil {
		return host{}, 0, err
	}
	if port == 0 {
		if defaultPort == 0 {
			return host{}, 0, errors.New("missing port")
		}
		port = defaultPort
	}
	h, err := parseHost(hp)
	if err != nil {
		return host{}, 0, err
	}
	return h, port, nil
}

// authority formats host and port for a Host header: the port is left out
// when it is the scheme's default.
func authority(h host, port, defaultPort int) string {
	if port == defaultPort {
		return h.String()
	}
	return h.String() + ":" + strconv.Itoa(port)
}

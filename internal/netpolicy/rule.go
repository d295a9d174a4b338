package netpolicy

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Rule is one allow-list entry. It is an immutable value made by
// ParseRule; the zero Rule matches nothing. The forms are
//
//	api.example.com         exactly this name
//	*.example.com           any name strictly below example.com (not
//	                        example.com itself)
//	10.1.2.3                exactly this IPv4 address, asked for as an
//	                        IP literal
//	[2001:db8::1]           exactly this IPv6 address (2001:db8::1
//	                        without brackets is accepted too)
//
// each optionally followed by ":PORT". An entry without a port allows
// ports 80 and 443 only; any other port must be written out, one entry
// per port.
//
// Whether a rule is a wildcard matters beyond matching: only an exact
// name or an IP literal may reach loopback, private and host addresses
// (see the package documentation).
type Rule struct {
	name     string     // lower case, no trailing dot; the base below which a wildcard matches
	ip       netip.Addr // for an IP-literal rule, unmapped
	wildcard bool
	port     int // 0: 80 and 443
}

// OpenRule is the rule of open egress (Options.Open): a wildcard over
// every name, IP literal and port, so that only public addresses are
// dialled. Its String is "*".
func OpenRule() Rule { return Rule{wildcard: true} }

// Wildcard reports whether r is a "*." rule.
func (r Rule) Wildcard() bool { return r.wildcard }

// Port returns the rule's port, or 0 for an entry without one (ports 80
// and 443).
func (r Rule) Port() int { return r.port }

// String returns the rule in the canonical form that ParseRule reads
// back to an equal Rule: lower case, no trailing dot, IPv6 in brackets.
// The zero Rule gives "".
func (r Rule) String() string {
	var s string
	switch {
	case r.ip.IsValid() && r.ip.Is4():
		s = r.ip.String()
	case r.ip.IsValid():
		s = "[" + r.ip.String() + "]"
	case r.wildcard && r.name == "":
		return "*" // open egress (Options.Open): any name, any port
	case r.wildcard:
		s = "*." + r.name
	default:
		s = r.name
	}
	if s != "" && r.port != 0 {
		s += ":" + strconv.Itoa(r.port)
	}
	return s
}

func (r Rule) matchesPort(port int) bool {
	if r.port == 0 {
		return port == 80 || port == 443
	}
	return port == r.port
}

// matches reports whether r allows h:port.
func (r Rule) matches(h host, port int) bool {
	if !r.matchesPort(port) {
		return false
	}
	switch {
	case r.ip.IsValid():
		return h.isIP() && h.ip == r.ip
	case h.isIP() || r.name == "":
		return false
	case r.wildcard:
		return len(h.name) > len(r.name) && strings.HasSuffix(h.name, r.name) &&
			h.name[len(h.name)-len(r.name)-1] == '.'
	default:
		return h.name == r.name
	}
}

// ParseRule parses one allow-list entry (see Rule). Surrounding white
// space is ignored. It refuses, with a *RuleError giving a one-line
// reason: an empty entry; a bare "*"; a "*" anywhere but as the whole
// first label; a wildcard over a single label ("*.com") or over a public
// suffix of the Public Suffix List, ICANN or private section ("*.co.uk",
// "*.github.io"), or over an IP address; a URL scheme, path, query, user
// info, percent-encoding or white space; a port that is not a decimal
// number from 1 to 65535; a name with non-ASCII bytes (an IDN must be
// written in punycode, "xn--..."), an empty label, a label over 63 bytes
// or starting or ending with '-'; an IPv4 address not written as a plain
// dotted quad; an IPv6 zone.
func ParseRule(s string) (Rule, error) {
	r, err := parseRule(strings.TrimSpace(s))
	if err != nil {
		return Rule{}, &RuleError{Index: -1, Entry: s, Reason: err.Error()}
	}
	return r, nil
}

func parseRule(s string) (Rule, error) {
	switch {
	case s == "":
		return Rule{}, errors.New("empty entry")
	case strings.Contains(s, "://"):
		return Rule{}, errors.New("URL scheme not allowed: write the host name only")
	case s == "*" || strings.HasPrefix(s, "*:"):
		return Rule{}, errors.New("bare \"*\" would allow every host")
	}
	// A bare IPv6 address: more than one colon and no brackets.
	if !strings.HasPrefix(s, "[") && strings.Count(s, ":") > 1 {
		a, err := parseIPv6(s)
		if err != nil {
			return Rule{}, errors.New("invalid IPv6 address (write [addr]:port for a port)")
		}
		return Rule{ip: a}, nil
	}
	hp, port, err := splitHostPort(s)
	if err != nil {
		return Rule{}, err
	}
	r := Rule{port: port}
	if base, ok := strings.CutPrefix(hp, "*."); ok {
		h, err := parseHost(base)
		if err != nil {
			return Rule{}, err
		}
		if h.isIP() {
			return Rule{}, errors.New("wildcard over an IP address")
		}
		if !strings.Contains(h.name, ".") {
			return Rule{}, errors.New("wildcard over a single label " + strconv.Quote(h.name) + " would allow a whole top-level domain")
		}
		if ps, _ := publicsuffix.PublicSuffix(h.name); ps == h.name {
			return Rule{}, errors.New("wildcard over the public suffix " + strconv.Quote(h.name) + " would allow unrelated owners' names")
		}
		r.name, r.wildcard = h.name, true
		return r, nil
	}
	h, err := parseHost(hp)
	if err != nil {
		return Rule{}, err
	}
	r.name, r.ip = h.name, h.ip
	return r, nil
}

// AllowList is an ordered list of rules. It is a plain slice: safe for
// concurrent use as long as nobody modifies it.
type AllowList []Rule

// ParseAllowList parses each entry with ParseRule. The error is a
// *RuleError naming the first bad entry and its index. An empty list is
// valid and allows nothing.
func ParseAllowList(entries []string) (AllowList, error) {
	a := make(AllowList, 0, len(entries))
	for i, e := range entries {
		r, err := parseRule(strings.TrimSpace(e))
		if err != nil {
			return nil, &RuleError{Index: i, Entry: e, Reason: err.Error()}
		}
		a = append(a, r)
	}
	return a, nil
}

// Match reports whether the list allows host:port and returns the rule
// that does. host is a name (ASCII letters in any case, one trailing dot
// tolerated), a dotted-quad IPv4 address, or an IPv6 address with or
// without brackets; an IPv4-mapped IPv6 address is the IPv4 address. Any
// other form, such as "0x7f.1" or "2130706433", matches nothing. An exact
// rule is preferred over a wildcard when both match, as the exact rule is
// the operator's more specific word.
func (a AllowList) Match(hostname string, port int) (Rule, bool) {
	if !strings.HasPrefix(hostname, "[") && strings.Contains(hostname, ":") {
		hostname = "[" + hostname + "]"
	}
	h, err := parseHost(hostname)
	if err != nil {
		return Rule{}, false
	}
	return a.match(h, port)
}

func (a AllowList) match(h host, port int) (Rule, bool) {
	var wild Rule
	found := false
	for _, r := range a {
		if !r.matches(h, port) {
			continue
		}
		if !r.wildcard {
			return r, true
		}
		if !found {
			wild, found = r, true
		}
	}
	return wild, found
}

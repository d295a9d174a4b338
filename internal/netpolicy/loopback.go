package netpolicy

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"time"
)

// MethodDirect is the Decision.Method of a connection the agent made
// directly to a loopback forwarder (ServeLoopback), not through the proxy.
const MethodDirect = "DIRECT"

// localhost is the one name that means loopback whatever a resolver says
// (RFC 6761): a "localhost" rule gives loopback forwarders.
const localhost = "localhost"

var (
	loopback4 = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	loopback6 = netip.IPv6Loopback()
)

// Loopback returns the loopback addresses the list names by an exact rule,
// with their ports, in the list's order and each once: for an IP-literal
// rule in 127.0.0.0/8 or for ::1, that address; for the name "localhost",
// 127.0.0.1 and ::1; each with the rule's port, or 80 and 443 for a rule
// without one. A wildcard rule gives none, and no other name does.
//
// These are the addresses to listen on inside the agent's namespace, and
// to serve with ServeLoopback, so that a client that connects to them
// directly (one that honours a NO_PROXY covering loopback, or ignores the
// proxy altogether) reaches the host's service instead of the namespace's
// own, empty loopback.
func (a AllowList) Loopback() []netip.AddrPort {
	var out []netip.AddrPort
	seen := make(map[netip.AddrPort]bool)
	for _, r := range a {
		var ips []netip.Addr
		switch {
		case r.wildcard:
		case r.ip.IsValid() && r.ip.IsLoopback():
			ips = []netip.Addr{r.ip}
		case r.name == localhost:
			ips = []netip.Addr{loopback4, loopback6}
		}
		ports := []uint16{uint16(r.port)}
		if r.port == 0 {
			ports = []uint16{80, 443}
		}
		for _, ip := range ips {
			for _, port := range ports {
				if ap := netip.AddrPortFrom(ip, port); !seen[ap] {
					seen[ap] = true
					out = append(out, ap)
				}
			}
		}
	}
	return out
}

// ServeLoopback serves l as a loopback forwarder until Close, as Serve
// does a proxy listener. l listens on a loopback address inside the
// agent's namespace (one AllowList.Loopback gave); each connection
// accepted there is decided as if the agent had asked the proxy for that
// address and port, and, if allowed, relayed byte for byte to the same
// port on the host's loopback.
//
// The address is allowed by an IP-literal rule for it or, for 127.0.0.1
// and ::1, by a "localhost" rule, which means the host's loopback in
// either family: the host's address of the connection's family is dialled
// first, the other if it does not answer, so a client that tries ::1
// first still reaches a server on 127.0.0.1 alone. "localhost" is not
// resolved. The address checks of the package documentation apply as for
// the proxy. There is no SNI or HTTP check: the agent named no host, only
// an address the operator wrote down, so any protocol passes, including
// those where the server speaks first.
//
// Every connection gets one Decision, Method MethodDirect, Host l's
// address. One denied, or whose upstream cannot be dialled, is reset
// without a byte sent. ServeLoopback returns an error at once, and closes
// l, if l is not on a loopback address.
func (p *Proxy) ServeLoopback(l net.Listener) error {
	ap, err := netip.ParseAddrPort(l.Addr().String())
	if err != nil || !ap.Addr().Unmap().IsLoopback() {
		_ = l.Close()
		return fmt.Errorf("netpolicy: ServeLoopback on %s: not a loopback address", l.Addr())
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
	return p.serve(l, func(c net.Conn) { p.forward(c, ap) })
}

// forward decides on one connection to a loopback forwarder at a and
// relays it to the host.
func (p *Proxy) forward(c net.Conn, a netip.AddrPort) {
	d := Decision{Time: time.Now(), Method: MethodDirect, Host: host{ip: a.Addr()}.String(), Port: int(a.Port())}
	defer func() { p.record(d) }()
	v := p.decideLoopback(a)
	d.Rule = v.rule.String()
	if !v.allowed() {
		d.Reason = v.reason
		reset(c)
		return
	}
	up, addr, err := p.dial(v, d.Port)
	if err != nil {
		d.Reason = clean("dial: " + err.Error())
		reset(c)
		return
	}
	defer p.untrack(up)
	d.Allowed, d.Addr = true, addr
	p.relay(&agentConn{raw: &meteredConn{Conn: c}}, up, nil, &d)
}

// decideLoopback applies the allow-list to a direct connection to a on the
// agent's loopback (see ServeLoopback) and gives the host's addresses to
// dial, in order.
func (p *Proxy) decideLoopback(a netip.AddrPort) verdict {
	ip, port := a.Addr(), int(a.Port())
	var v verdict
	found := false
	if r, ok := p.o.Allow.match(host{ip: ip}, port); ok {
		v.rule, found = r, true
		v.addrs = append(v.addrs, ip)
	}
	if ip == loopback4 || ip == loopback6 {
		if r, ok := p.o.Allow.match(host{name: localhost}, port); ok {
			if !found {
				v.rule, found = r, true
			}
			other := loopback6
			if ip == loopback6 {
				other = loopback4
			}
			for _, x := range []netip.Addr{ip, other} {
				if !slices.Contains(v.addrs, x) {
					v.addrs = append(v.addrs, x)
				}
			}
		}
	}
	if !found {
		return verdict{status: http.StatusForbidden, reason: "not on the allow-list"}
	}
	addrs, first := v.addrs[:0], ""
	for _, x := range v.addrs {
		if r := p.check.refusal(x, v.rule.wildcard); r != "" {
			if first == "" {
				first = r
			}
			continue
		}
		addrs = append(addrs, x)
	}
	v.addrs = addrs
	if len(v.addrs) == 0 {
		v.status, v.reason = http.StatusForbidden, first
	}
	return v
}

// reset makes the close of c a TCP reset, which a client reports as
// refused or reset rather than as a server that answered nothing.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

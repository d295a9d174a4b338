package netpolicy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
)

// verdict is the outcome of deciding on a host and port, before dialling.
type verdict struct {
	rule   Rule
	addrs  []netip.Addr // permitted addresses, in the resolver's order; empty when denied
	port   int          // the port to dial instead of the one asked for (HostMap), 0 for none
	status int          // for a denial: the HTTP status to answer
	reason string       // for a denial
}

func (v verdict) allowed() bool { return v.reason == "" }

// decide applies the allow-list to h:port, resolves a name, and keeps the
// addresses that may be dialled. It is the only place a name is resolved.
func (p *Proxy) decide(h host, port int) verdict {
	rule, ok := p.o.Allow.match(h, port)
	if !ok && p.o.Open {
		rule, ok = OpenRule(), true
	}
	if !ok {
		if h.isIP() {
			return verdict{status: http.StatusForbidden, reason: "IP literal not allowed"}
		}
		return verdict{status: http.StatusForbidden, reason: "not on the allow-list"}
	}
	v := verdict{rule: rule}
	if h.isIP() {
		if r := p.check.refusal(h.ip, rule.wildcard); r != "" {
			v.status, v.reason = http.StatusForbidden, r
			return v
		}
		v.addrs = []netip.Addr{h.ip}
		return v
	}
	if m, ok := p.o.HostMap[h.name]; ok {
		v.addrs, v.port = []netip.Addr{m.Addr().Unmap()}, int(m.Port())
		return v
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.o.DialTimeout)
	defer cancel()
	addrs, err := p.o.Resolve(ctx, h.name)
	if err == nil && len(addrs) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		v.status, v.reason = http.StatusBadGateway, "dns: "+err.Error()
		return v
	}
	seen := make(map[netip.Addr]bool)
	var first string
	for _, a := range addrs {
		a = a.Unmap() // LookupNetIP gives IPv4 results in the ::ffff: form
		if seen[a] {
			continue
		}
		seen[a] = true
		if r := p.check.refusal(a, rule.wildcard); r != "" {
			if first == "" {
				first = r
			}
			continue
		}
		v.addrs = append(v.addrs, a)
	}
	if len(v.addrs) == 0 {
		v.status, v.reason = http.StatusForbidden, "resolves to "+article(first)
	}
	return v
}

// dial connects to the first of v's addresses that answers, on port, and
// registers the connection with the proxy so that Close closes it. It
// dials exactly the checked addresses: the address is given to
// Options.Dial as an ip:port, never as a name.
func (p *Proxy) dial(v verdict, port int) (net.Conn, string, error) {
	if v.port != 0 {
		port = v.port
	}
	var last error
	for _, a := range v.addrs {
		addr := netip.AddrPortFrom(a, uint16(port)).String()
		ctx, cancel := context.WithTimeout(p.ctx, p.o.DialTimeout)
		c, err := p.o.Dial(ctx, "tcp", addr)
		cancel()
		if err != nil {
			last = err
			continue
		}
		if !p.track(c, false) {
			_ = c.Close()
			return nil, "", ErrClosed
		}
		return c, addr, nil
	}
	if last == nil {
		last = errors.New("no address to dial")
	}
	return nil, "", last
}

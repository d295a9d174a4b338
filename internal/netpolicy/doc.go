// Package netpolicy provides Proctor's allow-list egress proxy: the only
// way out of an agent's network namespace, which holds nothing but
// loopback. The host serves the proxy on a listener that lives inside
// that namespace (the caller creates it and hands it to Serve); the
// proxy dials from the host's namespace, only to allowed hosts, and
// reports every allow and deny as a Decision.
//
// # What it serves
//
//   - CONNECT host:port, a tunnel, normally for TLS.
//   - Plain HTTP requests in absolute form, "GET http://host/path
//     HTTP/1.1", several on one kept-alive connection. Each request is
//     decided, dialled on a fresh upstream connection and recorded on its
//     own. Hop-by-hop headers, Proxy-Authorization and Proxy-Connection
//     are removed; the Host header is taken from the URL; no
//     X-Forwarded-For, Via or default User-Agent is added; redirects are
//     passed to the agent, never followed; Upgrade is not supported.
//     A request in origin form ("GET /path") is answered 400.
//
// # How it decides
//
//  1. On the host NAME the agent asked for, against the allow-list
//     (see Rule): case-insensitive, one trailing dot ignored. An IP
//     literal is allowed only when that address is itself on the list.
//     A host that is numeric in its last label but not a plain dotted
//     quad ("2130706433", "0x7f.1", "127.1", "0177.0.0.1") is refused as
//     an IP literal and never resolved. "[::ffff:127.0.0.1]" is the IP
//     literal 127.0.0.1.
//  2. The proxy resolves the name itself (Options.Resolve), once, and
//     checks every address. It dials only checked addresses, as ip:port:
//     there is no second lookup that DNS rebinding could answer
//     differently. Addresses that fail the check are skipped; if none is
//     left the request is denied with the first refusal as the reason.
//  3. Whatever the list says, it never dials a cloud metadata address
//     (169.254.169.254, fd00:ec2::254, 100.100.100.200), a link-local
//     address (169.254.0.0/16, fe80::/10), an unspecified address
//     (0.0.0.0/8, ::), multicast, broadcast or reserved (240.0.0.0/4)
//     addresses, or a deprecated IPv4-compatible IPv6 address (::/96).
//     IPv4-mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96) and 6to4
//     (2002::/16) addresses are checked as the IPv4 address inside them
//     as well.
//  4. When the rule that matched is a wildcard ("*.example.com"), it
//     also refuses loopback (127.0.0.0/8, ::1), private addresses
//     (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10,
//     fc00::/7, fec0::/10, 64:ff9b:1::/48, 192.0.0.0/24, 198.18.0.0/15)
//     and the host's own addresses (Options.HostAddrs). An EXACT name
//     rule ("db.internal") or an IP-literal rule ("10.1.2.3:5432") may
//     reach such addresses: that is how an operator lets the agent use a
//     server on the host or the local network, by naming it. The name
//     must still resolve there through Options.Resolve, and the port must
//     match.
//  5. For CONNECT the proxy answers 200, then reads the agent's first
//     bytes (within Options.HelloTimeout). If they are a TLS handshake
//     record it reads the whole ClientHello (split over any number of
//     records and reads, at most 16 KiB) and checks its server name
//     (SNI): for a name, the SNI must be present and the same name; for
//     an IP literal, absent or the same address. A ClientHello with
//     Encrypted Client Hello is refused: its inner, encrypted SNI could
//     name another site behind the same address. Only after this check
//     does the proxy dial the upstream, so a refused tunnel sends it
//     nothing, not even a TCP handshake; the agent gets a TLS
//     access_denied alert. Bytes that are not TLS must hold a complete
//     first line: plain HTTP (a first line ending in "HTTP/x") is refused,
//     since its Host header could name any other site behind the address
//     and goes to the proxy in absolute form instead; anything else (SSH)
//     is allowed through: the decision is on the name, and the address
//     dialled has been checked. An agent that sends nothing within
//     HelloTimeout is refused, so protocols where the server speaks first
//     do not work through a tunnel.
//
// # Loopback forwarders
//
// The agent's namespace has a loopback of its own: "127.0.0.1:8000"
// inside is not the host's. For an exact rule naming a loopback address
// ("127.0.0.1:8000", "[::1]:8000") or "localhost", AllowList.Loopback
// gives the addresses that the caller listens on inside the namespace and
// serves with ServeLoopback, a forwarder to the same port on the host's
// loopback. So a client that connects there directly (it honours a
// NO_PROXY that covers loopback, or ignores the proxy, as Node's fetch
// does) reaches the service the operator named. Each connection is
// decided by the same rules as a request to the proxy for that address
// ("localhost" meaning 127.0.0.1 and ::1, never resolved), and recorded
// as a Decision with Method "DIRECT". A wildcard rule never gives a
// forwarder.
//
// Denials are answered with a one-line plain-text reason and
// Connection: close, and recorded: 403 for the policy, 400 for a
// malformed request (408 for a header not sent within HeaderTimeout, 431
// for one over MaxHeaderBytes, 417 for an Expect other than
// 100-continue), 502 when resolving or dialling fails. A tunnel refused
// or failing to dial after its 200 is closed and recorded.
//
// # What it must never do
//
// It must never dial an address it has not checked, resolve a name twice
// for one request, or dial a name; never forward a byte of a tunnel
// before the SNI check has passed; never reach a metadata, link-local,
// unspecified, multicast or broadcast address, whatever the allow-list
// says; never let a wildcard rule reach loopback, private or host
// addresses; never treat a numeric host as a name; never follow a
// redirect or add X-Forwarded-For; never panic on what an agent sends;
// and never lose a Decision: Options.Record is called exactly once for
// every request whose header began to arrive and every connection to a
// forwarder, and Close returns only after every call has returned. It
// never creates a listener.
//
// # Limits
//
// The SNI check ties a TLS tunnel to the address of the name asked for,
// not to the site the agent talks to inside TLS: a CDN that serves
// several sites at one address and routes by the HTTP Host header
// (domain fronting) can still be used to reach another of its sites.
// Only the first ClientHello is checked, not one sent after a
// HelloRetryRequest.
package netpolicy

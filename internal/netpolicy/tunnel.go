package netpolicy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// alertAccessDenied is a fatal TLS access_denied alert record, sent to an
// agent whose tunnel is refused after the 200, so that its TLS library
// reports "access denied" rather than a bare connection reset.
var alertAccessDenied = []byte{0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49}

// serveConnect handles a CONNECT request. Its order is the point:
// decide on the name, answer 200, read and check the ClientHello, and
// only then dial, so a refused tunnel never touches the upstream.
func (p *Proxy) serveConnect(ac *agentConn, req *http.Request) {
	d := Decision{Time: time.Now(), Method: http.MethodConnect}
	defer func() { p.record(d) }()

	h, port, err := parseTarget(req.RequestURI, 0)
	if err != nil {
		if errors.Is(err, errNumericHost) {
			p.deny(ac, &d, http.StatusForbidden, "IP literal not allowed: "+strconv.Quote(req.RequestURI)+" is not a dotted quad")
			return
		}
		p.deny(ac, &d, http.StatusBadRequest, "bad request: CONNECT target "+strconv.Quote(req.RequestURI)+": "+err.Error())
		return
	}
	d.Host, d.Port = h.String(), port
	v := p.decide(h, port)
	d.Rule = v.rule.String()
	if !v.allowed() {
		p.deny(ac, &d, v.status, v.reason)
		return
	}

	_ = ac.raw.SetWriteDeadline(time.Now().Add(p.o.HelloTimeout))
	if _, err := io.WriteString(ac.raw.Conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		d.Reason = "agent: " + err.Error()
		return
	}
	prefix, ch, isTLS, err := p.readHello(ac)
	if err == nil && isTLS {
		d.SNI = clean(ch.serverName)
		err = checkSNI(h, ch)
	}
	if err == nil && !isTLS {
		err = checkPlain(prefix)
	}
	if err != nil {
		d.Reason = clean(err.Error())
		if isTLS {
			_ = ac.raw.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = ac.raw.Conn.Write(alertAccessDenied)
		}
		return
	}

	up, addr, err := p.dial(v, port)
	if err != nil {
		d.Reason = clean("dial: " + err.Error())
		return
	}
	defer p.untrack(up)
	d.Allowed, d.Addr = true, addr
	p.relay(ac, up, prefix, &d)
}

// readHello reads the agent's first bytes in the tunnel, within
// HelloTimeout. If they start a TLS handshake record it reads on until
// the ClientHello is complete and parses it. It returns every byte read,
// to be sent upstream first.
func (p *Proxy) readHello(ac *agentConn) (prefix []byte, ch clientHello, isTLS bool, err error) {
	_ = ac.raw.SetReadDeadline(time.Now().Add(p.o.HelloTimeout))
	defer func() { _ = ac.raw.SetReadDeadline(time.Time{}) }()
	buf := make([]byte, 0, maxHello)
	for {
		if len(buf) > 0 {
			if buf[0] != recordTypeHandshake {
				// Not TLS: read the first line whole, for checkPlain.
				if bytes.IndexByte(buf, '\n') >= 0 || len(buf) == cap(buf) {
					break
				}
				n, rerr := ac.br.Read(buf[len(buf):cap(buf)])
				buf = buf[:len(buf)+n]
				if rerr != nil && n == 0 {
					return nil, ch, false, fmt.Errorf("not TLS, and no complete first line: %v", readErr(rerr, p.o.HelloTimeout))
				}
				continue
			}
			isTLS = true
			ch, err = parseClientHello(buf)
			if err == nil {
				break
			}
			if err != errShortHello {
				return nil, ch, true, fmt.Errorf("ClientHello: %w", err)
			}
		}
		n, rerr := ac.br.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if rerr != nil && n == 0 {
			switch {
			case len(buf) > 0:
				return nil, ch, true, fmt.Errorf("ClientHello incomplete: %v", readErr(rerr, p.o.HelloTimeout))
			case rerr == io.EOF:
				return nil, ch, false, errors.New("tunnel closed by the agent before any data")
			default:
				return nil, ch, false, fmt.Errorf("no data from the agent: %v", readErr(rerr, p.o.HelloTimeout))
			}
		}
	}
	if n := ac.br.Buffered(); n > 0 {
		rest, _ := ac.br.Peek(n)
		buf = append(buf, rest...)
		_, _ = ac.br.Discard(n)
	}
	return buf, ch, isTLS, nil
}

func readErr(err error, timeout time.Duration) string {
	switch {
	case isTimeout(err):
		return "nothing within " + timeout.String()
	case err == io.EOF:
		return "connection closed"
	case errors.Is(err, net.ErrClosed):
		return "proxy closed"
	}
	return err.Error()
}

// checkPlain refuses plain HTTP inside a tunnel: its Host header could name
// any other site behind the address (a CDN), and nothing here would check
// it. Plain HTTP goes to the proxy in absolute form, where each request's
// host is decided. first holds the tunnel's first line (or 16 KiB without
// one); any other protocol passes as it is.
func checkPlain(first []byte) error {
	line := first
	if i := bytes.IndexByte(line, '\n'); i >= 0 {
		line = line[:i]
	} else {
		return errors.New("not TLS, and no line break in the first 16 KiB")
	}
	line = bytes.TrimRight(line, "\r")
	if i := bytes.LastIndexByte(line, ' '); i >= 0 && bytes.HasPrefix(bytes.ToUpper(line[i+1:]), []byte("HTTP/")) {
		return errors.New("plain HTTP inside a CONNECT tunnel: send http:// requests to the proxy in absolute form")
	}
	return nil
}

// checkSNI checks the ClientHello against the CONNECT host: for a name,
// the SNI must be present and the same name; for an IP literal, the SNI
// must be absent or the same address. ECH is refused because its inner,
// encrypted ClientHello could name any other host served at the address.
func checkSNI(h host, ch clientHello) error {
	if ch.ech {
		return errors.New("encrypted ClientHello (ECH) not allowed")
	}
	if !ch.hasSNI {
		if h.isIP() {
			return nil
		}
		return fmt.Errorf("no SNI in ClientHello for CONNECT host %q", h.String())
	}
	s := ch.serverName
	if strings.Contains(s, ":") && !strings.HasPrefix(s, "[") {
		s = "[" + s + "]"
	}
	sh, err := parseHost(s)
	if err != nil || sh.isIP() != h.isIP() || sh.name != h.name || sh.ip != h.ip {
		return fmt.Errorf("SNI %q does not match CONNECT host %q", clean(ch.serverName), h.String())
	}
	return nil
}

// relay copies bytes both ways between the agent and the upstream until
// both directions end, an error or Close cuts them, or nothing moves for
// IdleTimeout. An end of stream in one direction is passed on as a
// half-close where the connection supports it.
func (p *Proxy) relay(ac *agentConn, up net.Conn, prefix []byte, d *Decision) {
	act := newActivity()
	cm := ac.raw
	um := &meteredConn{Conn: up}
	cm.startIdle(act, p.o.IdleTimeout)
	um.startIdle(act, p.o.IdleTimeout)
	downStart := cm.written

	done := make(chan error, 1)
	go func() {
		var err error
		if len(prefix) > 0 {
			_, err = um.Write(prefix)
		}
		if err == nil {
			_, err = io.CopyBuffer(writerOnly{um}, readerOnly{cm}, make([]byte, 64<<10))
		}
		endDirection(um.Conn, cm.Conn, err)
		done <- err
	}()
	_, errDown := io.CopyBuffer(writerOnly{cm}, readerOnly{um}, make([]byte, 64<<10))
	endDirection(cm.Conn, um.Conn, errDown)
	errUp := <-done

	d.BytesUp, d.BytesDown = um.written, cm.written-downStart
	switch {
	case p.ctx.Err() != nil:
		d.Reason = "cut by proxy close"
	case isTimeout(errUp) || isTimeout(errDown):
		d.Reason = "idle for " + p.o.IdleTimeout.String()
	}
}

// endDirection ends one direction of a tunnel: after a clean end of
// stream it half-closes dst; after an error it closes both connections so
// that the other direction stops too.
func endDirection(dst, src net.Conn, err error) {
	if err == nil {
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && cw.CloseWrite() == nil {
			return
		}
	}
	_ = dst.Close()
	_ = src.Close()
}

package netpolicy

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"time"
)

// hopHeaders are removed from requests and responses in both directions
// (RFC 9110 section 7.6.1), with the proxy's own Proxy-* headers.
// Headers named in Connection are removed too.
var hopHeaders = []string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

func removeHopHeaders(h http.Header) {
	for _, v := range h["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// serveHTTP forwards one plain HTTP request in absolute form, each on a
// fresh upstream connection that is closed after the response. It
// reports whether the agent connection may carry another request.
func (p *Proxy) serveHTTP(ac *agentConn, req *http.Request) (keepAlive bool) {
	d := Decision{Time: time.Now(), Method: req.Method}
	defer func() { p.record(d) }()
	if req.Body != nil {
		defer req.Body.Close()
	}

	u := req.URL
	expect := req.Header.Get("Expect")
	switch {
	case !u.IsAbs() || u.Host == "":
		p.deny(ac, &d, http.StatusBadRequest, "bad request: request target "+strconv.Quote(req.RequestURI)+" is not an absolute http:// URL; this is a proxy")
		return false
	case u.Scheme != "http":
		p.deny(ac, &d, http.StatusBadRequest, "bad request: scheme "+strconv.Quote(u.Scheme)+" not supported; use CONNECT for https")
		return false
	case u.User != nil:
		p.deny(ac, &d, http.StatusBadRequest, "bad request: user info in URL")
		return false
	case expect != "" && !strings.EqualFold(expect, "100-continue"):
		p.deny(ac, &d, http.StatusExpectationFailed, "bad request: unsupported Expect "+strconv.Quote(expect))
		return false
	}
	h, port, err := parseTarget(u.Host, 80)
	if err != nil {
		if errors.Is(err, errNumericHost) {
			p.deny(ac, &d, http.StatusForbidden, "IP literal not allowed: "+strconv.Quote(u.Host)+" is not a dotted quad")
			return false
		}
		p.deny(ac, &d, http.StatusBadRequest, "bad request: host "+strconv.Quote(u.Host)+": "+err.Error())
		return false
	}
	d.Host, d.Port = h.String(), port
	v := p.decide(h, port)
	d.Rule = v.rule.String()
	if !v.allowed() {
		p.deny(ac, &d, v.status, v.reason)
		return false
	}
	up, addr, err := p.dial(v, port)
	if err != nil {
		p.deny(ac, &d, http.StatusBadGateway, "dial: "+err.Error())
		return false
	}
	defer p.untrack(up)
	d.Allowed, d.Addr = true, addr

	act := newActivity()
	cm, um := ac.raw, &meteredConn{Conn: up}
	cm.startIdle(act, p.o.IdleTimeout)
	um.startIdle(act, p.o.IdleTimeout)
	defer cm.stopIdle()
	downStart := cm.written
	defer func() { d.BytesUp, d.BytesDown = um.written, cm.written-downStart }()

	out := outgoing(req, h, port)
	if expect != "" {
		if _, err := io.WriteString(cm, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
			d.Reason = clean("agent: " + err.Error())
			return false
		}
	}
	uw := bufferedWriter{bufio.NewWriter(um)}
	if out.Body != nil {
		out.Body = flushBeforeRead{out.Body, uw}
	}
	err = out.Write(uw)
	if err == nil {
		err = uw.Flush()
	}
	if err != nil {
		d.Reason = clean("upstream: writing request: " + err.Error())
		p.writeError(ac, http.StatusBadGateway, d.Reason)
		return false
	}
	resp, err := readResponse(bufio.NewReader(um), out)
	if err != nil {
		d.Reason = clean("upstream: " + err.Error())
		p.writeError(ac, http.StatusBadGateway, d.Reason)
		return false
	}
	defer resp.Body.Close()
	keepAlive = prepareResponse(resp, req)
	cw := bufferedWriter{bufio.NewWriter(cm)}
	resp.Body = flushBeforeRead{resp.Body, cw}
	err = resp.Write(cw)
	if err == nil {
		err = cw.Flush()
	}
	if err != nil {
		d.Reason = clean("response: " + err.Error())
		return false
	}
	return keepAlive
}

// outgoing builds the request sent upstream: origin form, Host from the
// request target (not the agent's Host header), no hop-by-hop or Proxy-*
// headers, no Expect, no header the proxy would add on its own (it adds no
// X-Forwarded-For, no Via and no default User-Agent). The upstream
// connection is used for this one request.
func outgoing(req *http.Request, h host, port int) *http.Request {
	out := req.Clone(req.Context())
	out.Body = req.Body
	removeHopHeaders(out.Header)
	out.Header.Del("Expect")
	if _, ok := out.Header["User-Agent"]; !ok {
		out.Header["User-Agent"] = []string{""} // keep Request.Write from adding Go's
	}
	out.Host = authority(h, port, 80)
	out.Close = true
	out.RequestURI = ""
	out.Proto, out.ProtoMajor, out.ProtoMinor = "HTTP/1.1", 1, 1
	return out
}

// ReadResponse reads an upstream's response to req as the proxy does,
// for another proxy that forwards as this one: 1xx interim responses are
// skipped (the proxy answers Expect itself), and a 101 is an error (the
// proxy removes Upgrade, so the upstream may not switch protocols).
func ReadResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	return readResponse(br, req)
}

// readResponse is ReadResponse.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Body.Close()
			return nil, errors.New("101 Switching Protocols without Upgrade")
		}
		if resp.StatusCode >= 200 {
			return resp, nil
		}
		resp.Body.Close()
	}
}

// prepareResponse removes hop-by-hop headers and picks the framing for the
// agent. It reports whether the agent connection can stay open after it.
func prepareResponse(resp *http.Response, req *http.Request) bool {
	removeHopHeaders(resp.Header)
	resp.Proto, resp.ProtoMajor, resp.ProtoMinor = "HTTP/1.1", 1, 1
	// The upstream connection is closed after every response anyway; its
	// Connection: close says nothing about the agent's connection.
	resp.Close = false
	chunked := len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked"
	noBody := req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent ||
		resp.StatusCode == http.StatusNotModified
	if !req.ProtoAtLeast(1, 1) {
		// An HTTP/1.0 agent cannot read chunks: send the body as it comes
		// and close.
		resp.TransferEncoding = nil
		resp.Close = true
	}
	if !noBody && resp.ContentLength < 0 && !chunked {
		resp.Close = true
	}
	if req.Close {
		resp.Close = true
	}
	return !resp.Close
}

// bufferedWriter is a bufio.Writer without ReadFrom: io.Copy into a
// bufio.Writer reads straight into its buffer, which a flush in
// flushBeforeRead would then pull from under it.
type bufferedWriter struct{ bw *bufio.Writer }

func (w bufferedWriter) Write(p []byte) (int, error)       { return w.bw.Write(p) }
func (w bufferedWriter) WriteString(s string) (int, error) { return w.bw.WriteString(s) }
func (w bufferedWriter) WriteByte(c byte) error            { return w.bw.WriteByte(c) }
func (w bufferedWriter) Flush() error                      { return w.bw.Flush() }

// flushBeforeRead flushes w before every read of the body, so that what
// was read before reaches its reader before the proxy blocks waiting for
// more (server-sent events, long polls, uploads).
type flushBeforeRead struct {
	io.ReadCloser
	w bufferedWriter
}

func (f flushBeforeRead) Read(p []byte) (int, error) {
	if f.w.bw.Buffered() > 0 {
		if err := f.w.Flush(); err != nil {
			return 0, err
		}
	}
	return f.ReadCloser.Read(p)
}

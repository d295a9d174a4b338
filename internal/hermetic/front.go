package hermetic

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/netutil"

	"github.com/proctor-sandbox/proctor/internal/netpolicy"
)

// backend is what a Recorder or a Replayer does with what the front
// accepted.
type backend interface {
	// tunnel decides a CONNECT to host:port: nil opens it.
	tunnel(host string, port int) *answer
	// exchange answers one request, filling in d (which the front reports
	// when exchange returns).
	exchange(w http.ResponseWriter, q *request, d *Decision)
}

// answer is a refusal to give a client.
type answer struct {
	status   int
	reason   string
	recorded bool // the recording holds this refusal
}

// request is one request a client made, read and checked.
type request struct {
	method  string
	scheme  string // "http" or "https"
	host    string // canonical (netpolicy.ParseHost)
	ip      netip.Addr
	port    int
	target  string // origin form, as sent
	url     string // the key's URL: scheme://authority + target
	accept  string
	header  http.Header // the client's
	body    []byte
	bodySHA string // "" for no body
}

func (q *request) key() key { return key{q.method, q.url, q.accept, q.bodySHA} }

// front is the proxy both sides share: an HTTP proxy server for plain
// requests in absolute form and for CONNECT, whose tunnels it ends with a
// certificate the CA signs for the host asked for, to read the requests
// inside with a second server.
type front struct {
	mode    Mode
	ca      *CA
	lim     Limits
	record  func(Decision)
	b       backend
	outer   *http.Server
	inner   *http.Server
	tunnels *connListener
	done    chan struct{} // the inner server has stopped
	ctx     context.Context
	cancel  context.CancelFunc

	mu       sync.Mutex
	closed   bool
	hijacked map[net.Conn]struct{}
	wg       sync.WaitGroup // Serve calls and handlers
}

func newFront(mode Mode, ca *CA, lim Limits, record func(Decision), b backend) (*front, error) {
	if record == nil {
		return nil, errors.New("hermetic: the Record callback is required")
	}
	if ca == nil {
		return nil, errors.New("hermetic: a CA is required")
	}
	if err := lim.fill(); err != nil {
		return nil, err
	}
	f := &front{mode: mode, ca: ca, lim: lim, record: record, b: b, hijacked: map[net.Conn]struct{}{},
		tunnels: newConnListener(), done: make(chan struct{})}
	f.ctx, f.cancel = context.WithCancel(context.Background())
	quiet := log.New(io.Discard, "", 0)
	f.outer = &http.Server{Handler: http.HandlerFunc(f.serveProxy), ReadHeaderTimeout: lim.HeaderTimeout,
		IdleTimeout: lim.IdleTimeout, MaxHeaderBytes: 32 << 10, ErrorLog: quiet, DisableGeneralOptionsHandler: true}
	f.inner = &http.Server{Handler: http.HandlerFunc(f.serveTunnel), ReadHeaderTimeout: lim.HeaderTimeout,
		IdleTimeout: lim.IdleTimeout, MaxHeaderBytes: 32 << 10, ErrorLog: quiet, DisableGeneralOptionsHandler: true,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if tc, ok := c.(*tunnelConn); ok {
				return context.WithValue(ctx, tunnelCtx{}, tc)
			}
			return ctx
		}}
	go func() {
		defer close(f.done)
		_ = f.inner.Serve(f.tunnels) // ends when the listener closes
	}()
	return f, nil
}

// Serve accepts proxy connections on l until Close, then returns nil. It
// returns ErrClosed when called after Close. Serve may be called for
// several listeners; Close closes them all.
func (f *front) Serve(l net.Listener) error {
	if !f.enter() {
		l.Close()
		return ErrClosed
	}
	defer f.wg.Done()
	err := f.outer.Serve(netutil.LimitListener(l, f.lim.MaxConns))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops every Serve, closes every connection, and returns once every
// Record call has returned. Calling it again waits the same way.
func (f *front) Close() error {
	f.mu.Lock()
	first := !f.closed
	f.closed = true
	var conns []net.Conn
	for c := range f.hijacked {
		conns = append(conns, c)
	}
	f.mu.Unlock()
	var err error
	if first {
		f.cancel()
		err = f.outer.Close()
		f.tunnels.Close()
		err = errors.Join(err, f.inner.Close())
		for _, c := range conns {
			c.Close()
		}
	}
	f.wg.Wait()
	<-f.done
	return err
}

func (f *front) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// enter counts a Serve or a handler that Close waits for; false once Close
// has begun.
func (f *front) enter() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.wg.Add(1)
	return true
}

func (f *front) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return false
	}
	f.hijacked[c] = struct{}{}
	return true
}

func (f *front) untrack(c net.Conn) {
	c.Close()
	f.mu.Lock()
	delete(f.hijacked, c)
	f.mu.Unlock()
}

// report completes d and hands it to the Record callback. Replaying, a
// refusal that is not the recording's own is a violation.
func (f *front) report(d *Decision) {
	d.Duration = time.Since(d.Time)
	d.Reason = clean(d.Reason)
	d.SNI = clean(d.SNI)
	d.URL = clean(d.URL)
	d.Violation = f.mode == ModeReplay && !d.Served && !d.Recorded
	f.record(*d)
}

// serveProxy serves what clients send the proxy: CONNECT, or a plain
// http:// request in absolute form.
func (f *front) serveProxy(w http.ResponseWriter, r *http.Request) {
	if !f.enter() {
		return
	}
	defer f.wg.Done()
	d := &Decision{Time: time.Now(), Mode: f.mode, Method: r.Method}
	if r.Method == http.MethodConnect {
		f.connect(w, r, d)
		return
	}
	q, err := plainRequest(r)
	if err != nil {
		f.refuse(w, d, http.StatusBadRequest, "bad request: "+err.Error())
		return
	}
	f.serveRequest(w, r, q, d)
}

// serveTunnel serves the requests inside a tunnel.
func (f *front) serveTunnel(w http.ResponseWriter, r *http.Request) {
	if !f.enter() {
		return
	}
	defer f.wg.Done()
	d := &Decision{Time: time.Now(), Mode: f.mode, Method: r.Method}
	tc, _ := r.Context().Value(tunnelCtx{}).(*tunnelConn)
	if tc == nil {
		f.refuse(w, d, http.StatusInternalServerError, "internal error: a request outside a tunnel")
		return
	}
	q, status, err := tunnelRequest(r, tc)
	if err != nil {
		f.refuse(w, d, status, err.Error())
		return
	}
	f.serveRequest(w, r, q, d)
}

func (f *front) serveRequest(w http.ResponseWriter, r *http.Request, q *request, d *Decision) {
	d.URL = q.url
	if err := q.readBody(r, f.lim.MaxRequestBody); err != nil {
		f.refuse(w, d, http.StatusRequestEntityTooLarge, err.Error())
		return
	}
	f.b.exchange(w, q, d)
	f.report(d)
}

// refuse answers a refusal of the front's own and reports it.
func (f *front) refuse(w http.ResponseWriter, d *Decision, status int, reason string) {
	d.Status, d.Reason = status, reason
	writeRefusal(w, status, reason)
	f.report(d)
}

// plainRequest reads a request sent to the proxy in absolute form.
func plainRequest(r *http.Request) (*request, error) {
	raw := r.RequestURI
	i := strings.Index(raw, "://")
	switch {
	case i < 0 || !r.URL.IsAbs() || r.URL.Host == "":
		return nil, fmt.Errorf("request target %q is not an absolute http:// URL; this is a proxy", clip(raw))
	case r.URL.Scheme != "http":
		return nil, fmt.Errorf("scheme %q not served; use CONNECT for https", clip(r.URL.Scheme))
	}
	rest := raw[i+3:]
	j := strings.IndexAny(rest, "/?")
	auth, target := rest, "/"
	if j >= 0 {
		auth, target = rest[:j], rest[j:]
		if target[0] == '?' {
			target = "/" + target
		}
	}
	if strings.Contains(auth, "@") {
		return nil, errors.New("user info in the URL")
	}
	return newRequest(r, "http", auth, 80, target)
}

// tunnelRequest reads a request inside a tunnel to tc's host and port:
// its Host, and its target if in absolute form, must name them.
func tunnelRequest(r *http.Request, tc *tunnelConn) (*request, int, error) {
	target := r.RequestURI
	want := authorityOf(tc.host, tc.port, 443)
	if !strings.HasPrefix(target, "/") {
		rest, ok := strings.CutPrefix(target, "https://")
		j := strings.IndexByte(rest, '/')
		if !ok || j < 0 {
			return nil, http.StatusBadRequest, fmt.Errorf("bad request: request target %q", clip(target))
		}
		if h, p, err := splitAuthority(rest[:j], 443); err != nil || h != tc.host || p != tc.port {
			return nil, http.StatusMisdirectedRequest, fmt.Errorf("request for %q inside the tunnel to %s", clip(rest[:j]), want)
		}
		target = rest[j:]
	}
	if h, p, err := splitAuthority(r.Host, 443); err != nil || h != tc.host || p != tc.port {
		return nil, http.StatusMisdirectedRequest, fmt.Errorf("Host %q inside the tunnel to %s", clip(r.Host), want)
	}
	q, err := newRequest(r, "https", want, 443, target)
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("bad request: %v", err)
	}
	return q, 0, nil
}

func newRequest(r *http.Request, scheme, auth string, def int, target string) (*request, error) {
	h, p, err := splitAuthority(auth, def)
	if err != nil {
		return nil, fmt.Errorf("host %q: %v", clip(auth), err)
	}
	if !validTarget(target) || len(target) > maxURLBytes-300 {
		return nil, fmt.Errorf("request target %q", clip(target))
	}
	accept := strings.Join(r.Header.Values("Accept"), ", ")
	if len(accept) > maxAccept || !printable(accept) {
		return nil, errors.New("Accept header not printable ASCII of at most 1 KiB")
	}
	_, ip, _ := netpolicy.ParseHost(h)
	return &request{method: r.Method, scheme: scheme, host: h, ip: ip, port: p, target: target,
		url: scheme + "://" + authorityOf(h, p, def) + target, accept: accept, header: r.Header}, nil
}

// readBody reads the request body, at most max bytes, and its digest.
func (q *request) readBody(r *http.Request, max int64) error {
	b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	switch {
	case err != nil:
		return fmt.Errorf("bad request: reading the body: %v", err)
	case int64(len(b)) > max:
		return fmt.Errorf("request body over %d bytes", max)
	}
	if len(b) > 0 {
		sum := sha256.Sum256(b)
		q.body, q.bodySHA = b, hex.EncodeToString(sum[:])
	}
	return nil
}

// connect serves a CONNECT: the backend decides on host:port; an open
// tunnel is answered 200, its TLS ended with a certificate for the host
// (whose server name must be the host), and its connection handed to
// the inner server.
func (f *front) connect(w http.ResponseWriter, r *http.Request, d *Decision) {
	host, port, err := splitAuthority(r.RequestURI, 0)
	if err != nil {
		f.refuse(w, d, http.StatusBadRequest, fmt.Sprintf("bad request: CONNECT target %q: %v", clip(r.RequestURI), err))
		return
	}
	d.URL = tunnelKey(host, port)
	if a := f.b.tunnel(host, port); a != nil {
		d.Recorded = a.recorded
		f.refuse(w, d, a.status, a.reason)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		f.refuse(w, d, http.StatusInternalServerError, "internal error: cannot take the connection")
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		d.Reason = "taking the connection: " + err.Error()
		f.report(d)
		return
	}
	if !f.track(conn) {
		conn.Close()
		return
	}
	_ = conn.SetDeadline(time.Now().Add(f.lim.HelloTimeout))
	var in net.Conn = conn
	if n := brw.Reader.Buffered(); n > 0 {
		b, _ := brw.Reader.Peek(n)
		in = &prefixConn{Conn: conn, prefix: bytes.NewReader(bytes.Clone(b))}
	}
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		f.untrack(conn)
		d.Reason = "client: " + err.Error()
		f.report(d)
		return
	}
	tlsConn := tls.Server(in, &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			d.SNI = h.ServerName
			if err := checkSNI(host, h.ServerName); err != nil {
				return nil, err
			}
			return f.ca.leaf(host)
		},
	})
	if err := tlsConn.HandshakeContext(f.ctx); err != nil {
		f.untrack(conn)
		d.Reason = "TLS handshake: " + err.Error()
		f.report(d)
		return
	}
	_ = conn.SetDeadline(time.Time{})
	d.Served = true
	f.report(d)
	if !f.tunnels.push(&tunnelConn{Conn: tlsConn, raw: conn, host: host, port: port, f: f}) {
		f.untrack(conn)
	}
}

// checkSNI checks a tunnel's TLS server name against its CONNECT host: for
// a name, present and the same; for an IP literal, absent or the same.
func checkSNI(host, sni string) error {
	if sni == "" {
		if strings.HasPrefix(host, "[") || isIPv4(host) {
			return nil
		}
		return fmt.Errorf("no TLS server name (SNI) for CONNECT host %s", host)
	}
	s := sni
	if strings.Contains(s, ":") && !strings.HasPrefix(s, "[") {
		s = "[" + s + "]"
	}
	if h, _, err := netpolicy.ParseHost(s); err != nil || h != host {
		return fmt.Errorf("TLS server name %q is not the CONNECT host %s", clip(sni), host)
	}
	return nil
}

func isIPv4(h string) bool {
	a, err := netip.ParseAddr(h)
	return err == nil && a.Is4()
}

// tunnelCtx is the context key of a tunnel's *tunnelConn.
type tunnelCtx struct{}

// tunnelConn is a tunnel's TLS connection, with the host and port the
// client asked for. Closing it forgets the raw connection.
type tunnelConn struct {
	*tls.Conn
	raw  net.Conn
	host string
	port int
	f    *front
	once sync.Once
}

func (c *tunnelConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.f.untrack(c.raw) })
	return err
}

// prefixConn reads the bytes a server read ahead before the connection.
type prefixConn struct {
	net.Conn
	prefix *bytes.Reader
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if c.prefix.Len() > 0 {
		return c.prefix.Read(p)
	}
	return c.Conn.Read(p)
}

// connListener hands tunnels to the inner server.
type connListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnListener() *connListener {
	return &connListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *connListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *connListener) Addr() net.Addr { return tunnelAddr{} }

type tunnelAddr struct{}

func (tunnelAddr) Network() string { return "tunnel" }
func (tunnelAddr) String() string  { return "tunnel" }

// clean makes text that may quote a client fit for a Decision or a
// recorded refusal, as netpolicy does its own.
func clean(s string) string { return netpolicy.Clean(s) }

// clip shortens what a client sent for a message.
func clip(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

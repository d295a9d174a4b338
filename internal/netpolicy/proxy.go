package netpolicy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Decision is the record of one CONNECT tunnel, one plain HTTP request or
// one direct connection to a loopback forwarder (ServeLoopback), reported
// through Options.Record when it ends. A connection to the proxy closed
// before it sent a single byte is not a request and gets no Decision; one
// closed in the middle of a request header gets a "bad request: ..."
// Decision. Every connection to a forwarder gets one.
type Decision struct {
	Time    time.Time // when the request header had been read (for a bad request: when reading it failed)
	Allowed bool      // the request passed every check and the proxy connected upstream
	Method  string    // "CONNECT", the HTTP method ("" for a request too malformed to have one), or MethodDirect
	Host    string    // the host asked for: a name in lower case, a dotted quad, a bracketed IPv6 address; "" if unparsable; for MethodDirect the forwarder's address
	Port    int
	Rule    string // the allow-list entry that matched, canonical (Rule.String); "" when none did
	Addr    string // the upstream ip:port dialled; "" when nothing was dialled
	// Reason says why a request was denied or, for an allowed one, why it
	// ended abnormally ("dial: ...", "upstream: ..."); "" when it was
	// allowed and ended normally. Examples: "not on the allow-list",
	// "IP literal not allowed", `SNI "x" does not match CONNECT host "y"`,
	// "resolves to a private address 10.0.0.1", "metadata address
	// 169.254.169.254", "dns: ...", "dial: ...", "bad request: ...".
	Reason string
	SNI    string // the server name of a tunnel's TLS ClientHello; "" if none
	// BytesUp and BytesDown count the bytes the proxy wrote upstream and
	// to the agent after the decision: all tunnel or forwarded bytes (the
	// ClientHello included), or a plain HTTP request and its response with
	// their headers. Proxy error responses are not counted.
	BytesUp, BytesDown int64
	Duration           time.Duration // from Time until the request or tunnel ended
}

// Options configure a Proxy. Record is required; a zero value of the
// others means the default given.
type Options struct {
	// Allow is the allow-list. Empty allows nothing.
	Allow AllowList

	// HostMap sends a name the policy allowed to the operator's address
	// for it, as curl --resolve does: the decision is still made on the
	// name (and recorded with it), the name is not looked up, and the
	// address, the operator's own, is dialled as given (a mirror, a test's
	// server on loopback). A zero port keeps the port asked for. Names are
	// lower case, without a trailing dot.
	HostMap HostMap

	// Open allows what no rule of Allow matches as a wildcard rule would,
	// on any port: any name or IP literal whose addresses are public. The
	// metadata, loopback, private, link-local and host addresses stay
	// refused, and every request is decided and recorded as ever (with
	// the rule "*"). An operator's choice, never a task's.
	Open bool

	// Record receives one Decision per CONNECT or plain HTTP request, when
	// it ends, including those cut short by Close. It is called from many
	// goroutines at once and must not block for long; Close waits for
	// every call to return.
	Record func(Decision)

	// Resolve looks up a name. Default: net.DefaultResolver.LookupNetIP
	// with network "ip". It is called once per request; the proxy dials
	// only the addresses it returned and checked. It must return when ctx
	// is done: Close cancels it, then waits.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)

	// Dial connects to an "ip:port" (never a name) over "tcp". Default: a
	// net.Dialer. Like Resolve it must honour ctx. A connection with a
	// CloseWrite method (as *net.TCPConn has) gets an agent's half-close
	// passed on; one without is closed when either side ends.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// HostAddrs are the host's own addresses, refused to wildcard rules.
	// Default (nil): the addresses of net.InterfaceAddrs at New. An
	// empty, non-nil slice means none.
	HostAddrs []netip.Addr

	HeaderTimeout  time.Duration // to read one request header; default 30s
	HelloTimeout   time.Duration // for a tunnel's first bytes and whole ClientHello; default 10s
	DialTimeout    time.Duration // for resolving and dialling; default 10s
	IdleTimeout    time.Duration // without bytes in either direction, or between requests; default 5m
	MaxHeaderBytes int           // request line and header, plus 4 KiB of read-ahead as in net/http; default 32 KiB
	MaxConns       int           // connections served at once (more wait in the listen backlog); default 256
}

// Proxy is an allow-list HTTP proxy. Make one with New, serve listeners
// with Serve, and stop it with Close. Its methods are safe for concurrent
// use; its configuration does not change after New.
type Proxy struct {
	o      Options
	check  addrCheck
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	sem    chan struct{} // one token per connection being served
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	listeners map[net.Listener]struct{}
	conns     map[net.Conn]struct{} // agent and upstream connections
}

// New checks o, fills in defaults and returns a Proxy that is not yet
// serving.
func New(o Options) (*Proxy, error) {
	if o.Record == nil {
		return nil, errors.New("netpolicy: Options.Record is required")
	}
	if o.HeaderTimeout < 0 || o.HelloTimeout < 0 || o.DialTimeout < 0 || o.IdleTimeout < 0 ||
		o.MaxHeaderBytes < 0 || o.MaxConns < 0 {
		return nil, errors.New("netpolicy: negative timeout or limit in Options")
	}
	setDefault(&o.HeaderTimeout, 30*time.Second)
	setDefault(&o.HelloTimeout, 10*time.Second)
	setDefault(&o.DialTimeout, 10*time.Second)
	setDefault(&o.IdleTimeout, 5*time.Minute)
	setDefault(&o.MaxHeaderBytes, 32<<10)
	setDefault(&o.MaxConns, 256)
	if o.Resolve == nil {
		o.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if o.Dial == nil {
		d := &net.Dialer{Timeout: o.DialTimeout}
		o.Dial = d.DialContext
	}
	if o.HostAddrs == nil {
		addrs, err := interfaceAddrs()
		if err != nil {
			return nil, err
		}
		o.HostAddrs = addrs
	}
	o.Allow = append(AllowList(nil), o.Allow...)
	check := newAddrCheck(o.HostAddrs)
	ctx, cancel := context.WithCancel(context.Background())
	return &Proxy{
		o:         o,
		check:     check,
		ctx:       ctx,
		cancel:    cancel,
		sem:       make(chan struct{}, o.MaxConns),
		listeners: make(map[net.Listener]struct{}),
		conns:     make(map[net.Conn]struct{}),
	}, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Serve accepts connections on l and serves each in its own goroutine
// until Close, then returns nil. It returns ErrClosed when called after
// Close, and the accept error when l fails for another reason than a
// transient shortage (EMFILE, ENFILE, ENOBUFS, ENOMEM, ECONNABORTED),
// which it waits out. Serve may be called for several listeners; Close
// closes them all.
func (p *Proxy) Serve(l net.Listener) error {
	return p.serve(l, p.serveConn)
}

// serve accepts connections on l until Close and hands each to handle, in
// a goroutine of its own, under the MaxConns limit (see Serve).
func (p *Proxy) serve(l net.Listener, handle func(net.Conn)) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = l.Close()
		return ErrClosed
	}
	p.listeners[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.listeners, l)
		p.mu.Unlock()
	}()

	var backoff time.Duration
	for {
		select {
		case p.sem <- struct{}{}:
		case <-p.ctx.Done():
			return nil
		}
		c, err := l.Accept()
		if err != nil {
			<-p.sem
			if p.ctx.Err() != nil {
				return nil
			}
			if !transient(err) {
				return fmt.Errorf("netpolicy: accept: %w", err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			select {
			case <-time.After(backoff):
			case <-p.ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		if !p.track(c, true) {
			_ = c.Close()
			<-p.sem
			return nil
		}
		go func() {
			defer p.wg.Done()
			defer func() { <-p.sem }()
			defer p.untrack(c)
			handle(c)
		}()
	}
}

func transient(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, e) {
			return true
		}
	}
	return isTimeout(err)
}

// Close stops every Serve, closes every open connection, and returns
// when every Record call has returned. Tunnels and requests cut short are
// recorded. Calling Close again waits the same way and returns nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	p.cancel() // before closing listeners: Serve tells Close from failure by p.ctx
	var errs []error
	for l := range p.listeners {
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return errors.Join(errs...)
}

// track registers c so that Close closes it. It returns false, and does
// not register c, once Close has begun. With handler set it also counts
// a goroutine that Close waits for.
func (p *Proxy) track(c net.Conn, handler bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	if handler {
		p.wg.Add(1)
	}
	return true
}

// untrack closes c and forgets it.
func (p *Proxy) untrack(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// agentConn is one agent connection: the connection and the reader
// requests are parsed from. Used by one goroutine at a time.
type agentConn struct {
	raw *meteredConn
	br  *bufio.Reader
}

// serveConn reads requests from one agent connection until it ends.
func (p *Proxy) serveConn(c net.Conn) {
	raw := &meteredConn{Conn: c}
	lim := &headerLimit{r: raw, limit: -1}
	ac := &agentConn{raw: raw, br: bufio.NewReaderSize(lim, 4096)}
	for first := true; ; first = false {
		if !first {
			// Wait for the next request on a kept-alive connection.
			_ = c.SetReadDeadline(time.Now().Add(p.o.IdleTimeout))
			if _, err := ac.br.Peek(1); err != nil {
				return
			}
		}
		_ = c.SetDeadline(time.Now().Add(p.o.HeaderTimeout))
		mark := lim.n - int64(ac.br.Buffered())
		lim.limit = int64(p.o.MaxHeaderBytes) + 4096 - int64(ac.br.Buffered())
		req, err := http.ReadRequest(ac.br)
		tooLarge := lim.hit
		lim.limit, lim.hit = -1, false
		if err != nil {
			if lim.n > mark || ac.br.Buffered() > 0 {
				p.badRequest(ac, err, tooLarge)
			}
			return
		}
		_ = c.SetDeadline(time.Time{})
		if req.Method == http.MethodConnect {
			p.serveConnect(ac, req)
			return
		}
		if !p.serveHTTP(ac, req) {
			return
		}
	}
}

// badRequest answers and records a request header that could not be read.
func (p *Proxy) badRequest(ac *agentConn, err error, tooLarge bool) {
	d := Decision{Time: time.Now()}
	status, reason := http.StatusBadRequest, "bad request: "+err.Error()
	switch {
	case tooLarge:
		status, reason = http.StatusRequestHeaderFieldsTooLarge, "bad request: header larger than "+fmt.Sprint(p.o.MaxHeaderBytes)+" bytes"
	case isTimeout(err):
		status, reason = http.StatusRequestTimeout, "bad request: header not received within "+p.o.HeaderTimeout.String()
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed):
		reason = "bad request: connection closed in the request header"
	}
	p.deny(ac, &d, status, reason)
	p.record(d)
}

// deny marks d denied with reason and answers the agent with status and
// the reason. The connection is to be closed afterwards.
func (p *Proxy) deny(ac *agentConn, d *Decision, status int, reason string) {
	d.Allowed = false
	d.Reason = clean(reason)
	p.writeError(ac, status, d.Reason)
}

// writeError answers the agent with status and reason as plain text, and
// Connection: close.
func (p *Proxy) writeError(ac *agentConn, status int, reason string) {
	body := "proctor proxy: " + reason + "\n"
	msg := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	ac.raw.stopIdle()
	_ = ac.raw.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_, _ = io.WriteString(ac.raw.Conn, msg)
}

// record completes d and hands it to Options.Record.
func (p *Proxy) record(d Decision) {
	if !d.Time.IsZero() {
		d.Duration = time.Since(d.Time)
	}
	p.o.Record(d)
}

const maxReason = 256

// Clean makes text that may quote what a client sent fit for a record,
// as every text of a Decision is: printable ASCII ('?' for anything
// else), at most 256 bytes and "...".
func Clean(s string) string { return clean(s) }

// clean is Clean.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r >= 0x7f {
			return '?'
		}
		return r
	}, s)
	if len(s) > maxReason {
		s = s[:maxReason] + "..."
	}
	return s
}

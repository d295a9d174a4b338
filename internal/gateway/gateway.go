package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"
)

// Limits on what the agent can make a Gateway hold.
const (
	maxRequestBody  = 32 << 20  // one request body (413 beyond)
	maxBufferedBody = 256 << 20 // all request bodies being held at once (503 beyond)
	maxConns        = 512       // connections from the agent at once (more wait)
	maxHeaderBytes  = 256 << 10
)

// Options configure New.
type Options struct {
	// Spec is the provider to stand in for.
	Spec Spec
	// Key is the real key, which the agent must never see. Required, but
	// when replaying: at least 8 bytes of printable ASCII, none of space and
	// []"\<>&.
	Key string
	// Transport sends the requests upstream. Nil means a clone of
	// http.DefaultTransport without proxy (the host's HTTPS_PROXY is not
	// used), whose idle connections Close closes; a Transport given here is
	// the caller's to clean up. It must not follow redirects (an
	// http.RoundTripper never does) and must not add credentials.
	Transport http.RoundTripper
	// Record, if not nil, is called once per request with its Call, from the
	// goroutine serving it: so concurrently, and it must be safe for that.
	// A slow Record delays the end of that request only.
	Record func(Call)
	// Inspect, if not nil, is called once per request whose body was read,
	// from the goroutine serving it, before the request is taken further
	// (relayed, replayed or refused): with the Call so far (Gateway,
	// Method, Path, Model, RequestSHA256, BytesUp) and the body, which it
	// must neither keep nor modify. The writer it returns, if not nil, is
	// given the response body as the agent is sent it (decoded, scrubbed,
	// the gateway's own error bodies included) and closed once the call
	// is over, before Record; its errors are ignored. Concurrent, like
	// Record; a slow Inspect delays that request only.
	Inspect func(c Call, body []byte) io.WriteCloser
	// Tape, if not nil, records every request the Gateway serves, relayed
	// or refused (record mode): a Tape from NewTape, shared by the
	// Gateways of one trial. See "Recording and replay".
	Tape *Tape
	// Replay, if not nil, answers each request from a recording, a Tape
	// from ReadTape shared by the Gateways of one trial, instead of the
	// upstream (replay mode): Key is then optional (if given, it is
	// scrubbed from what is replayed) and Transport is never used; nothing
	// is sent anywhere. Not with Tape.
	Replay *Tape
}

// A Gateway relays requests from the agent to one provider, adding the real
// key; see the package documentation for the rules. Its methods are safe for
// concurrent use.
type Gateway struct {
	spec      Spec
	prefix    string // Spec.prefix()
	key       string
	transport http.RoundTripper
	own       *http.Transport // transport, when New made it
	record    func(Call)
	inspect   func(Call, []byte) io.WriteCloser
	tape      *Tape // Options.Tape: record mode
	replay    *Tape // Options.Replay: replay mode
	srv       *http.Server
	ctx       context.Context // cancelled by Close: cuts upstream requests
	cancel    context.CancelFunc
	maxBody   int            // maxRequestBody; tests lower it
	maxHeld   int64          // maxBufferedBody; tests lower it
	buffered  atomic.Int64   // request body bytes being held
	calls     sync.WaitGroup // requests being served

	mu     sync.Mutex
	closed bool
	usage  map[string]*Usage // by model
}

// New checks o and makes a Gateway; call Serve to start it.
func New(o Options) (*Gateway, error) {
	if reason := o.Spec.problem(); reason != "" {
		return nil, specError(o.Spec.Name, reason)
	}
	if err := checkTapes(o); err != nil {
		return nil, err
	}
	if o.Replay == nil || o.Key != "" {
		if err := checkKey(o.Spec.Name, o.Key); err != nil {
			return nil, err
		}
	}
	g := &Gateway{
		spec:      o.Spec,
		prefix:    o.Spec.prefix(),
		key:       o.Key,
		transport: o.Transport,
		record:    o.Record,
		inspect:   o.Inspect,
		tape:      o.Tape,
		replay:    o.Replay,
		maxBody:   maxRequestBody,
		maxHeld:   maxBufferedBody,
		usage:     make(map[string]*Usage),
	}
	if g.replay != nil {
		g.transport = nil // never used: no network
	} else if g.transport == nil {
		t, ok := http.DefaultTransport.(*http.Transport)
		if ok {
			t = t.Clone()
		} else {
			t = &http.Transport{ForceAttemptHTTP2: true}
		}
		t.Proxy = nil
		g.own, g.transport = t, t
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.srv = &http.Server{
		Handler:           http.HandlerFunc(g.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute, // headers and body; responses may stream for long
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    maxHeaderBytes,
		// "OPTIONS *" comes to serveHTTP, to be refused and recorded.
		DisableGeneralOptionsHandler: true,
		BaseContext:                  func(net.Listener) context.Context { return g.ctx },
		// The agent can provoke server errors at will; they are its own.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	return g, nil
}

// Serve accepts connections on l and serves them until Close, after which it
// returns nil; it closes l. It may be called for several listeners.
func (g *Gateway) Serve(l net.Listener) error {
	err := g.srv.Serve(netutil.LimitListener(l, maxConns))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops the Gateway: it closes the listeners and connections, cuts the
// requests being relayed, and returns once every one of them has been
// recorded. Later requests are refused unrecorded. Calling it again is
// harmless.
func (g *Gateway) Close() error {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.cancel()
	err := g.srv.Close()
	g.calls.Wait()
	if g.own != nil {
		g.own.CloseIdleConnections()
	}
	return err
}

// enter counts a request in, unless the Gateway is closed.
func (g *Gateway) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.calls.Add(1)
	return true
}

// exchange is one request being served: its record and what the agent was
// sent.
type exchange struct {
	call  Call
	start time.Time
	sink  *sink

	// With a Tape or a Replay:
	target string    // the target as the tape has it (see takeTurn)
	taped  bool      // takeTurn was called
	tc     *tapeCall // recording: x's call; replaying: the recorded call x matched
	cut    bool      // the gateway cut the response on purpose
}

func (g *Gateway) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !g.enter() {
		w.Header().Set("Connection", "close")
		http.Error(w, "gateway closed", http.StatusServiceUnavailable)
		return
	}
	defer g.calls.Done()
	x := &exchange{
		call:  Call{Gateway: g.spec.Name, Method: r.Method, Path: targetPath(r)},
		start: time.Now(),
		sink:  &sink{w: w, rc: http.NewResponseController(w), h: sha256.New()},
	}
	x.call.Time = x.start
	x.target = tapeString(x.call.Path) // until admit has passed the target

	defer g.finish(x) // runs also when relay aborts the response with a panic
	g.relay(w, r, x)
}

// finish completes x's record and reports it.
func (g *Gateway) finish(x *exchange) {
	c := &x.call
	c.Latency = time.Since(x.start)
	c.ResponseSHA256 = hex.EncodeToString(x.sink.h.Sum(nil))
	c.BytesDown = x.sink.n
	if m := x.sink.m; m != nil {
		model, t := m.result()
		if c.Model == "" {
			c.Model = model
		}
		c.InputTokens, c.OutputTokens, c.TotalTokens = t.input, t.output, t.total
		c.CacheReadTokens, c.CacheWriteTokens = t.cacheRead, t.cacheWrite
	}
	g.tapeEnd(x)
	if x.sink.look != nil {
		x.sink.look.Close()
	}
	g.tally(c)
	if g.record != nil {
		g.record(*c)
	}
}

// maxPathLen bounds Call.Path.
const maxPathLen = 2 << 10

// targetPath is what Call.Path records of r's target.
func targetPath(r *http.Request) string {
	p := r.URL.Path
	if r.URL.Host != "" || r.URL.Scheme != "" || r.URL.Opaque != "" || r.RequestURI == "" || r.RequestURI[0] != '/' {
		p = r.RequestURI
	}
	if len(p) > maxPathLen {
		p = p[:maxPathLen]
	}
	return p
}

// A sink is where the agent's response body goes: it hashes, counts and
// meters what it writes. Not safe for concurrent use.
type sink struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	h   hash.Hash
	n   int64
	m   *meter // nil: do not meter
	tee *tee   // nil: do not record
	// look is what Options.Inspect returned: it sees what the agent got.
	look io.WriteCloser
	err  error // the first write error: the client is gone
}

func (s *sink) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(p)
	s.h.Write(p[:n])
	s.n += int64(n)
	if s.m != nil {
		s.m.Write(p[:n])
	}
	if s.tee != nil {
		s.tee.write(p[:n])
	}
	if s.look != nil {
		s.look.Write(p[:n])
	}
	if err != nil {
		s.err = err
	}
	return n, err
}

// flush sends what was written so far.
func (s *sink) flush() error {
	if s.err != nil {
		return s.err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		s.err = err
	}
	return s.err
}

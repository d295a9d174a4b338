package gateway

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testKey is the real key in tests. The agent must never see it.
const testKey = "sk-real-KEY-0123456789abcdefXYZ"

// recorder collects the Calls a Gateway reports.
type recorder struct {
	slow  atomic.Bool // Record takes its time: Close must wait for it
	mu    sync.Mutex
	calls []Call
	added chan struct{}
}

func newRecorder() *recorder { return &recorder{added: make(chan struct{}, 1)} }

func (r *recorder) record(c Call) {
	if r.slow.Load() {
		time.Sleep(100 * time.Millisecond)
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	select {
	case r.added <- struct{}{}:
	default:
	}
}

func (r *recorder) snapshot() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// wait returns the calls once there are n, failing after 10s. It then checks
// that no more come within a moment: each request is recorded once.
func (r *recorder) wait(t testing.TB, n int) []Call {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for len(r.snapshot()) < n {
		select {
		case <-r.added:
		case <-deadline:
			t.Fatalf("%d calls recorded, want %d", len(r.snapshot()), n)
		}
	}
	time.Sleep(20 * time.Millisecond)
	calls := r.snapshot()
	if len(calls) != n {
		t.Fatalf("%d calls recorded, want exactly %d: %+v", len(calls), n, calls)
	}
	return calls
}

// config says how newHarness sets up a gateway.
type config struct {
	name string // gateway name, "openai" if empty
	path string // upstream path
	tls  bool
	tune func(*Gateway) // called before Serve
}

// harness is a gateway in front of an httptest upstream.
type harness struct {
	g      *Gateway
	up     *httptest.Server
	rec    *recorder
	addr   string // the gateway's listen address
	base   string // BaseURL
	client *http.Client
	once   sync.Once
	served chan error
	err    error
}

func newHarness(t testing.TB, cfg config, h http.HandlerFunc) *harness {
	t.Helper()
	up := httptest.NewUnstartedServer(h)
	if cfg.tls {
		up.StartTLS()
	} else {
		up.Start()
	}
	t.Cleanup(up.Close)
	u, err := url.Parse(up.URL + cfg.path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.name == "" {
		cfg.name = "openai"
	}
	o := Options{Spec: Spec{Name: cfg.name, Upstream: u}, Key: testKey}
	if cfg.tls {
		o.Transport = up.Client().Transport
	}
	return startGateway(t, o, cfg.tune, up)
}

func startGateway(t testing.TB, o Options, tune func(*Gateway), up *httptest.Server) *harness {
	t.Helper()
	rec := newRecorder()
	o.Record = rec.record
	g, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	if tune != nil {
		tune(g)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &harness{g: g, up: up, rec: rec, addr: l.Addr().String(), served: make(chan error, 1)}
	hs.base = o.Spec.BaseURL(hs.addr)
	go func() { hs.served <- g.Serve(l) }()
	hs.client = &http.Client{
		Transport:     &http.Transport{DisableCompression: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	t.Cleanup(func() {
		if err := hs.close(); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	t.Cleanup(hs.client.CloseIdleConnections)
	return hs
}

// close closes the gateway and returns what Serve returned.
func (hs *harness) close() error {
	hs.once.Do(func() {
		hs.g.Close()
		hs.err = <-hs.served
	})
	return hs.err
}

// do sends a request through the gateway and reads the whole answer.
func (hs *harness) do(t testing.TB, method, path string, body []byte, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+hs.addr+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := hs.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// raw writes a request as bytes on a fresh connection to addr and returns
// everything the server sent until it closed the connection.
func raw(t testing.TB, addr, request string) []byte {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", request, err)
	}
	return b
}

// parse reads the first response out of what raw returned.
func parse(t testing.TB, b []byte) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
	if err != nil {
		t.Fatalf("parsing %q: %v", b, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("parsing the body of %q: %v", b, err)
	}
	return resp, body
}

// noKey fails if b holds the real key, in any case.
func noKey(t testing.TB, what string, b []byte) {
	t.Helper()
	if bytes.Contains(bytes.ToLower(b), bytes.ToLower([]byte(testKey))) {
		t.Errorf("%s holds the real key: %q", what, b)
	}
}

// noKeyInCalls fails if a recorded call holds the real key.
func noKeyInCalls(t testing.TB, calls []Call) {
	t.Helper()
	for _, c := range calls {
		noKey(t, "a recorded call", []byte(c.Path+" "+c.Model+" "+c.Error))
	}
}

// seenRequest is what an upstream saw of a request.
type seenRequest struct {
	Method, Host, URI string
	Header            http.Header
	Body              []byte
}

// spy is an upstream handler that keeps what it saw and answers with answer.
type spy struct {
	mu     sync.Mutex
	seen   []seenRequest
	hits   atomic.Int64
	answer http.HandlerFunc
}

func (s *spy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hits.Add(1)
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.seen = append(s.seen, seenRequest{r.Method, r.Host, r.RequestURI, r.Header.Clone(), body})
	s.mu.Unlock()
	if s.answer != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.answer(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true}`)
}

func (s *spy) last(t testing.TB) seenRequest {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	return s.seen[len(s.seen)-1]
}

// jsonBody is a JSON object of exactly n bytes (n >= 10).
func jsonBody(n int) []byte {
	return []byte(`{"p":"` + strings.Repeat("x", n-len(`{"p":""}`)) + `"}`)
}

// hostOf is host:port of an httptest server.
func hostOf(s *httptest.Server) string {
	return strings.TrimPrefix(strings.TrimPrefix(s.URL, "http://"), "https://")
}

package netpolicy

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// headerServer answers with the method, target, Host and body it
// received, keeps each request for inspection, and sets hop-by-hop
// headers of its own that the proxy must drop.
func headerServer(t *testing.T) (*httptest.Server, *sync.Map) {
	seen := new(sync.Map)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.URL.Path, r.Clone(r.Context()))
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://evil.test/", http.StatusFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Proxy-Authenticate", "Basic")
		w.Header().Set("X-End-To-End", "kept")
		fmt.Fprintf(w, "%s %s host=%s body=%q", r.Method, r.RequestURI, r.Host, body)
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, seen
}

func TestHTTPForward(t *testing.T) {
	srv, seen := headerServer(t)
	tp := startProxy(t, env{
		allow:    []string{"api.provider.test"},
		names:    map[string][]string{"api.provider.test": {"127.0.0.1"}, "evil.test": {"127.0.0.1"}},
		redirect: srv.Listener.Addr().String(),
	})
	c := tp.dialProxy(t)
	br := bufio.NewReader(c)
	send := func(req string) *http.Response {
		t.Helper()
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	// 1: hop-by-hop and proxy headers go, Host comes from the URL.
	resp := send("GET http://api.provider.test/echo?x=1 HTTP/1.1\r\n" +
		"Host: evil.test\r\n" +
		"Connection: keep-alive, X-Secret\r\n" +
		"X-Secret: s\r\n" +
		"Proxy-Authorization: Basic dXNlcjpwdw==\r\n" +
		"Proxy-Connection: keep-alive\r\n" +
		"Keep-Alive: 300\r\n" +
		"Te: trailers\r\n" +
		"Upgrade: h2c\r\n" +
		"X-Keep: yes\r\n\r\n")
	body := readAll(resp.Body)
	if resp.StatusCode != 200 || body != `GET /echo?x=1 host=api.provider.test body=""` {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	v, _ := seen.Load("/echo")
	got := v.(*http.Request).Header
	if c := got.Values("Connection"); len(c) != 1 || c[0] != "close" {
		t.Errorf("upstream got Connection: %q, want only the proxy's own close", c)
	}
	for _, k := range []string{"X-Secret", "Proxy-Authorization", "Proxy-Connection", "Keep-Alive", "Te", "Upgrade",
		"X-Forwarded-For", "X-Forwarded-Host", "Forwarded", "Via", "User-Agent"} {
		if vs, ok := got[k]; ok {
			t.Errorf("upstream got %s: %q", k, vs)
		}
	}
	if got.Get("X-Keep") != "yes" {
		t.Errorf("X-Keep lost: %v", got)
	}
	for _, k := range []string{"Keep-Alive", "Proxy-Authenticate"} {
		if vs, ok := resp.Header[k]; ok {
			t.Errorf("agent got %s: %q", k, vs)
		}
	}
	if resp.Header.Get("X-End-To-End") != "kept" || resp.Close {
		t.Errorf("response headers %v, close %v", resp.Header, resp.Close)
	}

	// 2: a POST on the same connection, decided and recorded on its own.
	resp = send("POST http://API.provider.test./post HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	if body := readAll(resp.Body); resp.StatusCode != 200 || body != `POST /post host=api.provider.test body="hello"` {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}

	// 3: a redirect is passed on, not followed.
	resp = send("GET http://api.provider.test/redirect HTTP/1.1\r\n\r\n")
	if _ = readAll(resp.Body); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "http://evil.test/" {
		t.Fatalf("redirect: %d %v", resp.StatusCode, resp.Header)
	}

	// 4: the next request on the same connection goes to a host off the list.
	resp = send("GET http://evil.test/steal HTTP/1.1\r\nHost: api.provider.test\r\n\r\n")
	if body := readAll(resp.Body); resp.StatusCode != 403 || !strings.Contains(body, "not on the allow-list") {
		t.Fatalf("evil: %d %q", resp.StatusCode, body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("connection not closed after the denial: %v", err)
	}
	if _, ok := seen.Load("/steal"); ok {
		t.Errorf("the denied request reached the upstream")
	}

	recs := tp.rec.wait(t, 4)
	want := []struct {
		allowed bool
		method  string
		host    string
	}{{true, "GET", "api.provider.test"}, {true, "POST", "api.provider.test"}, {true, "GET", "api.provider.test"}, {false, "GET", "evil.test"}}
	for i, w := range want {
		d := recs[i]
		if d.Allowed != w.allowed || d.Method != w.method || d.Host != w.host || d.Port != 80 {
			t.Errorf("decision %d: %+v, want %+v", i, d, w)
		}
		if d.Allowed && (d.Addr != "127.0.0.1:80" || d.BytesUp == 0 || d.BytesDown == 0) {
			t.Errorf("decision %d: %+v: want addr and bytes", i, d)
		}
	}
	if tp.dialled.Load() != 3 || tp.lookups.Load() != 3 {
		t.Errorf("%d dials and %d lookups, want 3 and 3", tp.dialled.Load(), tp.lookups.Load())
	}
}

func TestHTTPBadRequests(t *testing.T) {
	tests := []struct {
		name, req string
		status    int
		reason    string
	}{
		{"origin form", "GET /path HTTP/1.1\r\nHost: api.provider.test\r\n\r\n", 400, "not an absolute http:// URL"},
		{"asterisk", "OPTIONS * HTTP/1.1\r\nHost: api.provider.test\r\n\r\n", 400, "not an absolute"},
		{"https URL", "GET https://api.provider.test/ HTTP/1.1\r\n\r\n", 400, `scheme "https" not supported`},
		{"user info", "GET http://u:p@api.provider.test/ HTTP/1.1\r\n\r\n", 400, "user info"},
		{"numeric host", "GET http://2130706433/ HTTP/1.1\r\n\r\n", 403, "not a dotted quad"},
		{"IP literal", "GET http://127.0.0.1/ HTTP/1.1\r\n\r\n", 403, "IP literal not allowed"},
		{"garbage", "HELLO\r\n\r\n", 400, "bad request: malformed HTTP request"},
		{"bad header", "GET http://api.provider.test/ HTTP/1.1\r\nX: a\x00b\r\n\r\n", 400, "bad request"},
		{"unsupported Expect", "PUT http://api.provider.test/ HTTP/1.1\r\nExpect: magic\r\nContent-Length: 1\r\n\r\nx", 417, "unsupported Expect"},
	}
	srv, _ := headerServer(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := startProxy(t, env{
				allow:    []string{"api.provider.test"},
				names:    map[string][]string{"api.provider.test": {"127.0.0.1"}},
				redirect: srv.Listener.Addr().String(),
			})
			c := tp.dialProxy(t)
			if _, err := io.WriteString(c, tt.req); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(resp.Body)
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.reason) {
				t.Errorf("%d %q, want %d with %q", resp.StatusCode, body, tt.status, tt.reason)
			}
			if d := tp.rec.wait(t, 1)[0]; !strings.Contains(d.Reason, tt.reason) {
				t.Errorf("decision %+v", d)
			}
		})
	}
}

// Go's own client, through the proxy: plain HTTP with bodies and a
// streamed response, and HTTPS through CONNECT with a real handshake.
func TestHTTPClient(t *testing.T) {
	events := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d bytes", len(b))
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "event 1\n")
		w.(http.Flusher).Flush()
		<-events // sent only after the agent has read event 1
		fmt.Fprint(w, "event 2\n")
	})
	plain := httptest.NewServer(mux)
	t.Cleanup(plain.Close)
	secure := httptest.NewTLSServer(mux)
	t.Cleanup(secure.Close)
	_, plainPort, _ := net.SplitHostPort(plain.Listener.Addr().String())
	_, securePort, _ := net.SplitHostPort(secure.Listener.Addr().String())

	rec := &recorder{}
	allow, err := ParseAllowList([]string{"api.provider.test:" + plainPort, "example.com:" + securePort})
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Options{
		Allow:  allow,
		Record: rec.record,
		Resolve: fakeResolve(map[string]string{
			"api.provider.test": "127.0.0.1",
			"example.com":       "127.0.0.1",
		}),
	}) // default Dial
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- p.Serve(l) }()

	pool := x509.NewCertPool()
	pool.AddCert(secure.Certificate())
	client := &http.Client{
		Transport: &http.Transport{
			Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: l.Addr().String()}),
			TLSClientConfig: &tls.Config{RootCAs: pool},
		},
		Timeout: 10 * time.Second,
	}
	defer client.CloseIdleConnections()

	check := func(want string) func(*http.Response, error) {
		return func(resp *http.Response, err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if b := readAll(resp.Body); resp.StatusCode != 200 || b != want {
				t.Fatalf("%d %q, want %q", resp.StatusCode, b, want)
			}
		}
	}
	base := "http://api.provider.test:" + plainPort
	check("100000 bytes")(client.Post(base+"/upload", "text/plain", strings.NewReader(strings.Repeat("x", 100000))))
	// A body of unknown length goes chunked.
	check("6 bytes")(client.Post(base+"/upload", "text/plain", io.MultiReader(strings.NewReader("abc"), strings.NewReader("def"))))
	req, _ := http.NewRequest("PUT", base+"/upload", strings.NewReader("expect"))
	req.Header.Set("Expect", "100-continue")
	check("6 bytes")(client.Do(req))
	check("5 bytes")(client.Post("https://example.com:"+securePort+"/upload", "text/plain", strings.NewReader("tls!!")))

	// A streamed response reaches the agent as it is sent.
	resp, err := client.Get(base + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); line != "event 1\n" {
		t.Fatalf("first event %q, %v", line, err)
	}
	close(events)
	if rest := readAll(br); rest != "event 2\n" {
		t.Fatalf("rest %q", rest)
	}
	resp.Body.Close()

	client.CloseIdleConnections()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	recs := rec.all()
	if len(recs) != 5 {
		t.Fatalf("%d decisions: %+v", len(recs), recs)
	}
	for _, d := range recs {
		if !d.Allowed || d.Addr == "" {
			t.Errorf("%+v", d)
		}
		if d.Method == "CONNECT" && (d.SNI != "example.com" || d.BytesUp < 100 || d.BytesDown < 100) {
			t.Errorf("tunnel %+v", d)
		}
	}
}

func fakeResolve(m map[string]string) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := m[host]; ok {
			return []netip.Addr{netip.MustParseAddr(a)}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
}

func TestRemoveHopHeaders(t *testing.T) {
	h := http.Header{
		"Connection":          {"keep-alive, X-A", " x-b ,"},
		"X-A":                 {"1"},
		"X-B":                 {"2"},
		"X-C":                 {"3"},
		"Keep-Alive":          {"300"},
		"Proxy-Authorization": {"Basic x"},
		"Proxy-Authenticate":  {"Basic"},
		"Proxy-Connection":    {"close"},
		"Te":                  {"trailers"},
		"Trailer":             {"X-T"},
		"Transfer-Encoding":   {"chunked"},
		"Upgrade":             {"websocket"},
	}
	removeHopHeaders(h)
	if len(h) != 1 || h.Get("X-C") != "3" {
		t.Errorf("left %v, want only X-C", h)
	}
}

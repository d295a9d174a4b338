package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// modes runs f against a plain-HTTP and a TLS upstream.
func modes(t *testing.T, f func(t *testing.T, tls bool)) {
	for _, tls := range []bool{false, true} {
		t.Run(map[bool]string{false: "http", true: "https"}[tls], func(t *testing.T) { f(t, tls) })
	}
}

// TestOnlyToUpstream plays request-target and Host tricks: none may reach
// another host, or a path outside the upstream's.
func TestOnlyToUpstream(t *testing.T) {
	evil := &spy{}
	evilSrv := httptest.NewServer(evil)
	defer evilSrv.Close()
	evilHost := hostOf(evilSrv)

	modes(t, func(t *testing.T, tls bool) {
		up := &spy{}
		hs := newHarness(t, config{path: "/v1", tls: tls}, up.ServeHTTP)
		upHost := hostOf(hs.up)
		for i, tc := range []struct {
			name, request string
			status        int
			upstreamURI   string // what the upstream must see, when relayed
		}{
			{"absolute form", "GET http://EVIL/v1/models HTTP/1.1\r\nHost: EVIL\r\n", 400, ""},
			{"absolute form https", "GET https://EVIL/v1/models HTTP/1.1\r\nHost: EVIL\r\n", 400, ""},
			{"absolute form naming the upstream", "GET http://UP/v1/models HTTP/1.1\r\nHost: UP\r\n", 400, ""},
			{"scheme-relative path", "GET //EVIL/v1/models HTTP/1.1\r\nHost: EVIL\r\n", 400, ""},
			{"encoded scheme-relative path", "GET /%2FEVIL/v1/models HTTP/1.1\r\nHost: x\r\n", 400, ""},
			{"dot dot", "GET /v1/../admin HTTP/1.1\r\nHost: x\r\n", 400, ""},
			{"dot", "GET /v1/./models HTTP/1.1\r\nHost: x\r\n", 400, ""},
			{"encoded dot dot", "GET /v1/%2e%2E/admin HTTP/1.1\r\nHost: x\r\n", 400, ""},
			{"dot dot encoded slash", "GET /v1/..%2Fadmin HTTP/1.1\r\nHost: x\r\n", 400, ""},
			{"backslash", "GET /v1/..\\admin HTTP/1.1\r\nHost: x\r\n", 400, ""},
			{"NUL", "GET /v1/a%00b HTTP/1.1\r\nHost: x\r\n", 400, ""},
			{"CONNECT authority", "CONNECT EVIL HTTP/1.1\r\nHost: EVIL\r\n", 400, ""},
			{"CONNECT path", "CONNECT /v1/models HTTP/1.1\r\nHost: EVIL\r\n", 400, ""},
			{"OPTIONS asterisk", "OPTIONS * HTTP/1.1\r\nHost: x\r\n", 400, ""},
			{"TRACE", "TRACE /v1/models HTTP/1.1\r\nHost: x\r\n", 405, ""},
			{"outside the prefix", "GET /v2/models HTTP/1.1\r\nHost: x\r\n", 404, ""},
			{"prefix look-alike", "GET /v10/models HTTP/1.1\r\nHost: x\r\n", 404, ""},
			{"encoded slash after the prefix", "GET /v1%2Fmodels HTTP/1.1\r\nHost: x\r\n", 404, ""},
			{"root", "GET / HTTP/1.1\r\nHost: x\r\n", 404, ""},
			{"semicolon query", "GET /v1/models?a=1;key=2 HTTP/1.1\r\nHost: x\r\n", 400, ""},
			{"Host header", "GET /v1/models?limit=2 HTTP/1.1\r\nHost: EVIL\r\nX-Forwarded-Host: EVIL\r\nForwarded: host=EVIL\r\n", 200, "/v1/models?limit=2"},
			{"no Host header", "GET /v1/models HTTP/1.0\r\n", 200, "/v1/models"},
			{"the prefix itself", "GET /v1 HTTP/1.1\r\nHost: x\r\n", 403, ""},
			{"empty segment", "GET /v1//models HTTP/1.1\r\nHost: x\r\n", 200, "/v1//models"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				req := strings.NewReplacer("EVIL", evilHost, "UP", upHost).Replace(tc.request) + "Connection: close\r\n\r\n"
				before := up.hits.Load()
				resp, _ := parse(t, raw(t, hs.addr, req))
				if resp.StatusCode != tc.status {
					t.Errorf("status %d, want %d", resp.StatusCode, tc.status)
				}
				calls := hs.rec.wait(t, i+1)
				if c := calls[i]; c.Status != tc.status || (c.Error == "") != (tc.status == 200) {
					t.Errorf("recorded status %d, error %q; want %d", c.Status, c.Error, tc.status)
				}
				if tc.upstreamURI == "" {
					if up.hits.Load() != before {
						t.Errorf("refused, yet relayed: the upstream saw %+v", up.last(t))
					}
					return
				}
				got := up.last(t)
				if got.Host != upHost || got.URI != tc.upstreamURI {
					t.Errorf("the upstream saw Host %q, target %q; want %q, %q", got.Host, got.URI, upHost, tc.upstreamURI)
				}
			})
		}
	})
	if n := evil.hits.Load(); n != 0 {
		t.Errorf("the other host got %d requests", n)
	}
}

// TestCredentials checks that whatever credentials the agent sends, the
// upstream gets the real key in exactly one header and nothing else of them.
func TestCredentials(t *testing.T) {
	modes(t, func(t *testing.T, tls bool) {
		for _, tc := range []struct {
			name, gateway string
			sent          map[string]string
			header, value string // where the key must be
		}{
			{"bearer", "openai", map[string]string{"Authorization": "Bearer " + DummyKey}, "Authorization", "Bearer " + testKey},
			{"nothing sent", "openai", nil, "Authorization", "Bearer " + testKey},
			{"x-api-key", "openai", map[string]string{"X-Api-Key": DummyKey}, "X-Api-Key", testKey},
			{"anthropic by name", "anthropic", map[string]string{"Authorization": "Bearer " + DummyKey}, "X-Api-Key", testKey},
			{"azure api-key", "azure", map[string]string{"Api-Key": DummyKey}, "Api-Key", testKey},
			{"gemini", "gemini", map[string]string{"X-Goog-Api-Key": DummyKey}, "X-Goog-Api-Key", testKey},
			{"everything at once", "openai", map[string]string{
				"Authorization": "Basic agent-own-secret", "X-Api-Key": "agent-own-secret", "Api-Key": "agent-own-secret",
				"X-Goog-Api-Key": "agent-own-secret", "Proxy-Authorization": "Basic agent-own-secret",
				"Cookie": "session=agent-own-secret",
			}, "X-Api-Key", testKey},
		} {
			t.Run(tc.name, func(t *testing.T) {
				up := &spy{}
				hs := newHarness(t, config{name: tc.gateway, path: "/v1", tls: tls}, up.ServeHTTP)
				h := http.Header{"Accept-Encoding": {"gzip, br"}}
				for k, v := range tc.sent {
					h.Set(k, v)
				}
				resp, _ := hs.do(t, "POST", "/v1/chat/completions?key=agent-own-secret&limit=2&API_KEY=x&%6Bey=y&Api-Key=z&apikey=w", []byte(`{}`), h)
				if resp.StatusCode != 200 {
					t.Fatalf("status %d", resp.StatusCode)
				}
				got := up.last(t)
				if v := got.Header.Values(tc.header); len(v) != 1 || v[0] != tc.value {
					t.Errorf("%s: %q, want %q", tc.header, v, tc.value)
				}
				for name, values := range got.Header {
					for _, v := range values {
						if name != tc.header && strings.Contains(v, testKey) {
							t.Errorf("the key is also in %s", name)
						}
						if strings.Contains(v, DummyKey) || strings.Contains(v, "agent-own-secret") {
							t.Errorf("the agent's credential reached the upstream in %s: %q", name, v)
						}
					}
				}
				for _, name := range []string{"Cookie", "Proxy-Authorization"} {
					if v := got.Header.Get(name); v != "" {
						t.Errorf("%s reached the upstream: %q", name, v)
					}
				}
				if v := got.Header.Get("Accept-Encoding"); v != "identity" {
					t.Errorf("Accept-Encoding %q, want identity", v)
				}
				if got.URI != "/v1/chat/completions?limit=2" {
					t.Errorf("target %q: the credential parameters should be gone, the rest kept", got.URI)
				}
			})
		}
	})
}

// TestHopByHop checks that connection-level headers go neither way.
func TestHopByHop(t *testing.T) {
	up := &spy{answer: func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Connection", "X-Hop")
		h.Set("X-Hop", "1")
		h.Set("Keep-Alive", "timeout=5")
		h.Set("Proxy-Authenticate", "Basic")
		h.Set("Set-Cookie", "track=1")
		h.Set("X-Kept", "1")
		w.Write([]byte("{}"))
	}}
	hs := newHarness(t, config{path: "/v1"}, up.ServeHTTP)
	b := raw(t, hs.addr, "GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close, X-Drop\r\nX-Drop: 1\r\n"+
		"Te: trailers\r\nUpgrade: h2c\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nX-Kept: 1\r\n\r\n")
	resp, _ := parse(t, b)
	got := up.last(t)
	for _, name := range []string{"X-Drop", "Te", "Upgrade", "Keep-Alive", "Proxy-Connection"} {
		if v := got.Header.Get(name); v != "" {
			t.Errorf("the upstream got %s: %q", name, v)
		}
	}
	if got.Header.Get("X-Kept") != "1" {
		t.Error("an end-to-end request header was dropped")
	}
	for _, name := range []string{"X-Hop", "Keep-Alive", "Proxy-Authenticate", "Set-Cookie"} {
		if v := resp.Header.Get(name); v != "" {
			t.Errorf("the agent got %s: %q", name, v)
		}
	}
	if resp.Header.Get("X-Kept") != "1" {
		t.Error("an end-to-end response header was dropped")
	}
}

// TestRedirectsNotFollowed checks that a 3xx goes back to the agent as it is.
func TestRedirectsNotFollowed(t *testing.T) {
	evil := &spy{}
	evilSrv := httptest.NewServer(evil)
	defer evilSrv.Close()
	for _, status := range []int{301, 302, 303, 307, 308} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			to := evilSrv.URL + "/steal"
			up := &spy{answer: func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, status) }}
			hs := newHarness(t, config{path: "/v1", tls: true}, up.ServeHTTP)
			resp, _ := hs.do(t, "POST", "/v1/chat/completions", []byte(`{"model":"m"}`), nil)
			if resp.StatusCode != status || resp.Header.Get("Location") != to {
				t.Errorf("got %d to %q, want %d to %q", resp.StatusCode, resp.Header.Get("Location"), status, to)
			}
			hs.rec.wait(t, 1)
		})
	}
	if n := evil.hits.Load(); n != 0 {
		t.Errorf("a redirect was followed: %d requests to its target", n)
	}
}

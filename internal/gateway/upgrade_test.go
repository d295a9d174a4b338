package gateway

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// codexHandshake is the start of the WebSocket handshake Codex 0.169 makes
// for the Responses API (headers as it sends them, but for the ids), before
// it falls back to POST /v1/responses.
const codexHandshake = "Host: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n" +
	"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nAuthorization: Bearer " + DummyKey + "\r\n" +
	"OpenAI-Beta: responses_websockets=2026-02-06\r\nOriginator: codex_exec\r\n"

// TestWebSocketRefused asks the gateway to switch to WebSocket, as Codex
// does before it posts: the answer must be 426 Upgrade Required, on which
// Codex falls back to HTTP at once (any other status it retries, five times
// with backoff), and the upstream must never hear of it, even one that
// would switch.
func TestWebSocketRefused(t *testing.T) {
	for _, tc := range []struct {
		name, gateway, request string
	}{
		{"codex", "openai", "GET /v1/responses HTTP/1.1\r\n" + codexHandshake + "\r\n"},
		{"upgrade in another case", "openai", "GET /v1/responses HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: WebSocket\r\n\r\n"},
		{"among other protocols", "openai", "GET /v1/responses HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c, websocket/13\r\n\r\n"},
		{"on a second line", "openai", "GET /v1/responses HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nUpgrade: websocket\r\n\r\n"},
		{"without Connection", "openai", "GET /v1/responses HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n"},
		{"on a post", "openai", "POST /v1/responses HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 13\r\n\r\n{\"model\":\"m\"}"},
		{"realtime", "openai", "GET /v1/realtime?model=gpt-realtime HTTP/1.1\r\n" + codexHandshake + "\r\n"},
		{"outside the upstream's path", "openai", "GET /other HTTP/1.1\r\n" + codexHandshake + "\r\n"},
		{"anthropic", "anthropic", "GET /v1/messages HTTP/1.1\r\n" + codexHandshake + "\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := &spy{answer: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Connection", "Upgrade")
				w.Header().Set("Upgrade", "websocket")
				w.WriteHeader(http.StatusSwitchingProtocols)
			}}
			path := "/v1"
			if tc.gateway == "anthropic" {
				path = ""
			}
			hs := newHarness(t, config{name: tc.gateway, path: path}, up.ServeHTTP)
			resp, body := parse(t, raw(t, hs.addr, tc.request))
			refusedCall(t, hs, up, resp, http.StatusUpgradeRequired, "WebSocket")
			var e struct{ Error struct{ Message string } }
			if json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error.Message, "use HTTP") || strings.Contains(e.Error.Message, "\n") {
				t.Errorf("the agent got %q, want a JSON error saying in one line to use HTTP", body)
			}
			if resp.Header.Get("Upgrade") != "" || !resp.Close {
				t.Errorf("the answer has Upgrade %q and closes the connection: %v; want no Upgrade, closed",
					resp.Header.Get("Upgrade"), resp.Close)
			}
		})
	}
}

// TestOtherUpgradesIgnored checks that an Upgrade to anything but
// WebSocket is ignored, as HTTP lets a server do: the request is served as
// plain HTTP/1.1, the Upgrade header not relayed.
func TestOtherUpgradesIgnored(t *testing.T) {
	up := &spy{}
	hs := newHarness(t, config{path: "/v1"}, up.ServeHTTP)
	resp, _ := parse(t, raw(t, hs.addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings, close\r\n"+
		"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nContent-Length: 2\r\n\r\n{}"))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := up.last(t)
	for _, name := range []string{"Upgrade", "Http2-Settings"} {
		if v := got.Header.Get(name); v != "" {
			t.Errorf("the upstream got %s: %q", name, v)
		}
	}
	hs.rec.wait(t, 1)
}

// TestWebSocketOnTape records a refused handshake and replays it: the
// replay answers the same 426, with no upstream.
func TestWebSocketOnTape(t *testing.T) {
	up := &spy{}
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	tape := NewTape()
	recording := startGateway(t, Options{Spec: specFor(t, "openai", srv.URL+"/v1"), Key: testKey, Tape: tape}, nil, srv)
	handshake := "GET /v1/responses HTTP/1.1\r\n" + codexHandshake + "\r\n"
	recorded, recordedBody := parse(t, raw(t, recording.addr, handshake))
	recording.close()
	if recorded.StatusCode != http.StatusUpgradeRequired || up.hits.Load() != 0 {
		t.Fatalf("recorded status %d, with %d requests upstream", recorded.StatusCode, up.hits.Load())
	}

	replay := readTape(t, encode(t, tape))
	replay.OnDiverge = func(err error) { t.Errorf("OnDiverge(%v)", err) }
	replaying := startGateway(t, Options{Spec: specFor(t, "openai", "http://upstream.invalid/v1"), Replay: replay, Transport: noNetwork{t}}, nil, nil)
	got, body := parse(t, raw(t, replaying.addr, handshake))
	if got.StatusCode != recorded.StatusCode || string(body) != string(recordedBody) {
		t.Errorf("replayed %d %q, recorded %d %q", got.StatusCode, body, recorded.StatusCode, recordedBody)
	}
	if err := replay.Done(); err != nil {
		t.Errorf("Done = %v", err)
	}
}

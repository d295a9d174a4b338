package gateway

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"
)

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// TestCallRecords checks each request is recorded once, with the digests and
// sizes of what went each way and the usage the upstream reported.
func TestCallRecords(t *testing.T) {
	reqBody := []byte(`{"messages":[{"role":"user","content":"hi"}],"model":"gpt-from-request"}`)
	for _, tc := range []struct {
		name, file, ctype string
		model             string
		tokens            [3]int64 // input, output, total
	}{
		{"json", "openai-chat.json", "application/json", "gpt-from-request", [3]int64{1200, 35, 1235}},
		{"openai stream", "openai-chat-stream.sse", "text/event-stream; charset=utf-8", "gpt-from-request", [3]int64{19, 10, 29}},
		{"anthropic stream", "anthropic-stream.sse", "text/event-stream", "gpt-from-request", [3]int64{125, 15, 140}},
		{"not json", "not-json.txt", "text/html", "gpt-from-request", [3]int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := seed(t, tc.file)
			hs := newHarness(t, config{path: "/v1"}, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ctype)
				w.Write(answer)
			})
			before := time.Now()
			resp, got := hs.do(t, "POST", "/v1/chat/completions", reqBody, nil)
			c := hs.rec.wait(t, 1)[0]
			if resp.StatusCode != 200 || string(got) != string(answer) {
				t.Fatalf("status %d, body %q", resp.StatusCode, got)
			}
			want := Call{Gateway: "openai", Method: "POST", Path: "/v1/chat/completions", Model: tc.model, Status: 200,
				InputTokens: tc.tokens[0], OutputTokens: tc.tokens[1], TotalTokens: tc.tokens[2],
				RequestSHA256: sha(reqBody), ResponseSHA256: sha(answer),
				BytesUp: int64(len(reqBody)), BytesDown: int64(len(answer))}
			if c.Time.Before(before) || c.Latency <= 0 || c.Latency > time.Since(before) {
				t.Errorf("time %v, latency %v", c.Time, c.Latency)
			}
			c.Time, c.Latency, c.CacheReadTokens = time.Time{}, 0, 0
			if c != want {
				t.Errorf("recorded\n%+v\nwant\n%+v", c, want)
			}
		})
	}
	t.Run("model from the response", func(t *testing.T) {
		hs := newHarness(t, config{path: "/v1"}, func(w http.ResponseWriter, r *http.Request) { w.Write(seed(t, "openai-embeddings.json")) })
		hs.do(t, "POST", "/v1/embeddings", []byte(`{"input":"hi"}`), nil)
		if c := hs.rec.wait(t, 1)[0]; c.Model != "text-embedding-3-small" || c.InputTokens != 8 {
			t.Errorf("recorded %+v", c)
		}
	})
	t.Run("upstream unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		u := &url.URL{Scheme: "http", Host: l.Addr().String()}
		l.Close()
		hs := startGateway(t, Options{Spec: Spec{Name: "local", Upstream: u}, Key: testKey}, nil, nil)
		resp, body := hs.do(t, "GET", "/models", nil, nil)
		c := hs.rec.wait(t, 1)[0]
		if resp.StatusCode != 502 || c.Status != 502 || !strings.HasPrefix(c.Error, "upstream: ") || c.ResponseSHA256 != sha(body) {
			t.Errorf("status %d; recorded %+v", resp.StatusCode, c)
		}
	})
	t.Run("upstream cuts the body", func(t *testing.T) {
		hs := newHarness(t, config{path: "/v1"}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100")
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
		})
		req, _ := http.NewRequest("GET", hs.base+"/models", nil)
		resp, err := hs.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Error("the agent got a cut response as if whole")
		}
		c := hs.rec.wait(t, 1)[0]
		if c.Status != 200 || !strings.HasPrefix(c.Error, "upstream: ") || c.BytesDown != int64(len("partial")) || c.ResponseSHA256 != sha([]byte("partial")) {
			t.Errorf("recorded %+v", c)
		}
	})
	t.Run("client goes away", func(t *testing.T) {
		gone := make(chan struct{})
		hs := newHarness(t, config{path: "/v1"}, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			close(gone)
		})
		conn, err := net.Dial("tcp", hs.addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
		br := bufio.NewReader(conn)
		for line := ""; line != "data: 1\n"; {
			if line, err = br.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			line = strings.TrimPrefix(line, "\r")
		}
		conn.Close()
		c := hs.rec.wait(t, 1)[0]
		if c.Error != "client went away" || c.Status != 200 || c.BytesDown != int64(len("data: 1\n\n")) {
			t.Errorf("recorded %+v", c)
		}
		select {
		case <-gone:
		case <-time.After(5 * time.Second):
			t.Error("the upstream request was not cancelled")
		}
	})
}

// TestCloseCutsCalls checks that Close cuts a call in progress, records it
// once before returning, refuses what follows, and leaves no goroutine
// behind (over plain HTTP, the gateway's own transport is used).
func TestCloseCutsCalls(t *testing.T) { modes(t, testCloseCutsCalls) }

func testCloseCutsCalls(t *testing.T, tls bool) {
	base := runtime.NumGoroutine()
	func() {
		hs := newHarness(t, config{path: "/v1", tls: tls}, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/responses" {
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})
		resp, err := hs.client.Post(hs.base+"/responses", "application/json", strings.NewReader(`{"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		if line, err := br.ReadString('\n'); line != "data: 1\n" || err != nil {
			t.Fatalf("first line %q, %v", line, err)
		}
		hs.do(t, "GET", "/v1/models", nil, nil) // leaves an idle connection upstream
		hs.rec.slow.Store(true)
		if err := hs.close(); err != nil {
			t.Errorf("Serve after Close = %v, want nil", err)
		}
		calls := hs.rec.snapshot() // no waiting: Close has returned
		if len(calls) != 2 || calls[0].Error != "" || calls[1].Error != "cut by Close" {
			t.Fatalf("recorded %+v", calls)
		}
		if _, err := io.ReadAll(br); err == nil {
			t.Error("the cut stream ended as if whole")
		}
		if conn, err := net.Dial("tcp", hs.addr); err == nil {
			conn.Close()
			t.Error("the gateway still accepts connections after Close")
		}
		if err := hs.g.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
		hs.up.Client().Transport.(*http.Transport).CloseIdleConnections()
		hs.client.CloseIdleConnections()
		// With the upstream still up, only its accept loop may be left:
		// the gateway must have closed its connections to it.
		settle(t, base+1)
		hs.up.Close()
		hs.rec.wait(t, 2)
	}()
	settle(t, base)
}

// settle waits for the number of goroutines to drop to n.
func settle(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, want %d:\n%s", runtime.NumGoroutine(), n, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAfterClose checks that a request that slips in after Close (one the
// server had already read) is refused and not recorded: Record is never
// called after Close has returned.
func TestAfterClose(t *testing.T) {
	hs := newHarness(t, config{}, nil)
	hs.close()
	w := httptest.NewRecorder()
	hs.g.serveHTTP(w, httptest.NewRequest("GET", "/models", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", w.Code)
	}
	if calls := hs.rec.snapshot(); len(calls) != 0 {
		t.Errorf("recorded after Close: %+v", calls)
	}
}

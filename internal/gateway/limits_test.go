package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestRequestBodyLimit checks the 413 for one body too large, told in
// advance or found while reading, and that nothing of it goes upstream.
func TestRequestBodyLimit(t *testing.T) {
	const max = 1 << 20
	up := &spy{answer: func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprint(w, len(b))
	}}
	hs := newHarness(t, config{path: "/v1", tune: func(g *Gateway) { g.maxBody = max }}, up.ServeHTTP)

	resp, _ := parse(t, raw(t, hs.addr, fmt.Sprintf("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", max+1)))
	if resp.StatusCode != 413 {
		t.Errorf("Content-Length over the limit: status %d, want 413", resp.StatusCode)
	}
	req, _ := http.NewRequest("POST", hs.base+"/chat/completions", io.MultiReader(bytes.NewReader(jsonBody(max)), strings.NewReader("!")))
	req.ContentLength = -1 // chunked
	if resp, err := hs.client.Do(req); err == nil {
		resp.Body.Close()
		if resp.StatusCode != 413 {
			t.Errorf("chunked body over the limit: status %d, want 413", resp.StatusCode)
		}
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("%d bodies over the limit went upstream", n)
	}
	resp, body := hs.do(t, "POST", "/v1/chat/completions", jsonBody(max), nil)
	if resp.StatusCode != 200 || string(body) != fmt.Sprint(max) {
		t.Errorf("a body at the limit: status %d, upstream read %s bytes", resp.StatusCode, body)
	}
	calls := hs.rec.wait(t, 3)
	if calls[0].Status != 413 || calls[1].Status != 413 || calls[2].BytesUp != max {
		t.Errorf("recorded %+v", calls)
	}
	if n := hs.g.buffered.Load(); n != 0 {
		t.Errorf("%d bytes still counted as held", n)
	}
}

// TestBufferedLimit checks that bodies held together stay under the limit: a
// request that would pass it gets 503 while another body is being read.
func TestBufferedLimit(t *testing.T) {
	const held = 3 << 20
	hs := newHarness(t, config{tune: func(g *Gateway) { g.maxHeld = held }}, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	})
	conn, err := net.Dial("tcp", hs.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	slow := jsonBody(2 << 20)
	fmt.Fprintf(conn, "POST /chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", len(slow))
	conn.Write(slow[:1<<10])
	for deadline := time.Now().Add(5 * time.Second); hs.g.buffered.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the slow body was never counted")
		}
	}
	resp, _ := parse(t, raw(t, hs.addr, fmt.Sprintf("POST /chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", 1<<20+1)))
	if resp.StatusCode != 503 {
		t.Errorf("a body past the common limit: status %d, want 503", resp.StatusCode)
	}
	conn.Write(slow[1<<10:])
	b, _ := io.ReadAll(conn)
	if resp, _ := parse(t, b); resp.StatusCode != 200 {
		t.Errorf("the slow body: status %d", resp.StatusCode)
	}
	resp, _ = hs.do(t, "POST", "/chat/completions", jsonBody(1<<20+1), nil)
	if resp.StatusCode != 200 {
		t.Errorf("once the slow body is gone: status %d, want 200", resp.StatusCode)
	}
	hs.rec.wait(t, 3)
	if n := hs.g.buffered.Load(); n != 0 {
		t.Errorf("%d bytes still counted as held", n)
	}
}

// TestHeaderTimeout checks that a client that never finishes its headers is
// cut off.
func TestHeaderTimeout(t *testing.T) {
	g, err := New(Options{Spec: Spec{Name: "x", Upstream: &url.URL{Scheme: "https", Host: "h"}}, Key: testKey})
	if err != nil {
		t.Fatal(err)
	}
	if d := g.srv.ReadHeaderTimeout; d <= 0 || d > time.Minute {
		t.Errorf("ReadHeaderTimeout %v", d)
	}
	hs := newHarness(t, config{tune: func(g *Gateway) { g.srv.ReadHeaderTimeout = 100 * time.Millisecond }}, nil)
	conn, err := net.Dial("tcp", hs.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /models HTTP/1.1\r\nHost: x\r\n")
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	io.ReadAll(conn)
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the connection was held for %v", d)
	}
	if calls := hs.rec.snapshot(); len(calls) != 0 {
		t.Errorf("recorded %+v", calls)
	}
}

func TestUsageTotals(t *testing.T) {
	hs := newHarness(t, config{path: "/v1"}, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, `{"usage":{"prompt_tokens":%d,"completion_tokens":1,"total_tokens":%d}}`, len(b), len(b)+1)
	})
	for _, body := range []string{`{"model":"b"}`, `{"model":"a"}`, `{"model":"b","x":1}`} {
		hs.do(t, "POST", "/v1/chat/completions", []byte(body), nil)
	}
	hs.do(t, "GET", "/elsewhere", nil, nil)
	hs.rec.wait(t, 4)
	got := hs.g.Usage()
	want := []Usage{
		{Gateway: "openai", Model: "", Calls: 1, Failed: 1, BytesDown: got[0].BytesDown},
		{Gateway: "openai", Model: "a", Calls: 1, InputTokens: 13, OutputTokens: 1, TotalTokens: 14, BytesUp: 13, BytesDown: got[1].BytesDown},
		{Gateway: "openai", Model: "b", Calls: 2, InputTokens: 13 + 19, OutputTokens: 2, TotalTokens: 34, BytesUp: 32, BytesDown: got[2].BytesDown},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Usage\n%+v\nwant\n%+v", got, want)
	}
	for _, u := range got {
		if u.BytesDown <= 0 {
			t.Errorf("no bytes down for %q", u.Model)
		}
	}

	// The agent names the models: past maxModels, they are summed together.
	for i := range maxModels + 10 {
		hs.g.tally(&Call{Model: fmt.Sprint("m", i), InputTokens: 1<<63 - 1})
	}
	got = hs.g.Usage()
	var other Usage
	for _, u := range got {
		if u.Model == otherModels {
			other = u
		}
	}
	if len(got) != maxModels+1 || other.Calls != 13 || other.InputTokens != 1<<63-1 {
		t.Errorf("%d models, %+v", len(got), other)
	}
}

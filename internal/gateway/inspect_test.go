package gateway

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// inspector is an Options.Inspect that keeps what it was shown.
type inspector struct {
	rec *recorder // the gateway's: how many calls were recorded when a response closed

	mu        sync.Mutex
	calls     []Call
	bodies    [][]byte
	responses []*bytes.Buffer
	closed    []int // calls recorded when each response was closed, -1 before
}

type lookWriter struct {
	in *inspector
	i  int
}

func (w lookWriter) Write(p []byte) (int, error) {
	w.in.mu.Lock()
	defer w.in.mu.Unlock()
	return w.in.responses[w.i].Write(p)
}

func (w lookWriter) Close() error {
	n := len(w.in.rec.snapshot())
	w.in.mu.Lock()
	defer w.in.mu.Unlock()
	w.in.closed[w.i] = n
	return nil
}

func (in *inspector) inspect(c Call, body []byte) io.WriteCloser {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.calls = append(in.calls, c)
	in.bodies = append(in.bodies, bytes.Clone(body))
	in.responses = append(in.responses, &bytes.Buffer{})
	in.closed = append(in.closed, -1)
	return lookWriter{in, len(in.calls) - 1}
}

// Inspect is shown every request body the gateway read, relayed or
// refused, and the response as the agent got it, closed before the call is
// recorded; a request refused before its body was read is not shown.
func TestInspect(t *testing.T) {
	answer := seed(t, "anthropic-stream.sse")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(answer)
	}))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL + "/v1")
	in := &inspector{}
	hs := startGateway(t, Options{Spec: Spec{Name: "anthropic", Upstream: u}, Key: testKey, Inspect: in.inspect}, nil, up)
	in.rec = hs.rec

	relayed := []byte(`{"model":"claude","messages":[{"role":"user","content":"hi"}]}`)
	notJSON := []byte(`not json at all`)
	requests := []struct {
		path   string
		body   []byte
		status int
		shown  bool
	}{
		{"/v1/messages", relayed, 200, true},
		{"/v1/messages", notJSON, 400, true}, // refused after its body was read
		{"/elsewhere", relayed, 404, false},  // refused before
	}
	var got [][]byte
	for i, r := range requests {
		resp, body := hs.do(t, "POST", r.path, r.body, nil)
		if resp.StatusCode != r.status {
			t.Fatalf("request %d: status %d, want %d", i, resp.StatusCode, r.status)
		}
		hs.rec.wait(t, i+1)
		got = append(got, body)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.calls) != 2 {
		t.Fatalf("%d requests shown, want 2: %+v", len(in.calls), in.calls)
	}
	for i, r := range requests[:2] {
		c := in.calls[i]
		if !bytes.Equal(in.bodies[i], r.body) || c.RequestSHA256 != sha(r.body) || c.Path != r.path || c.Gateway != "anthropic" {
			t.Errorf("request %d shown as %+v with body %q", i, c, in.bodies[i])
		}
		if !bytes.Equal(in.responses[i].Bytes(), got[i]) {
			t.Errorf("request %d: shown the response %q, the agent got %q", i, in.responses[i], got[i])
		}
		if in.closed[i] != i {
			t.Errorf("request %d: response closed with %d calls recorded, want %d (closed before its own)", i, in.closed[i], i)
		}
	}
	if !bytes.Equal(got[0], answer) {
		t.Errorf("the agent got %q", got[0])
	}
}

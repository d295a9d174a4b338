package gateway

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestExchanges reads the recorded script back: every call in order, the
// bodies as the agent sent and got them, and the usage the gateway
// reported for each, read again from the response alone.
func TestExchanges(t *testing.T) {
	rec := recordScript(t)
	for name, tape := range map[string]*Tape{"recorded": rec.tape, "read": readTape(t, rec.file)} {
		t.Run(name, func(t *testing.T) {
			xs, err := tape.Exchanges()
			if err != nil || len(xs) != len(script) {
				t.Fatalf("Exchanges = %d calls, %v; want %d", len(xs), err, len(script))
			}
			byGateway := map[string][]Call{"openai": rec.calls[0], "anthropic": rec.calls[1]}
			for i, x := range xs {
				s, a := script[i], rec.answers[i]
				c := byGateway[x.Gateway][0]
				byGateway[x.Gateway] = byGateway[x.Gateway][1:]
				if x.Seq != i+1 || x.Method != s.method || x.Status != a.status || x.ContentType != a.ctype || string(x.Response) != a.body {
					t.Errorf("call %d: %+v, want %+v %+v", i+1, x, s, a)
				}
				wantReq := s.body
				if c.RequestSHA256 == "" {
					wantReq = ""
				}
				if string(x.Request) != wantReq || (x.Request == nil) != (c.RequestSHA256 == "") {
					t.Errorf("call %d: request %q, want %q", i+1, x.Request, wantReq)
				}
				_, tk := x.Usage()
				want := Tokens{Input: c.InputTokens, Output: c.OutputTokens, CacheRead: c.CacheReadTokens, CacheWrite: c.CacheWriteTokens, Total: c.TotalTokens}
				if tk != want {
					t.Errorf("call %d: Usage %+v, the gateway reported %+v", i+1, tk, want)
				}
			}
			if xs[1].Usage(); xs[1].ContentType != "text/event-stream" {
				t.Errorf("call 2 should be a stream: %q", xs[1].ContentType)
			}
			if _, tk := xs[1].Usage(); tk.Input == 0 || tk.Output == 0 {
				t.Errorf("the stream's usage: %+v", tk)
			}
		})
	}
}

// TestTapeKeepsServing fills a Tape made with KeepServing: the agent's
// requests are relayed all the same, the failure is reported, and the calls
// before it can still be read, but not written to replay.
func TestTapeKeepsServing(t *testing.T) {
	big := strings.Repeat("x", 4000)
	tape := NewTape(KeepServing())
	tape.maxBodies = 1000
	up := httptest.NewServer(fakeProvider(t))
	t.Cleanup(up.Close)
	hs := startGateway(t, Options{Spec: specFor(t, "openai", up.URL+"/v1"), Key: testKey, Tape: tape}, nil, up)
	answers := play(t, []*harness{hs}, []step{
		{0, "GET", "/v1/models", ""},
		{0, "GET", "/v1/models?q=" + big, ""}, // its response fills the tape
		{0, "GET", "/v1/models", ""},
	})
	hs.close()
	for i, a := range answers {
		if a.status != 200 {
			t.Errorf("call %d: %+v, want it relayed", i+1, a)
		}
	}
	xs, err := tape.Exchanges()
	if !errors.Is(err, ErrTapeFull) || len(xs) != 1 || xs[0].Seq != 1 || string(xs[0].Response) != answers[0].body {
		t.Errorf("Exchanges = %+v, %v; want call 1 and ErrTapeFull", xs, err)
	}
	if _, err := tape.WriteTo(&strings.Builder{}); !errors.Is(err, ErrTapeFull) {
		t.Errorf("WriteTo = %v, want ErrTapeFull", err)
	}
}

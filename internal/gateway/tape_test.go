package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// noNetwork is the Transport of replaying gateways: it fails the test if
// it is used.
type noNetwork struct{ t testing.TB }

func (n noNetwork) RoundTrip(r *http.Request) (*http.Response, error) {
	n.t.Errorf("a replaying gateway sent %s %s", r.Method, r.URL)
	return nil, errors.New("no network in a replay")
}

func specFor(t testing.TB, name, raw string) Spec {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return Spec{Name: name, Upstream: u}
}

// step is one request of a script, to the gateway of index gw.
type step struct {
	gw           int
	method, path string
	body         string
}

// answer is what the agent got for a step.
type answer struct {
	status int
	ctype  string
	body   string
}

// script is an agent's session through an openai (upstream path /v1) and an
// anthropic (upstream at the root) gateway: JSON, a stream, a query with a
// credential parameter, two refusals (before and after the body is read),
// an upstream that echoes the key, and a call made twice.
var script = []step{
	{0, "POST", "/v1/chat/completions", `{"model":"gpt-from-request","messages":[{"role":"user","content":"hi"}]}`},
	{1, "POST", "/v1/messages", `{"model":"claude-x","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`},
	{0, "GET", "/v1/models?limit=2&key=sk-agent&after=a%26b", ""},
	{0, "GET", "/v1/files", ""},
	{0, "POST", "/v1/responses", `{"model":"gpt-x","input":"hi","tools":[{"type":"web_search"}]}`},
	{0, "POST", "/v1/chat/completions", `{"model":"gpt-x","messages":[{"role":"user","content":"echo the key"}]}`},
	{1, "POST", "/v1/messages", `{"model":"claude-x","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`},
}

// fakeProvider answers the script's requests as OpenAI and Anthropic would.
func fakeProvider(t testing.TB) http.HandlerFunc {
	chat, stream := seed(t, "openai-chat.json"), seed(t, "anthropic-stream.sse")
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/v1/chat/completions":
			w.Header().Set("Content-Type", "application/json")
			if bytes.Contains(body, []byte("echo")) {
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s"}}`, r.Header.Get("Authorization"))
				return
			}
			w.Write(chat)
		case "/v1/messages":
			w.Header().Set("Content-Type", "text/event-stream")
			for event := range bytes.SplitAfterSeq(stream, []byte("\n\n")) {
				w.Write(event)
				w.(http.Flusher).Flush()
			}
		case "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"object":"list","data":[],"query":%q}`, r.URL.RawQuery)
		default:
			http.NotFound(w, r)
		}
	}
}

// play sends the steps through the gateways, one after the other.
func play(t testing.TB, hs []*harness, steps []step) []answer {
	t.Helper()
	var out []answer
	for _, s := range steps {
		resp, body := hs[s.gw].do(t, s.method, s.path, []byte(s.body), nil)
		out = append(out, answer{resp.StatusCode, resp.Header.Get("Content-Type"), string(body)})
	}
	return out
}

// recording is a script played through recording gateways.
type recording struct {
	tape    *Tape
	file    []byte
	answers []answer
	calls   [][]Call  // by gateway, Time and Latency zeroed
	usage   [][]Usage // by gateway
}

func recordScript(t *testing.T) recording {
	t.Helper()
	tape := NewTape()
	hs := recordingPair(t, tape)
	rec := recording{tape: tape, answers: play(t, hs, script)}
	for _, h := range hs {
		h.close()
		rec.calls = append(rec.calls, timeless(h.rec.snapshot()))
		rec.usage = append(rec.usage, h.g.Usage())
	}
	if err := tape.Err(); err != nil {
		t.Fatalf("Err after recording: %v", err)
	}
	var b bytes.Buffer
	n, err := tape.WriteTo(&b)
	if err != nil || n != int64(b.Len()) {
		t.Fatalf("WriteTo = %d, %v; wrote %d bytes", n, err, b.Len())
	}
	rec.file = b.Bytes()
	return rec
}

// recordingPair is the script's two gateways recording onto tape, with
// the fake provider upstream.
func recordingPair(t *testing.T, tape *Tape) []*harness {
	t.Helper()
	up := httptest.NewServer(fakeProvider(t))
	t.Cleanup(up.Close)
	return []*harness{
		startGateway(t, Options{Spec: specFor(t, "openai", up.URL+"/v1"), Key: testKey, Tape: tape}, nil, up),
		startGateway(t, Options{Spec: specFor(t, "anthropic", up.URL), Key: testKey, Tape: tape}, nil, up),
	}
}

func timeless(calls []Call) []Call {
	for i := range calls {
		calls[i].Time, calls[i].Latency = time.Time{}, 0
	}
	return calls
}

// replayPair is the script's two gateways replaying tape, with no upstream.
func replayPair(t *testing.T, tape *Tape) []*harness {
	t.Helper()
	return []*harness{
		startGateway(t, Options{Spec: specFor(t, "openai", "http://upstream.invalid/v1"), Replay: tape, Transport: noNetwork{t}}, nil, nil),
		startGateway(t, Options{Spec: specFor(t, "anthropic", "http://upstream.invalid"), Replay: tape, Transport: noNetwork{t}}, nil, nil),
	}
}

func readTape(t testing.TB, file []byte) *Tape {
	t.Helper()
	tape, err := ReadTape(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatalf("ReadTape: %v", err)
	}
	return tape
}

func encode(t testing.TB, tape *Tape) []byte {
	t.Helper()
	var b bytes.Buffer
	if _, err := tape.WriteTo(&b); err != nil {
		t.Fatalf("WriteTo: %v", err)
	}
	return b.Bytes()
}

// lines splits a recording into its lines, newlines kept.
func lines(file []byte) [][]byte {
	return bytes.SplitAfter(file, []byte("\n"))[:bytes.Count(file, []byte("\n"))]
}

// TestTapeRecords records the script and checks the file: one line per call
// in order, as the agent was sent it, the key nowhere, bodies once each, and
// the same bytes through every decode and encode.
func TestTapeRecords(t *testing.T) {
	rec := recordScript(t)
	noKey(t, "the recording", rec.file)
	ls := lines(rec.file)
	if got, want := string(ls[0]), `{"schema":"proctor.recording/v1","calls":7,"blobs":11}`+"\n"; got != want {
		t.Fatalf("header %q, want %q", got, want)
	}
	if again := encode(t, rec.tape); !bytes.Equal(again, rec.file) {
		t.Error("two encodes of the tape differ")
	}
	decoded := readTape(t, rec.file)
	if again := encode(t, decoded); !bytes.Equal(again, rec.file) {
		t.Errorf("decoded and encoded again, the recording changed:\n%s\nwas\n%s", again, rec.file)
	}

	byGateway := map[string][]Call{"openai": rec.calls[0], "anthropic": rec.calls[1]}
	targets := []string{"/v1/chat/completions", "/v1/messages", "/v1/models?limit=2&after=a%26b", "/v1/files",
		"/v1/responses", "/v1/chat/completions", "/v1/messages"}
	for i, s := range script {
		var l callLine
		if err := json.Unmarshal(ls[1+i], &l); err != nil {
			t.Fatalf("line %d: %v", 2+i, err)
		}
		name := []string{"openai", "anthropic"}[s.gw]
		c := byGateway[name][0]
		byGateway[name] = byGateway[name][1:]
		a := rec.answers[i]
		want := callLine{Seq: i + 1, Gateway: name, Method: s.method, Target: targets[i],
			RequestSHA256: c.RequestSHA256, RequestBytes: c.BytesUp, Status: a.status, ContentType: a.ctype,
			ResponseSHA256: sha([]byte(a.body)), ResponseBytes: int64(len(a.body))}
		if l != want || c.ResponseSHA256 != l.ResponseSHA256 || c.Status != l.Status {
			t.Errorf("line %d\n%+v\nwant\n%+v\n(call %+v)", 2+i, l, want, c)
		}
		if got := string(decoded.calls[i].response); got != a.body {
			t.Errorf("call %d: the tape holds %q, the agent got %q", i+1, got, a.body)
		}
	}
	if l := ls[4]; !bytes.Contains(l, []byte(`"request_sha256":"","request_bytes":0,"status":403`)) {
		t.Errorf("a request refused before its body was read: %s", l)
	}
	if a := rec.answers[5]; a.status != 401 || !strings.Contains(a.body, "Bearer "+redacted) {
		t.Errorf("the echo of the key: %+v", a)
	}
	if a := rec.answers[3]; a.status != 403 || rec.answers[4].status != 403 {
		t.Errorf("refusals: %+v, %+v", a, rec.answers[4])
	}
}

// TestTapeReplays replays the recording with no upstream: the same requests
// get the same answers, byte for byte, and the same Calls and usage.
func TestTapeReplays(t *testing.T) {
	rec := recordScript(t)
	tape := readTape(t, rec.file)
	tape.OnDiverge = func(err error) { t.Errorf("OnDiverge(%v)", err) }
	hs := replayPair(t, tape)
	answers := play(t, hs, script)
	for i := range script {
		if answers[i] != rec.answers[i] {
			t.Errorf("call %d replayed as\n%+v\nrecorded\n%+v", i+1, answers[i], rec.answers[i])
		}
	}
	for i, h := range hs {
		h.close()
		calls := timeless(h.rec.snapshot())
		if fmt.Sprint(calls) != fmt.Sprint(rec.calls[i]) {
			t.Errorf("gateway %d reported\n%+v\nrecorded\n%+v", i, calls, rec.calls[i])
		}
		if u := h.g.Usage(); fmt.Sprint(u) != fmt.Sprint(rec.usage[i]) {
			t.Errorf("gateway %d usage\n%+v\nrecorded\n%+v", i, u, rec.usage[i])
		}
	}
	if rec.usage[1][0].InputTokens == 0 {
		t.Error("the recording has no usage: the comparison proves nothing")
	}
	if err := tape.Done(); err != nil {
		t.Errorf("Done = %v", err)
	}
	if err := tape.Err(); err != nil {
		t.Errorf("Err = %v", err)
	}
}

// divergence replays steps against the script's recording and returns the
// answers and the Tape, with what OnDiverge was given.
func divergence(t *testing.T, steps []step) ([]answer, *Tape, []error) {
	t.Helper()
	rec := recordScript(t)
	tape := readTape(t, rec.file)
	var mu sync.Mutex
	var told []error
	tape.OnDiverge = func(err error) { mu.Lock(); told = append(told, err); mu.Unlock() }
	hs := replayPair(t, tape)
	answers := play(t, hs, steps)
	for _, h := range hs {
		h.close()
	}
	return answers, tape, told
}

// wantConflict checks that a is the gateway's JSON error, 409, holding msg.
func wantConflict(t *testing.T, a answer, msg string) {
	t.Helper()
	var e struct {
		Type  string `json:"type"`
		Error struct{ Type, Message string }
	}
	if err := json.Unmarshal([]byte(a.body), &e); err != nil || a.status != 409 || a.ctype != "application/json" ||
		e.Type != "error" || e.Error.Type != "proctor_gateway_error" || !strings.Contains(e.Error.Message, msg) {
		t.Errorf("got %+v, want a 409 error holding %q", a, msg)
	}
}

func TestTapeDiverges(t *testing.T) {
	t.Run("another body", func(t *testing.T) {
		steps := append([]step(nil), script...)
		steps[1].body = `{"model":"claude-x","stream":true,"max_tokens":9,"messages":[{"role":"user","content":"ho"}]}`
		answers, tape, told := divergence(t, steps)
		want := &DivergedError{Call: 2, Want: sha([]byte(script[1].body)), Got: sha([]byte(steps[1].body))}
		msg := fmt.Sprintf("the agent diverged at call 2: recorded request sha256:%s…, got sha256:%s…", want.Want[:12], want.Got[:12])
		if answers[0].status != 200 {
			t.Errorf("call 1 before the divergence: %+v", answers[0])
		}
		for _, a := range answers[1:] {
			wantConflict(t, a, msg) // later calls too, even those that match
		}
		var d *DivergedError
		if err := tape.Err(); !errors.As(err, &d) || !errors.Is(err, ErrDiverged) || d.Call != 2 || d.Want != want.Want || d.Got != want.Got || err.Error() != msg {
			t.Errorf("Err = %v, want %q", err, msg)
		}
		if len(told) != 1 || told[0] != tape.Err() {
			t.Errorf("OnDiverge was told %v, want once %v", told, tape.Err())
		}
		if err := tape.Done(); err != tape.Err() {
			t.Errorf("Done = %v, want %v", err, tape.Err())
		}
	})
	t.Run("at once", func(t *testing.T) {
		// Many wrong requests at once: OnDiverge is told once, and no
		// request is answered from the recording after the divergence.
		steps := make([]step, 20)
		for i := range steps {
			steps[i] = step{0, "POST", "/v1/chat/completions", fmt.Sprintf(`{"n":%d}`, i)}
		}
		rec := recordScript(t)
		tape := readTape(t, rec.file)
		var told atomic.Int32
		tape.OnDiverge = func(error) { told.Add(1) }
		hs := replayPair(t, tape)
		var wg sync.WaitGroup
		for _, s := range steps {
			wg.Go(func() {
				if a := play(t, hs, []step{s})[0]; a.status != 409 {
					t.Errorf("%+v", a)
				}
			})
		}
		wg.Wait()
		if n := told.Load(); n != 1 {
			t.Errorf("OnDiverge told %d times, want once", n)
		}
	})
	t.Run("another target", func(t *testing.T) {
		steps := append([]step(nil), script[:3]...)
		steps[2].path = "/v1/models?limit=3"
		answers, tape, told := divergence(t, steps)
		wantConflict(t, answers[2], "recorded GET /v1/models?limit=2&after=a%26b on openai, got GET /v1/models?limit=3 on openai")
		if d := new(DivergedError); !errors.As(tape.Err(), &d) || d.Call != 3 || d.Want != d.Got || len(told) != 1 {
			t.Errorf("Err = %v, told %v", tape.Err(), told)
		}
	})
	t.Run("another gateway", func(t *testing.T) {
		steps := []step{script[0]}
		steps[0].gw = 1
		answers, tape, _ := divergence(t, steps)
		wantConflict(t, answers[0], "recorded POST /v1/chat/completions on openai, got POST /v1/chat/completions on anthropic")
		if d := new(DivergedError); !errors.As(tape.Err(), &d) || d.Call != 1 {
			t.Errorf("Err = %v", tape.Err())
		}
	})
	t.Run("refused before its body", func(t *testing.T) {
		steps := []step{{0, "GET", "/v1/batches", ""}}
		answers, tape, _ := divergence(t, steps)
		wantConflict(t, answers[0], "got no body (refused before it was read)")
		if d := new(DivergedError); !errors.As(tape.Err(), &d) || d.Call != 1 || d.Got != "" || d.Want == "" {
			t.Errorf("Err = %v", tape.Err())
		}
	})
	t.Run("past the end", func(t *testing.T) {
		steps := append(append([]step(nil), script...), script[0])
		answers, tape, told := divergence(t, steps)
		for i, a := range answers[:len(script)] {
			if a.status == 409 {
				t.Fatalf("call %d: %+v", i+1, a)
			}
		}
		wantConflict(t, answers[len(script)], "the agent diverged at call 8: recorded the end of the recording (7 calls), got request sha256:")
		if d := new(DivergedError); !errors.As(tape.Err(), &d) || d.Call != 8 || d.Want != "" || d.Got != sha([]byte(script[0].body)) || len(told) != 1 {
			t.Errorf("Err = %v, told %v", tape.Err(), told)
		}
	})
	t.Run("too few calls", func(t *testing.T) {
		_, tape, told := divergence(t, script[:3])
		if err := tape.Err(); err != nil {
			t.Errorf("Err before Done = %v", err)
		}
		err := tape.Done()
		if d := new(DivergedError); !errors.As(err, &d) || d.Call != 4 || d.Got != "" ||
			err.Error() != "the agent diverged at call 4: the agent made 3 of the 7 recorded calls" {
			t.Errorf("Done = %v", err)
		}
		if tape.Err() != err || len(told) != 0 {
			t.Errorf("Err = %v, told %v", tape.Err(), told)
		}
	})
	t.Run("the gateway refuses otherwise", func(t *testing.T) {
		// A recording where the refused call 4 had got a 200: the gateway,
		// which refuses it, cannot replay it.
		rec := recordScript(t)
		ls := lines(rec.file)
		ls[4] = bytes.Replace(ls[4], []byte(`"status":403`), []byte(`"status":200`), 1)
		tape := readTape(t, bytes.Join(ls, nil))
		hs := replayPair(t, tape)
		answers := play(t, hs, script[:5])
		wantConflict(t, answers[3], "the gateway diverged at call 4: it refuses GET /v1/files on openai itself (status 403, body sha256:")
		wantConflict(t, answers[4], "the gateway diverged at call 4")
	})
}

// TestTapeCut records a response the upstream cut: the replay cuts it at
// the same byte.
func TestTapeCut(t *testing.T) {
	tape := NewTape()
	hs := newHarness(t, config{path: "/v1", tune: func(g *Gateway) { g.tape = tape }}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: partial\n\n")
		w.(http.Flusher).Flush()
		conn, _, _ := w.(http.Hijacker).Hijack()
		conn.Close()
	})
	cutCall := func(hs *harness) (int, string) {
		t.Helper()
		resp, err := hs.client.Post(hs.base+"/responses", "application/json", strings.NewReader(`{"stream":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil {
			t.Error("the agent got a cut response as if whole")
		}
		return resp.StatusCode, string(b)
	}
	status, body := cutCall(hs)
	hs.close()
	file := encode(t, tape)
	if !bytes.Contains(file, []byte(`"cut":true}`)) {
		t.Fatalf("the cut is not recorded:\n%s", file)
	}
	replay := startGateway(t, Options{Spec: specFor(t, "openai", "http://upstream.invalid/v1"), Replay: readTape(t, file), Transport: noNetwork{t}}, nil, nil)
	if s, b := cutCall(replay); s != status || b != body || b != "data: partial\n\n" {
		t.Errorf("replayed %d %q, recorded %d %q", s, b, status, body)
	}
	if c := replay.rec.wait(t, 1)[0]; c.Error != "cut, as in the recording" {
		t.Errorf("recorded %+v", c)
	}
}

// TestTapeOrder checks that calls are numbered in the order their bodies
// were read, not the order they came in.
func TestTapeOrder(t *testing.T) {
	tape := NewTape()
	up := &spy{}
	hs := newHarness(t, config{path: "/v1", tune: func(g *Gateway) { g.tape = tape }}, up.ServeHTTP)
	conn, err := net.Dial("tcp", hs.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\nConnection: close\r\n\r\n{\"model\":")
	time.Sleep(50 * time.Millisecond) // the gateway reads the head, then waits for the body
	hs.do(t, "POST", "/v1/embeddings", []byte(`{"input":"x"}`), nil)
	io.WriteString(conn, `"m"}`)
	if b, err := io.ReadAll(conn); err != nil || !bytes.HasPrefix(b, []byte("HTTP/1.1 200")) {
		t.Fatalf("%q, %v", b, err)
	}
	hs.close()
	if len(tape.calls) != 2 || tape.calls[0].target != "/v1/embeddings" || tape.calls[1].target != "/v1/chat/completions" {
		t.Errorf("calls %+v, %+v", tape.calls[0], tape.calls[1])
	}
}

// TestTapeConcurrent records many calls at once through two gateways: every
// one is on the tape once, numbered without gaps.
func TestTapeConcurrent(t *testing.T) {
	tape := NewTape()
	up := httptest.NewServer(fakeProvider(t))
	t.Cleanup(up.Close)
	hs := []*harness{
		startGateway(t, Options{Spec: specFor(t, "openai", up.URL+"/v1"), Key: testKey, Tape: tape}, nil, up),
		startGateway(t, Options{Spec: specFor(t, "anthropic", up.URL), Key: testKey, Tape: tape}, nil, up),
	}
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s := script[1]
			if i%2 == 0 {
				s = script[0]
			}
			s.body = strings.Replace(s.body, `"hi"`, fmt.Sprintf(`"hi %d"`, i), 1)
			play(t, hs, []step{s})
		})
	}
	wg.Wait()
	for _, h := range hs {
		h.close()
	}
	file := encode(t, tape)
	decoded := readTape(t, file)
	seen := make(map[string]bool)
	for i, c := range decoded.calls {
		if c.seq != i+1 || c.status != 200 || seen[c.requestSHA256] {
			t.Errorf("call %+v", c)
		}
		seen[c.requestSHA256] = true
	}
	if len(seen) != n {
		t.Errorf("%d calls on the tape, want %d", len(seen), n)
	}
}

// TestTapeLimits fills a tape past each limit: recording fails, loudly,
// and the file cannot be written.
func TestTapeLimits(t *testing.T) {
	big := strings.Repeat("x", 4000)
	for _, tc := range []struct {
		name   string
		limit  func(*Tape)
		steps  []step
		status []int // what the agent gets
	}{
		{"calls", func(tp *Tape) { tp.maxCalls = 2 }, []step{
			{0, "GET", "/v1/models", ""}, {0, "GET", "/v1/models", ""}, {0, "GET", "/v1/models", ""}, {0, "GET", "/v1/files", ""},
		}, []int{200, 200, 503, 503}},
		{"a request body", func(tp *Tape) { tp.maxBodies = 1000 }, []step{
			{0, "POST", "/v1/embeddings", `{"input":"` + big + `"}`}, {0, "GET", "/v1/models", ""},
		}, []int{503, 503}},
		{"a response body", func(tp *Tape) { tp.maxBodies = 1000 }, []step{
			{0, "GET", "/v1/models?q=" + big, ""}, {0, "GET", "/v1/models", ""},
		}, []int{200, 503}},
		{"the calls' lines", func(tp *Tape) { tp.maxMeta = 2 * callLineBytes }, []step{
			{0, "GET", "/v1/models", ""}, {0, "GET", "/v1/models?q=" + big, ""}, {0, "GET", "/v1/models", ""},
		}, []int{200, 503, 503}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tape := NewTape()
			tc.limit(tape)
			up := httptest.NewServer(fakeProvider(t))
			t.Cleanup(up.Close)
			hs := startGateway(t, Options{Spec: specFor(t, "openai", up.URL+"/v1"), Key: testKey, Tape: tape}, nil, up)
			answers := play(t, []*harness{hs}, tc.steps)
			for i, a := range answers {
				if a.status != tc.status[i] {
					t.Errorf("call %d: %+v, want status %d", i+1, a, tc.status[i])
				}
				if a.status == 503 && !strings.Contains(a.body, "recording: recording full") {
					t.Errorf("call %d: %s", i+1, a.body)
				}
			}
			hs.close()
			if calls := hs.rec.snapshot(); len(calls) != len(tc.steps) {
				t.Errorf("Record saw %d calls, want %d", len(calls), len(tc.steps))
			}
			if err := tape.Err(); !errors.Is(err, ErrTapeFull) {
				t.Errorf("Err = %v, want ErrTapeFull", err)
			}
			if err := tape.Done(); !errors.Is(err, ErrTapeFull) {
				t.Errorf("Done = %v, want ErrTapeFull", err)
			}
			var b bytes.Buffer
			if _, err := tape.WriteTo(&b); !errors.Is(err, ErrTapeFull) || b.Len() != 0 {
				t.Errorf("WriteTo = %v, wrote %d bytes", err, b.Len())
			}
		})
	}
}

// TestTapeInProgress checks that a recording with a call still being
// served is not written.
func TestTapeInProgress(t *testing.T) {
	tape := NewTape()
	release := make(chan struct{})
	hs := newHarness(t, config{path: "/v1", tune: func(g *Gateway) { g.tape = tape }}, func(w http.ResponseWriter, r *http.Request) {
		<-release
	})
	done := make(chan struct{})
	go func() { defer close(done); hs.do(t, "GET", "/v1/models", nil, nil) }()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		tape.mu.Lock()
		n := len(tape.calls)
		tape.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never reached the tape")
		}
	}
	if _, err := tape.WriteTo(io.Discard); err == nil || !strings.Contains(err.Error(), "call 1 is still being served") {
		t.Errorf("WriteTo = %v", err)
	}
	close(release)
	<-done
	hs.close()
	if _, err := tape.WriteTo(io.Discard); err != nil {
		t.Errorf("WriteTo after Close = %v", err)
	}
}

// TestTapeOptions checks that New takes a Tape in its own mode only, and
// that a replaying gateway needs no key but scrubs one it is given.
func TestTapeOptions(t *testing.T) {
	spec := specFor(t, "openai", "http://upstream.invalid/v1")
	replay := readTape(t, encode(t, NewTape()))
	for _, o := range []Options{
		{Spec: spec, Key: testKey, Tape: NewTape(), Replay: replay},
		{Spec: spec, Key: testKey, Tape: replay},
		{Spec: spec, Replay: NewTape()},
	} {
		if _, err := New(o); !errors.Is(err, ErrOptions) {
			t.Errorf("New(Tape %p, Replay %p) = %v, want ErrOptions", o.Tape, o.Replay, err)
		}
	}
	if _, err := New(Options{Spec: spec, Tape: NewTape()}); !errors.Is(err, ErrKey) {
		t.Errorf("recording without a key: %v", err)
	}
	if _, err := New(Options{Spec: spec, Key: "short", Replay: replay}); !errors.Is(err, ErrKey) {
		t.Errorf("replaying with a bad key: %v", err)
	}

	// A recording that holds the key (no gateway writes one): replayed by a
	// gateway given the key, the key is scrubbed.
	tape := NewTape()
	c, _ := tape.begin("openai", "GET", "/v1/models", sha(nil), nil)
	tee := &tee{t: tape, c: c}
	tee.write([]byte(`{"key":"` + testKey + `"}`))
	tape.end(c, 200, "application/json", tee, false)
	hs := startGateway(t, Options{Spec: spec, Key: testKey, Replay: readTape(t, encode(t, tape)), Transport: noNetwork{t}}, nil, nil)
	if _, body := hs.do(t, "GET", "/v1/models", nil, nil); string(body) != `{"key":"`+redacted+`"}` {
		t.Errorf("replayed %q", body)
	}
}

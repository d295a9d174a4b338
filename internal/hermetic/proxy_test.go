package hermetic

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// call is one request a client makes.
type call struct {
	name, method, url, body string
	hdr                     []string
}

var worldCalls = []call{
	{name: "installer", method: "GET", url: "https://astral.sh/uv/0.9.5/install.sh"},
	{name: "redirect to a signed URL on another host", method: "GET", url: "https://astral.sh/uv/0.9.5/uv-x86_64-unknown-linux-gnu.tar.gz"},
	{name: "index as JSON", method: "GET", url: "https://index.example.org/simple/tinypkg/", hdr: []string{"Accept", "application/vnd.pypi.simple.v1+json"}},
	{name: "index as HTML", method: "GET", url: "https://index.example.org/simple/tinypkg/", hdr: []string{"Accept", "text/html"}},
	{name: "wheel", method: "GET", url: "https://index.example.org/files/tinypkg-1.0-py3-none-any.whl"},
	{name: "POST a", method: "POST", url: "https://index.example.org/api/echo", body: "a"},
	{name: "POST b", method: "POST", url: "https://index.example.org/api/echo", body: "b"},
	{name: "HEAD", method: "HEAD", url: "https://astral.sh/uv/0.9.5/install.sh"},
	{name: "404", method: "GET", url: "https://astral.sh/missing"},
	{name: "204", method: "GET", url: "https://index.example.org/nobody"},
	{name: "gzip whatever was asked", method: "GET", url: "https://index.example.org/gzipped"},
	{name: "plain http", method: "GET", url: "http://deb.example.org/debian/dists/stable/InRelease"},
	{name: "plain http binary", method: "GET", url: "http://deb.example.org/debian/pool/main/c/curl/curl_1.0_amd64.deb"},
	{name: "plain http 404", method: "GET", url: "http://deb.example.org/nothing?q=1"},
}

// TestRecordThenReplay records a client's fetches from the test's
// internet, takes the internet down, and replays them: every answer is
// the same, status, headers and body, however often asked, and nothing
// is a violation.
func TestRecordThenReplay(t *testing.T) {
	s := record(t, nil)
	c, w := s.c, s.w

	first := map[string]response{}
	for _, cl := range worldCalls {
		first[cl.name] = do(t, c, cl.method, cl.url, cl.body, cl.hdr...)
	}
	if got := first["installer"]; got.Status != 200 || got.Body != installScript {
		t.Fatalf("installer through the recorder: %d %q", got.Status, got.Body)
	}
	if got := first["redirect to a signed URL on another host"]; got.Body != string(w.tarball) {
		t.Fatalf("release through the recorder: %d, %d bytes", got.Status, len(got.Body))
	}
	if a, b := first["index as JSON"].Body, first["index as HTML"].Body; a == b || !strings.HasPrefix(a, "{") {
		t.Fatalf("Accept chose no representation: %q / %q", a, b)
	}
	if a, b := first["POST a"].Body, first["POST b"].Body; a == b {
		t.Fatalf("two bodies, one answer: %q", a)
	}
	// Asked again while recording: the answer recorded first, as a replay
	// will give it.
	for _, cl := range worldCalls {
		if got := do(t, c, cl.method, cl.url, cl.body, cl.hdr...); !reflect.DeepEqual(got, first[cl.name]) {
			t.Errorf("%s asked again while recording:\n got %+v\nwant %+v", cl.name, got, first[cl.name])
		}
	}
	r := s.finish()
	if err := s.st.Save("task-env-tests", r); err != nil {
		t.Fatal(err)
	}
	for _, d := range s.rd.list() {
		if d.Violation || d.Mode != ModeRecord {
			t.Errorf("recording decision %+v", d)
		}
	}

	w.stop() // the internet is gone
	conns := w.conns.Load()
	loaded, err := s.st.Load("task-env-tests")
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Digest() != r.Digest() || !strings.HasPrefix(r.Digest(), "sha256:") {
		t.Fatalf("digest %s, loaded %s", r.Digest(), loaded.Digest())
	}
	rp := s.replay(loaded)
	for round := range 2 {
		for _, cl := range worldCalls {
			if got := do(t, rp.c, cl.method, cl.url, cl.body, cl.hdr...); !reflect.DeepEqual(got, first[cl.name]) {
				t.Errorf("%s replayed (round %d):\n got %+v\nwant %+v", cl.name, round, got, first[cl.name])
			}
		}
	}
	rp.Close()
	if w.conns.Load() != conns {
		t.Error("the replay connected to an upstream server")
	}
	if v := rp.pd.violations(); len(v) != 0 || rp.Violations() != 0 || rp.Err() != nil {
		t.Errorf("violations replaying what was recorded: %+v (%d), err %v", v, rp.Violations(), rp.Err())
	}
	for _, d := range rp.pd.list() {
		if d.Method != "CONNECT" && (!d.Recorded || d.Mode != ModeReplay) {
			t.Errorf("replay decision %+v", d)
		}
	}
	// Every recorded exchange was asked twice while recording.
	for _, e := range loaded.Exchanges() {
		if e.Count < 2 {
			t.Errorf("%s %s asked %d times, want 2 or more", e.Method, e.URL, e.Count)
		}
	}
}

// TestReplayIsByteExact compares the raw bytes a client reads, plain and
// through a tunnel, when recording and when replaying.
func TestReplayIsByteExact(t *testing.T) {
	s := record(t, nil)
	addr, tr := s.addr, s.tr
	plain := "GET http://deb.example.org/debian/dists/stable/InRelease HTTP/1.1\r\nHost: deb.example.org\r\nUser-Agent: Debian APT-HTTP/1.3 (2.6.1)\r\nConnection: close\r\n\r\n"
	tunneled := "GET /uv/0.9.5/install.sh HTTP/1.1\r\nHost: astral.sh\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\nConnection: close\r\n\r\n"
	head := "HEAD /uv/0.9.5/install.sh HTTP/1.1\r\nHost: astral.sh\r\nAccept: */*\r\nConnection: close\r\n\r\n"
	wantPlain := rawPlain(t, addr, plain)
	wantTLS, err := rawTLS(t, addr, astralHost, astralHost, tr.Bundle, tunneled)
	if err != nil {
		t.Fatal(err)
	}
	wantHead, err := rawTLS(t, addr, astralHost, astralHost, tr.Bundle, head)
	if err != nil {
		t.Fatal(err)
	}
	r := s.finish()
	s.w.stop()
	for _, want := range []string{wantPlain, wantTLS, wantHead} {
		if head, _, _ := strings.Cut(want, "\r\n\r\n"); strings.Contains(head, "Date:") || !strings.HasPrefix(want, "HTTP/1.1 200 OK\r\n") {
			t.Fatalf("recorded answer:\n%s", want)
		}
	}
	if !strings.Contains(wantHead, "Content-Length: "+strconv.Itoa(len(installScript))+"\r\n") {
		t.Errorf("HEAD answer without the recorded Content-Length:\n%s", wantHead)
	}
	raddr := s.replay(r).addr
	if got := rawPlain(t, raddr, plain); got != wantPlain {
		t.Errorf("plain http replayed:\n%q\nrecorded:\n%q", got, wantPlain)
	}
	// Another client's headers (but Accept) change nothing.
	other := strings.Replace(tunneled, "curl/7.88.1", "uv/0.9.5", 1)
	if got, err := rawTLS(t, raddr, astralHost, astralHost, tr.Bundle, other); err != nil || got != wantTLS {
		t.Errorf("https replayed (%v):\n%q\nrecorded:\n%q", err, got, wantTLS)
	}
	if got, err := rawTLS(t, raddr, astralHost, astralHost, tr.Bundle, head); err != nil || got != wantHead {
		t.Errorf("HEAD replayed (%v):\n%q\nrecorded:\n%q", err, got, wantHead)
	}
}

// TestHeadersForwardedAndKept checks what the recorder sends upstream and
// keeps: no ranges, conditions, encodings, hop-by-hop or proxy headers
// upstream; no Date, cookie or server noise back; no sniffed type. A
// ranged or conditional request gets the whole representation.
func TestHeadersForwardedAndKept(t *testing.T) {
	s := record(t, nil)
	addr, tr, w := s.addr, s.tr, s.w
	req := "GET /headers HTTP/1.1\r\nHost: index.example.org\r\nUser-Agent: pip/23.0.1\r\nRange: bytes=0-3\r\nIf-None-Match: \"v1\"\r\n" +
		"If-Modified-Since: Sat, 01 Nov 2025 00:00:00 GMT\r\nAccept-Encoding: gzip, br\r\nX-Custom: kept\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n" +
		"Proxy-Authorization: Basic eDp5\r\n\r\n"
	got, err := rawTLS(t, addr, indexHost, indexHost, tr.Bundle, req)
	if err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	seen := w.seen
	w.mu.Unlock()
	if len(seen) != 1 {
		t.Fatalf("upstream saw %d requests", len(seen))
	}
	h := seen[0]
	for _, k := range []string{"Range", "If-None-Match", "If-Modified-Since", "X-Hop", "Proxy-Authorization"} {
		if v := h.Values(k); len(v) != 0 {
			t.Errorf("upstream got %s: %q", k, v)
		}
	}
	if h.Get("Accept-Encoding") != "identity" || h.Get("User-Agent") != "pip/23.0.1" || h.Get("X-Custom") != "kept" {
		t.Errorf("upstream headers: %v", h)
	}
	head, body, _ := strings.Cut(got, "\r\n\r\n")
	if !strings.HasPrefix(head, "HTTP/1.1 200 OK\r\n") || body != "no type given: text sniffing would say text/plain\n" {
		t.Fatalf("answer:\n%s", got)
	}
	for _, k := range []string{"Date:", "Set-Cookie:", "X-Request-Id:", "Content-Type:"} {
		if strings.Contains(head, k) {
			t.Errorf("answer has %s:\n%s", k, head)
		}
	}
	if !strings.Contains(head, "Etag: \"v1\"") {
		t.Errorf("answer lost its ETag:\n%s", head)
	}

	// A range asked while recording: the whole representation, 200.
	for _, hdr := range [][]string{{"Range", "bytes=0-9"}, {"If-Range", "x", "Range", "bytes=5-"}, {"If-Modified-Since", "Sat, 01 Nov 2025 00:00:00 GMT"}} {
		r := do(t, s.c, "GET", "https://index.example.org/ranged", "", hdr...)
		if r.Status != 200 || r.Body != string(w.big) {
			t.Errorf("%v: %d, %d bytes; want 200 and the whole body", hdr, r.Status, len(r.Body))
		}
	}
}

// TestRetriedAnswer: a 5xx is fetched again when asked again while
// recording; the answer that came last is kept and replayed every time.
func TestRetriedAnswer(t *testing.T) {
	s := record(t, nil)
	c, w := s.c, s.w
	u := "https://index.example.org/flaky"
	if got := do(t, c, "GET", u, ""); got.Status != 503 {
		t.Fatalf("first: %d", got.Status)
	}
	for range 3 {
		if got := do(t, c, "GET", u, ""); got.Status != 200 || got.Body != "steady now\n" {
			t.Fatalf("again: %d %q", got.Status, got.Body)
		}
	}
	if n := w.flaky.Load(); n != 2 {
		t.Errorf("upstream asked %d times, want 2 (the 503, then the 200, then from the recording)", n)
	}
	r := s.finish()
	ex := r.Exchanges()
	if len(ex) != 1 || ex[0].Status != 200 || ex[0].Count != 4 {
		t.Fatalf("recorded %+v", ex)
	}
	rp := s.replay(r)
	for range 3 {
		if got := do(t, rp.c, "GET", u, ""); got.Status != 200 {
			t.Fatalf("replayed: %d", got.Status)
		}
	}
}

// TestBodyKeysTheRequest: the same URL with another body is another
// request.
func TestBodyKeysTheRequest(t *testing.T) {
	s := record(t, nil)
	u := "https://index.example.org/api/echo"
	got := do(t, s.c, "POST", u, "payload")
	sum := sha256.Sum256([]byte("payload"))
	if got.Body != "POST "+hex.EncodeToString(sum[:])+"\n" {
		t.Fatalf("upstream got another body: %q", got.Body)
	}
	rp := s.replay(s.finish())
	if again := do(t, rp.c, "POST", u, "payload"); !reflect.DeepEqual(again, got) {
		t.Errorf("same body replayed: %+v", again)
	}
	if other := do(t, rp.c, "POST", u, "exfiltrated tests"); other.Status != 403 {
		t.Errorf("another body: %d %q", other.Status, other.Body)
	}
	if v := rp.pd.violations(); len(v) != 1 || v[0].URL != u || !strings.Contains(v[0].Reason, "not in the recording") {
		t.Errorf("violations %+v", v)
	}
}

// TestRecordingFailsWhenStoreFails: a body the store cannot keep fails
// the recording, not the request alone.
func TestRecordingFailsWhenStoreFails(t *testing.T) {
	s := record(t, nil)
	st, rec := s.st, s.rec
	// The blob directory is gone, a file in its place: no body can be
	// kept, whoever runs the test.
	if err := os.RemoveAll(st.BlobDir()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(st.BlobDir(), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := do(t, s.c, "GET", "https://astral.sh/uv/0.9.5/install.sh", ""); got.Status != 503 {
		t.Errorf("status %d", got.Status)
	}
	rec.Close()
	if _, err := rec.Recording(); err == nil || errors.Is(err, ErrRecordingFull) {
		t.Errorf("Recording: %v", err)
	}
}

// TestReplayCutsAChangedBody: a body changed on disk after the recording
// was loaded is not served: the connection is cut before its last chunk,
// the replayer's Err says why, and it is no violation of the agent's.
func TestReplayCutsAChangedBody(t *testing.T) {
	s := record(t, nil)
	u := "https://index.example.org/big"
	if got := do(t, s.c, "GET", u, ""); got.Status != 200 {
		t.Fatal(got.Status)
	}
	r := s.finish()
	b := r.Blobs()[0]
	// The same size, the last byte changed: only hashing the whole finds it.
	f, err := os.OpenFile(filepath.Join(s.st.BlobDir(), BlobFile(b.SHA256)), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte{'X'}, b.Size-1)
	f.Close()
	rp := s.replay(r)
	resp, err := rp.c.Get(u)
	if err == nil {
		n, rerr := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if rerr == nil {
			t.Fatalf("a changed body was served whole (%d bytes)", n)
		}
		if n >= b.Size-64<<10+1 {
			t.Errorf("%d bytes of %d served: the last chunk was not held back", n, b.Size)
		}
	}
	rp.Close()
	if err := rp.Err(); !errors.Is(err, ErrTampered) {
		t.Errorf("Err: %v", err)
	}
	if len(rp.pd.violations()) != 0 {
		t.Errorf("a damaged store reported as the agent's violation: %+v", rp.pd.violations())
	}
}

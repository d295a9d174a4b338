package hermetic

import (
	"errors"
	"strings"
	"testing"
)

// TestLimits: a body over MaxBody is a recorded refusal the replay gives
// again; bodies over MaxTotal, or requests over MaxExchanges, fail the
// recording; a request body over MaxRequestBody is refused.
func TestLimits(t *testing.T) {
	t.Run("body over MaxBody", func(t *testing.T) {
		s := record(t, func(o *RecordOptions) { o.Limits.MaxBody = 100 << 10 })
		got := do(t, s.c, "GET", "https://index.example.org/big", "")
		if got.Status != 502 || !strings.Contains(got.Body, "response body over 102400 bytes") {
			t.Fatalf("got %d %q", got.Status, got.Body)
		}
		r := s.finish()
		s.w.stop()
		rp := s.replay(r)
		again := do(t, rp.c, "GET", "https://index.example.org/big", "")
		if again.Status != 502 || again.Body != got.Body || len(rp.pd.violations()) != 0 {
			t.Errorf("replayed %d %q, violations %+v", again.Status, again.Body, rp.pd.violations())
		}
		if n := len(r.Blobs()); n != 0 {
			t.Errorf("%d bodies kept for a refusal", n)
		}
	})
	t.Run("bodies over MaxTotal", func(t *testing.T) {
		s := record(t, func(o *RecordOptions) { o.Limits.MaxTotal = 256<<10 + 100 })
		c, rec := s.c, s.rec
		if got := do(t, c, "GET", "https://index.example.org/big", ""); got.Status != 200 {
			t.Fatalf("first body: %d", got.Status)
		}
		// The same bytes again are the same body, counted once.
		if got := do(t, c, "GET", "https://index.example.org/ranged", ""); got.Status != 200 {
			t.Fatalf("the same body again: %d", got.Status)
		}
		if got := do(t, c, "GET", "https://index.example.org/files/tinypkg-1.0-py3-none-any.whl", ""); got.Status != 503 || !strings.Contains(got.Body, "over its limits") {
			t.Fatalf("another body: %d, %d bytes", got.Status, len(got.Body))
		}
		if got := do(t, c, "GET", "https://astral.sh/uv/0.9.5/install.sh", ""); got.Status != 503 {
			t.Fatalf("after the recording failed: %d", got.Status)
		}
		rec.Close()
		if _, err := rec.Recording(); !errors.Is(err, ErrRecordingFull) || !errors.Is(rec.Err(), ErrRecordingFull) {
			t.Errorf("Recording: %v", err)
		}
	})
	t.Run("requests over MaxExchanges", func(t *testing.T) {
		s := record(t, func(o *RecordOptions) { o.Limits.MaxExchanges = 2 })
		c, rec := s.c, s.rec
		for i, u := range []string{"https://astral.sh/a", "https://astral.sh/b", "https://astral.sh/a", "https://astral.sh/c"} {
			want := 404
			if i == 3 {
				want = 503
			}
			if got := do(t, c, "GET", u, ""); got.Status != want {
				t.Errorf("%s: %d, want %d", u, got.Status, want)
			}
		}
		rec.Close()
		if _, err := rec.Recording(); !errors.Is(err, ErrRecordingFull) {
			t.Errorf("Recording: %v", err)
		}
	})
	t.Run("request body over MaxRequestBody", func(t *testing.T) {
		c := record(t, func(o *RecordOptions) { o.Limits.MaxRequestBody = 1 << 10 }).c
		if got := do(t, c, "POST", "https://index.example.org/api/echo", strings.Repeat("x", 2<<10)); got.Status != 413 {
			t.Errorf("got %d %q", got.Status, got.Body)
		}
		if got := do(t, c, "POST", "https://index.example.org/api/echo", strings.Repeat("x", 1<<10)); got.Status != 200 {
			t.Errorf("at the limit: %d %q", got.Status, got.Body)
		}
	})
}

package gateway

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

const scrubKey = "sk-abcab-XYZ"

// scrubAll runs data through a scrubber in pieces cut at cuts.
func scrubAll(t testing.TB, key string, data []byte, cuts ...int) []byte {
	t.Helper()
	var out bytes.Buffer
	s := newScrubber(&out, key)
	prev := 0
	for _, c := range append(cuts, len(data)) {
		c = max(prev, min(c, len(data)))
		if n, err := s.Write(data[prev:c]); n != c-prev || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
		prev = c
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestScrubber(t *testing.T) {
	k := scrubKey
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"no key here", "no key here"},
		{k, redacted},
		{"a" + k + "b" + k + k, "a" + redacted + "b" + redacted + redacted},
		{"sk-abcab-XY", "sk-abcab-XY"},              // a prefix only, at the end
		{"sk-abcsk-abcab-XYZ", "sk-abc" + redacted}, // a false start overlapping the key
		{"sk-abcab-sk-abcab-XYZ!", "sk-abcab-" + redacted + "!"},
		{"data: " + k + "\n\ndata: x\n\n", "data: " + redacted + "\n\ndata: x\n\n"},
	} {
		data := []byte(tc.in)
		// Whole, then cut once at every place, then byte by byte.
		if got := scrubAll(t, k, data); string(got) != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
		for i := range data {
			if got := scrubAll(t, k, data, i); string(got) != tc.want {
				t.Errorf("%q cut at %d: got %q, want %q", tc.in, i, got, tc.want)
			}
		}
		var each []int
		for i := range data {
			each = append(each, i)
		}
		if got := scrubAll(t, k, data, each...); string(got) != tc.want {
			t.Errorf("%q byte by byte: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestScrubberPrompt checks that the scrubber holds back only what could
// start the key: a stream's event goes out as soon as it is written.
func TestScrubberPrompt(t *testing.T) {
	var out bytes.Buffer
	s := newScrubber(&out, scrubKey)
	steps := []struct{ write, sent string }{
		{"data: 1\n\n", "data: 1\n\n"},
		{"data: sk-ab", "data: 1\n\ndata: "},
		{"cab-", "data: 1\n\ndata: "},
		{"Q", "data: 1\n\ndata: sk-abcab-Q"},
		{"sk-abcab", "data: 1\n\ndata: sk-abcab-Q"},
		{"sk-abcab-XYZ\n\n", "data: 1\n\ndata: sk-abcab-Qsk-abcab" + redacted + "\n\n"},
	}
	for _, st := range steps {
		s.Write([]byte(st.write))
		if out.String() != st.sent {
			t.Fatalf("after writing %q: sent %q, want %q", st.write, out.String(), st.sent)
		}
	}
}

func TestScrubberWriteError(t *testing.T) {
	boom := errors.New("boom")
	s := newScrubber(failWriter{boom}, scrubKey)
	if _, err := s.Write([]byte("hello")); !errors.Is(err, boom) {
		t.Fatalf("Write error = %v, want %v", err, boom)
	}
}

type failWriter struct{ err error }

func (w failWriter) Write([]byte) (int, error) { return 0, w.err }

// FuzzScrubber checks the streaming scrubber against the one-shot
// replacement, however the input is cut, and that its output never holds
// the key.
func FuzzScrubber(f *testing.F) {
	for _, s := range []string{
		"", scrubKey, "x" + scrubKey[:5] + "|" + scrubKey[5:], scrubKey + scrubKey[:len(scrubKey)-1],
		"sk-abcsk-abcab-XYZ", "data: {\"k\":\"" + scrubKey + "\"}\n\n",
	} {
		f.Add([]byte(s), uint8(3), uint8(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, c1, c2 uint8) {
		want := bytes.ReplaceAll(data, []byte(scrubKey), []byte(redacted))
		got := scrubAll(t, scrubKey, data, int(min(c1, c2)), int(max(c1, c2)))
		if !bytes.Equal(got, want) {
			t.Fatalf("cut at %d, %d: got %q, want %q", c1, c2, got, want)
		}
		if bytes.Contains(got, []byte(scrubKey)) {
			t.Fatalf("the key is in the output %q", got)
		}
	})
}

func TestCheckKey(t *testing.T) {
	for _, key := range []string{"", "tiny1", DummyKey, "has space 123", "br[acket]12", "tab\tkey12345", "redacted", "nön-ascii-key", `quote"key123`, `back\slash12`, "html<key>123", "amp&key12345"} {
		err := checkKey("openai", key)
		if !errors.Is(err, ErrKey) {
			t.Errorf("checkKey(%q) = %v, want ErrKey", key, err)
			continue
		}
		if key != "" && strings.Contains(err.Error(), key) {
			t.Errorf("the error %q quotes the key", err)
		}
	}
	if err := checkKey("openai", "sk-proj-Abc_123.456+/="); err != nil {
		t.Errorf("a plausible key is refused: %v", err)
	}
}

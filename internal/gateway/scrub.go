package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// redacted replaces every occurrence of the real key in what the agent gets.
// Its brackets cannot be part of a key (checkKey), so no key can straddle a
// replacement, and replacing cannot make a new occurrence.
const redacted = "[redacted]"

// minKeyLen keeps short "keys" from wrecking bodies: every occurrence of the
// key is replaced, so a key of a few characters would match ordinary text.
const minKeyLen = 8

// checkKey reports why key cannot be used, without quoting it.
func checkKey(name, key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w for the %s gateway: it is empty", ErrKey, name)
	case key == DummyKey:
		return fmt.Errorf("%w for the %s gateway: it is the sandbox's placeholder, not a real key", ErrKey, name)
	case len(key) < minKeyLen:
		return fmt.Errorf("%w for the %s gateway: shorter than %d bytes", ErrKey, name, minKeyLen)
	case strings.Contains(redacted, key):
		return fmt.Errorf("%w for the %s gateway: it is part of the redaction marker", ErrKey, name)
	}
	// Brackets are the marker's; the others are ones JSON encoders escape,
	// which would hide the key from the scrubber.
	for _, c := range []byte(key) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`[]"\<>&`, c) >= 0 {
			return fmt.Errorf("%w for the %s gateway: only printable ASCII without space or any of []\"\\<>& is allowed", ErrKey, name)
		}
	}
	return nil
}

// A scrubber writes what is written to it on to w with every occurrence of
// key replaced by redacted. It holds back only a tail that could be the start
// of the key, so a stream passes through promptly; Close writes that tail.
// Not safe for concurrent use.
type scrubber struct {
	w    io.Writer
	key  []byte
	pend []byte // a proper prefix of key, not yet written
}

func newScrubber(w io.Writer, key string) *scrubber {
	return &scrubber{w: w, key: []byte(key)}
}

func (s *scrubber) Write(p []byte) (int, error) {
	data := p
	if len(s.pend) > 0 {
		data = append(s.pend, p...)
	}
	if bytes.Contains(data, s.key) {
		data = bytes.ReplaceAll(data, s.key, []byte(redacted))
	}
	hold := partialKey(data, s.key)
	if out := data[:len(data)-hold]; len(out) > 0 {
		if _, err := s.w.Write(out); err != nil {
			return 0, err
		}
	}
	s.pend = append(s.pend[:0], data[len(data)-hold:]...)
	return len(p), nil
}

// Close writes the held-back tail, which is never the whole key.
func (s *scrubber) Close() error {
	if len(s.pend) == 0 {
		return nil
	}
	_, err := s.w.Write(s.pend)
	s.pend = s.pend[:0]
	return err
}

// partialKey is the length of the longest tail of data that is a proper
// prefix of key (0 if none).
func partialKey(data, key []byte) int {
	for i := max(0, len(data)-len(key)+1); i < len(data); i++ {
		if data[i] == key[0] && bytes.HasPrefix(key, data[i:]) {
			return len(data) - i
		}
	}
	return 0
}

// scrubString replaces every occurrence of key in s; an empty key (a
// replaying Gateway given none) replaces nothing.
func scrubString(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, redacted)
}

// hopByHop are the headers that concern one connection only (RFC 9110
// section 7.6.1), never forwarded either way.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// removeHopByHop deletes the hop-by-hop headers of h and those its
// Connection header names.
func removeHopByHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for name := range strings.SplitSeq(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
}

// copyResponseHeader copies the upstream's response headers to dst, minus
// hop-by-hop ones, the ones the relay makes void (Content-Length,
// Content-Encoding: the body may change length when scrubbed or decoded),
// Set-Cookie (no cookie is ever sent up), and with the key scrubbed from
// values. A header whose name holds the key in any case is dropped: the
// client has already changed the case of names.
func copyResponseHeader(dst, src http.Header, key string) {
	lowerKey := strings.ToLower(key)
	src = src.Clone()
	removeHopByHop(src)
	for _, name := range []string{"Content-Length", "Content-Encoding", "Set-Cookie"} {
		src.Del(name)
	}
	for name, values := range src {
		if strings.Contains(strings.ToLower(name), lowerKey) {
			continue
		}
		for _, v := range values {
			dst.Add(name, scrubString(v, key))
		}
	}
}

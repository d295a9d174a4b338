package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
)

// Timeline builds a hash-chained event log, one Append at a time. The zero
// value is an empty timeline ready to use. It is safe for concurrent use;
// events are numbered in the order Append is called.
type Timeline struct {
	mu     sync.Mutex
	events []Event
}

// Append adds an event of kind at time at and returns it. detail is
// encoded with encoding/json and must encode as a JSON object; nil records
// {}. Append never fails, so that no event is lost: a detail that is not an
// object is recorded as {"value": DETAIL}, and one that cannot be encoded
// as {"unencodable": "ERROR"}. A kind that breaks the rules of Event.Kind
// is recorded as given, and Sign then refuses the payload.
func (t *Timeline) Append(kind string, detail any, at time.Time) Event {
	d := encodeDetail(detail)
	stamp := FormatTime(at)
	t.mu.Lock()
	defer t.mu.Unlock()
	e := Event{Seq: int64(len(t.events)), Time: stamp, Kind: kind, Detail: d, Prev: Genesis}
	if n := len(t.events); n > 0 {
		e.Prev = t.events[n-1].Hash
	}
	e.Hash = eventHash(e)
	t.events = append(t.events, e)
	return e
}

// Events returns a copy of the events so far.
func (t *Timeline) Events() []Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Event, len(t.events))
	copy(out, t.events)
	return out
}

// Len is the number of events so far.
func (t *Timeline) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.events)
}

// encodeDetail turns any detail into a canonical JSON object.
func encodeDetail(detail any) json.RawMessage {
	if detail == nil {
		return json.RawMessage(`{}`)
	}
	var c []byte
	var err error
	switch d := detail.(type) {
	case json.RawMessage:
		c, err = Canonicalize(d)
	default:
		c, err = canonicalJSON(detail)
	}
	if err != nil {
		c, _ = canonicalJSON(map[string]string{"unencodable": fmt.Sprintf("%T: %v", detail, err)})
		return c
	}
	if !isObject(c) {
		c = append(append([]byte(`{"value":`), c...), '}')
	}
	return c
}

// eventHash is the lowercase hex SHA-256 of the JCS form of e without its
// hash: {"detail":D,"kind":K,"prev":P,"seq":N,"time":T}. D must be a
// canonical JSON object.
func eventHash(e Event) string {
	b := make([]byte, 0, 160+len(e.Detail))
	b = append(b, `{"detail":`...)
	b = append(b, e.Detail...)
	b = append(b, `,"kind":`...)
	b = appendString(b, e.Kind)
	b = append(b, `,"prev":`...)
	b = appendString(b, e.Prev)
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, e.Seq, 10)
	b = append(b, `,"time":`...)
	b = appendString(b, e.Time)
	b = append(b, '}')
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// appendString appends s as an RFC 8785 string: '"' and '\\' escaped, the
// controls as \b \t \n \f \r or \u00xx, everything else as is. s must be
// valid UTF-8 (invalid bytes would be copied and make no valid JSON; the
// fields hashed here are checked before anything is signed).
func appendString(b []byte, s string) []byte {
	const hexdig = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\t':
			b = append(b, '\\', 't')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexdig[c>>4], hexdig[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// checkChain checks the links of a timeline: seq i at index i, prev the
// hash of the event before (Genesis for the first), hash the event's own.
func checkChain(events []Event) *VerifyError {
	for i, e := range events {
		at := "payload.timeline[" + strconv.Itoa(i) + "]"
		if e.Seq != int64(i) {
			return fail(at+".seq", ErrChain, "is %d, want %d", e.Seq, i)
		}
		want := Genesis
		if i > 0 {
			want = events[i-1].Hash
		}
		if e.Prev != want {
			if i == 0 {
				return fail(at+".prev", ErrChain, "is %s, want the genesis value (64 zeros)", e.Prev)
			}
			return fail(at+".prev", ErrChain, "is %s, the hash of event %d is %s", e.Prev, i-1, want)
		}
		if h := eventHash(e); e.Hash != h {
			return fail(at+".hash", ErrChain, "is %s, the event hashes to %s", e.Hash, h)
		}
	}
	return nil
}

// CheckTimeline checks that events form one unbroken chain from Genesis:
// numbered 0, 1, 2, …, each linked to the one before and hashing to its own
// Hash. It checks links only, not kinds, times or details.
func CheckTimeline(events []Event) error {
	if err := checkChain(events); err != nil {
		return err
	}
	return nil
}

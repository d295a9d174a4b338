package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"strings"
	"sync"
)

// Limits on what a Tape holds; see "Recording and replay" in the package
// documentation. Beyond them recording fails (ErrTapeFull).
const (
	maxTapeCalls  = 100_000
	maxTapeBodies = 256 << 20 // distinct bodies, each counted once, and responses being recorded
	maxTapeMeta   = 128 << 20 // the calls' lines, at their longest encoding (metaCost)
	// callLineBytes bounds the bytes of a call's line besides its strings:
	// names, punctuation, digests and numbers come to 315 at most.
	callLineBytes = 400
)

// MaxRecordingSize bounds what (*Tape).WriteTo writes, whatever the calls:
// bodies take at most 4/3 of maxTapeBodies in base64 plus 94 bytes a blob
// (at most two blobs a call), calls at most maxTapeMeta; together under
// 490 MiB. It is the limit to give ReadTape for a recording a Tape wrote.
const MaxRecordingSize = 512 << 20

// A Tape is the recording of the model calls of one trial, shared by all its
// Gateways (one per provider name). A Tape from NewTape records (Options.Tape):
// each request served by a Gateway given it is appended, in the order the
// requests had their bodies read. A Tape from ReadTape replays
// (Options.Replay): each request is matched against the next call recorded,
// and answered as recorded. A Tape is used in one mode, by one trial.
//
// Its methods are safe for concurrent use. Bodies are held in memory, each
// distinct body once, within the limits of the package documentation.
type Tape struct {
	// OnDiverge, if not nil, is called once, with the *DivergedError, when a
	// replay first diverges, from the goroutine serving the request, before
	// the agent is answered: the caller can stop the agent at once. It must
	// not block for long. Set it before giving the Tape to New; do not
	// change it after. Done does not call it.
	OnDiverge func(error)

	replay      bool // made by ReadTape; immutable
	keepServing bool // KeepServing: a failed recording refuses nothing; immutable
	maxCalls    int  // maxTapeCalls; tests lower them
	maxBodies   int64
	maxMeta     int64

	mu     sync.Mutex
	calls  []*tapeCall       // in seq order
	blobs  map[string][]byte // bodies by hex SHA-256; a stored body is never modified
	bodies int64             // bytes in blobs, and in responses being recorded (tee)
	meta   int64             // metaCost of the calls
	err    error             // recording failed (ErrTapeFull): for good
	// Replay:
	next     int               // index in calls of the first call not yet matched
	used     []bool            // by index in calls: matched (MatchConversation)
	loose    int               // calls matched by conversation, not digest
	keys     map[string]string // conversationKey of recorded request bodies, by digest
	diverged *DivergedError    // the first divergence: for good

	// MatchConversation, set before the Tape is given to a Gateway, lets a
	// replay match a request whose digest differs from the recorded one's
	// when it continues the same conversation (conversationKey): the same
	// gateway, method and target, the same tool calls and results, the same
	// model. It is for real agent CLIs, whose requests carry session ids,
	// dates and other framing that differ from run to run. The first call
	// not yet matched is tried first, then the later ones in order (an
	// agent's concurrent side requests may come in another order).
	MatchConversation bool
	// IgnoreLines, with MatchConversation, are leading lines of tool
	// results left out of the comparison: a CLI's own framing of a result that differs
	// from run to run (Codex's "Chunk ID: …", "Wall time: …"), from its
	// recipe. Set before the Tape is given to a Gateway.
	IgnoreLines []*regexp.Regexp
}

// Loose returns how many calls a replay matched by conversation rather
// than by digest (see MatchConversation).
func (t *Tape) Loose() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.loose
}

// tapeCall is one call of a Tape. Its fields are set by begin and end (or
// by ReadTape) under the Tape's mu; once done it is immutable.
type tapeCall struct {
	seq                     int
	gateway, method, target string
	requestSHA256           string // "" when the body was not read
	requestBytes            int64

	done           bool
	status         int
	contentType    string
	responseSHA256 string
	response       []byte // the body as sent to the agent; shared with blobs
	responseBytes  int64
	cut            bool // the gateway cut the response: the agent saw the connection break
}

// NewTape returns an empty Tape to record a trial's calls: give it to each
// Gateway as Options.Tape, close them all, then write it with WriteTo or
// read it with Exchanges.
func NewTape(opts ...TapeOption) *Tape {
	t := &Tape{
		maxCalls:  maxTapeCalls,
		maxBodies: maxTapeBodies,
		maxMeta:   maxTapeMeta,
		blobs:     make(map[string][]byte),
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Err returns why recording failed (an error wrapping ErrTapeFull), or the
// first divergence of a replay (a *DivergedError), or nil. Once non-nil it
// stays so. Either way the trial failed: a recording that failed is
// incomplete, a replay that diverged no longer replays the trial.
func (t *Tape) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return t.err
	}
	if t.diverged != nil {
		return t.diverged
	}
	return nil
}

// Calls is how many calls the Tape holds: recorded so far, or read.
func (t *Tape) Calls() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.calls)
}

// Done is called once the agent has finished and its Gateways are closed. It
// returns the divergence of a replay, a *DivergedError: the first one, or,
// if the agent made fewer calls than recorded, one saying so (without
// calling OnDiverge). For a Tape recording it returns Err.
func (t *Tape) Done() error {
	if !t.replay {
		return t.Err()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.diverged == nil && t.next < len(t.calls) {
		c := t.calls[t.next]
		t.diverged = &DivergedError{Call: c.seq, Want: c.requestSHA256,
			Detail: fmt.Sprintf("the agent made %d of the %d recorded calls", t.matched(), len(t.calls))}
	}
	if t.diverged != nil {
		return t.diverged
	}
	return nil
}

// checkTapes reports Options that record and replay at once, or use a Tape
// in the other mode.
func checkTapes(o Options) error {
	var reason string
	switch {
	case o.Tape != nil && o.Replay != nil:
		reason = "Tape and Replay are both set: a Gateway records or replays"
	case o.Tape != nil && o.Tape.replay:
		reason = "Tape is a recording read by ReadTape: give it as Replay"
	case o.Replay != nil && !o.Replay.replay:
		reason = "Replay is a Tape from NewTape: replay one read by ReadTape"
	default:
		return nil
	}
	return fmt.Errorf("%w for the %s gateway: %s", ErrOptions, o.Spec.Name, reason)
}

// metaCost bounds the bytes of c's line in the file: a byte of a string
// takes at most 6 in JSON (\u00XX); strings are valid UTF-8 (tapeString).
func metaCost(c *tapeCall) int64 {
	return callLineBytes + 6*int64(len(c.gateway)+len(c.method)+len(c.target)+len(c.contentType))
}

// fail records why recording failed, unless it failed already, and returns
// the error that stands. Call with t.mu held.
func (t *Tape) fail(err error) error {
	if t.err == nil {
		t.err = err
	}
	return t.err
}

// begin appends a call to a recording Tape, with the request body (nil, and
// sum "", when it was not read), and returns it; or the error recording
// failed with.
func (t *Tape) begin(gateway, method, target, sum string, body []byte) (*tapeCall, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return nil, t.err
	}
	c := &tapeCall{seq: len(t.calls) + 1, gateway: gateway, method: method, target: target,
		requestSHA256: sum, requestBytes: int64(len(body))}
	if len(t.calls) >= t.maxCalls {
		return nil, t.fail(fmt.Errorf("%w: call %d is over the limit of %d calls", ErrTapeFull, c.seq, t.maxCalls))
	}
	cost := metaCost(c)
	if t.meta+cost > t.maxMeta {
		return nil, t.fail(fmt.Errorf("%w: call %d takes the calls over %d bytes", ErrTapeFull, c.seq, t.maxMeta))
	}
	if _, ok := t.blobs[sum]; sum != "" && !ok {
		if t.bodies+int64(len(body)) > t.maxBodies {
			return nil, t.fail(fmt.Errorf("%w: the request body of call %d takes the bodies over %d bytes", ErrTapeFull, c.seq, t.maxBodies))
		}
		t.blobs[sum] = bytes.Clone(body)
		t.bodies += int64(len(body))
	}
	t.meta += cost
	t.calls = append(t.calls, c)
	return c, nil
}

// reserve counts n more bytes of c's response being recorded, or fails the
// recording.
func (t *Tape) reserve(c *tapeCall, n int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return false
	}
	if t.bodies+int64(n) > t.maxBodies {
		t.fail(fmt.Errorf("%w: the response to call %d takes the bodies over %d bytes", ErrTapeFull, c.seq, t.maxBodies))
		return false
	}
	t.bodies += int64(n)
	return true
}

// end completes c with what the agent was sent: status, Content-Type, the
// body tee kept, and whether the gateway cut the response.
func (t *Tape) end(c *tapeCall, status int, contentType string, tee *tee, cut bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c.done = true
	held := int64(len(tee.buf))
	if tee.failed || t.err != nil {
		t.bodies -= held
		return
	}
	if status < 200 || status > 999 {
		t.bodies -= held
		t.fail(fmt.Errorf("%w: call %d ended without a status to record", ErrTapeFull, c.seq))
		return
	}
	cost := 6 * int64(len(contentType))
	if t.meta+cost > t.maxMeta {
		t.bodies -= held
		t.fail(fmt.Errorf("%w: call %d takes the calls over %d bytes", ErrTapeFull, c.seq, t.maxMeta))
		return
	}
	t.meta += cost
	sum := sha256.Sum256(tee.buf)
	d := hex.EncodeToString(sum[:])
	body, ok := t.blobs[d]
	if ok {
		t.bodies -= held
	} else {
		body = bytes.Clone(tee.buf)
		if body == nil {
			body = []byte{}
		}
		t.blobs[d] = body
	}
	c.status, c.contentType, c.cut = status, contentType, cut
	c.responseSHA256, c.response, c.responseBytes = d, body, int64(len(body))
}

// A tee keeps a copy of what the agent is sent for the Tape, within its
// limit: past it, the copy is dropped and the recording has failed. Not safe
// for concurrent use.
type tee struct {
	t      *Tape
	c      *tapeCall
	buf    []byte
	failed bool
}

func (b *tee) write(p []byte) {
	if b.failed || len(p) == 0 {
		return
	}
	if !b.t.reserve(b.c, len(p)) {
		b.failed = true
		b.t.mu.Lock()
		b.t.bodies -= int64(len(b.buf))
		b.t.mu.Unlock()
		b.buf = nil
		return
	}
	b.buf = append(b.buf, p...)
}

// match takes the next recorded call if it is the request's, else ends the
// replay for good with a *DivergedError, which it returns. Once the replay
// has ended, every request gets the first divergence.
func (t *Tape) match(gateway, method, target, sum string, body []byte) (*tapeCall, error) {
	t.mu.Lock()
	first := t.diverged == nil
	if first {
		if t.next < len(t.calls) {
			c := t.calls[t.next]
			if c.gateway == gateway && c.method == method && c.target == target && c.requestSHA256 == sum {
				t.take(t.next)
				t.mu.Unlock()
				return c, nil
			}
			if t.MatchConversation && sum != "" {
				key := conversationKey(body, sum, t.IgnoreLines)
				for i := t.next; i < len(t.calls); i++ {
					o := t.calls[i]
					if t.used != nil && t.used[i] || o.gateway != gateway || o.method != method || o.target != target || o.requestSHA256 == "" {
						continue
					}
					if o.requestSHA256 == sum || t.keyOf(o.requestSHA256) == key {
						if o.requestSHA256 != sum {
							t.loose++
						}
						t.take(i)
						t.mu.Unlock()
						return o, nil
					}
				}
			}
			detail := fmt.Sprintf("recorded request %s, got %s", digestText(c.requestSHA256), digestText(sum))
			if c.gateway != gateway || c.method != method || c.target != target {
				detail += fmt.Sprintf("; recorded %s, got %s", describe(c.gateway, c.method, c.target), describe(gateway, method, target))
			}
			t.diverged = &DivergedError{Call: c.seq, Want: c.requestSHA256, Got: sum, Detail: detail}
		} else {
			t.diverged = &DivergedError{Call: len(t.calls) + 1, Got: sum,
				Detail: fmt.Sprintf("recorded the end of the recording (%d calls), got request %s (%s)",
					len(t.calls), digestText(sum), describe(gateway, method, target))}
		}
	}
	d := t.diverged
	t.mu.Unlock()
	if first && t.OnDiverge != nil {
		t.OnDiverge(d)
	}
	return nil, d
}

// keyOf is the conversation key of the recorded body with digest sum.
func (t *Tape) keyOf(sum string) string {
	if k, ok := t.keys[sum]; ok {
		return k
	}
	if t.keys == nil {
		t.keys = map[string]string{}
	}
	k := conversationKey(t.blobs[sum], sum, t.IgnoreLines)
	t.keys[sum] = k
	return k
}

// matched counts the calls matched so far.
func (t *Tape) matched() int {
	if t.used == nil {
		return t.next
	}
	n := 0
	for _, u := range t.used {
		if u {
			n++
		}
	}
	return n
}

// take marks calls[i] matched and moves next past every matched call.
func (t *Tape) take(i int) {
	if t.used == nil {
		t.used = make([]bool, len(t.calls))
	}
	t.used[i] = true
	for t.next < len(t.calls) && t.used[t.next] {
		t.next++
	}
}

// diverge ends the replay with d, unless it has ended already, and returns
// the divergence that stands. The first one is told to OnDiverge.
func (t *Tape) diverge(d *DivergedError) error {
	t.mu.Lock()
	first := t.diverged == nil
	if first {
		t.diverged = d
	}
	d = t.diverged
	t.mu.Unlock()
	if first && t.OnDiverge != nil {
		t.OnDiverge(d)
	}
	return d
}

// describe words a request for a divergence.
func describe(gateway, method, target string) string {
	return clip(method) + " " + clip(target) + " on " + gateway
}

// tapeString is a string as a Tape holds it: valid UTF-8, so that it
// survives JSON unchanged. Applied alike when recording and replaying.
func tapeString(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// forwardedTarget is the path and query the gateway sends upstream.
func forwardedTarget(r *http.Request, rawQuery string) string {
	t := r.URL.EscapedPath()
	if rawQuery != "" {
		t += "?" + rawQuery
	}
	return t
}

// takeTurn puts x on the Gateway's Tape, if it has one, once its body has
// been read (body, with x.call.RequestSHA256 set) or when it is refused
// before that (body nil): recording, it appends x's call; replaying, it
// matches x against the next recorded call. It returns the status and reason
// to refuse x with instead: the recording failed (503; none for a Tape that
// keeps serving, which then leaves x unrecorded), the replay diverged (409).
func (g *Gateway) takeTurn(x *exchange, body []byte) (status int, reason string) {
	x.taped = true
	switch {
	case g.tape != nil:
		c, err := g.tape.begin(g.spec.Name, x.call.Method, x.target, x.call.RequestSHA256, body)
		if err != nil && g.tape.keepServing {
			return 0, ""
		}
		if err != nil {
			return http.StatusServiceUnavailable, "recording: " + err.Error()
		}
		x.tc = c
		x.sink.tee = &tee{t: g.tape, c: c}
	case g.replay != nil:
		c, err := g.replay.match(g.spec.Name, x.call.Method, x.target, x.call.RequestSHA256, body)
		if err != nil {
			return http.StatusConflict, "replay: " + err.Error()
		}
		x.tc = c
	}
	return 0, ""
}

// sameRefusal checks, replaying, that the gateway refuses x (with status and
// body) as the recording has it, and otherwise ends the replay and returns
// the status and reason to refuse x with instead (409).
func (g *Gateway) sameRefusal(x *exchange, status int, body []byte) (int, string) {
	c := x.tc
	if g.replay == nil || c == nil {
		return 0, ""
	}
	sum := sha256.Sum256(body)
	if c.status == status && c.responseSHA256 == hex.EncodeToString(sum[:]) {
		return 0, ""
	}
	err := g.replay.diverge(&DivergedError{Call: c.seq, Want: c.requestSHA256, Got: x.call.RequestSHA256, gateway: true,
		Detail: fmt.Sprintf("it refuses %s itself (status %d, body %s), the recording has status %d, body %s",
			describe(g.spec.Name, x.call.Method, x.target), status, digestText(hex.EncodeToString(sum[:])),
			c.status, digestText(c.responseSHA256))})
	return http.StatusConflict, "replay: " + err.Error()
}

// tapeEnd completes x's call on a recording Tape.
func (g *Gateway) tapeEnd(x *exchange) {
	if g.tape == nil || x.tc == nil {
		return
	}
	ct := tapeString(x.sink.w.Header().Get("Content-Type"))
	g.tape.end(x.tc, x.call.Status, ct, x.sink.tee, x.cut)
}

// replayResponse answers x with the response recorded for it, as relay would
// have relayed it: Content-Type, status, the body in steps (a stream comes
// as it was recorded), and a cut connection if the gateway cut it.
func (g *Gateway) replayResponse(w http.ResponseWriter, x *exchange) {
	c := x.tc
	if c.contentType != "" {
		w.Header().Set("Content-Type", c.contentType)
	}
	mt, _, _ := mime.ParseMediaType(c.contentType)
	x.sink.m = newMeter(mt == "text/event-stream")
	x.call.Status = c.status
	w.WriteHeader(c.status)
	if x.sink.flush() != nil {
		x.call.Error = g.clientGone()
		return
	}
	var dst io.Writer = x.sink
	var sc *scrubber
	if g.key != "" { // defence in depth: a recording never holds the key
		sc = newScrubber(x.sink, g.key)
		dst = sc
	}
	for b := c.response; len(b) > 0; {
		n := min(len(b), relayStep)
		dst.Write(b[:n]) // errors are the sink's, kept in x.sink.err
		b = b[n:]
		if x.sink.flush() != nil {
			x.call.Error = g.clientGone()
			return
		}
	}
	if sc != nil {
		sc.Close()
	}
	if x.sink.flush() != nil {
		x.call.Error = g.clientGone()
		return
	}
	if c.cut {
		x.call.Error = "cut, as in the recording"
		x.cut = true
		panic(http.ErrAbortHandler)
	}
}

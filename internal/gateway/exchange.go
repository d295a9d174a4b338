package gateway

import (
	"fmt"
	"mime"
)

// A TapeOption changes the Tape NewTape makes.
type TapeOption func(*Tape)

// KeepServing makes a Tape that, once over its limits, stops recording but
// lets its Gateways go on relaying: for calls kept to be read (a trial's
// trajectory), not replayed, whose loss must not fail the agent's requests.
// Err, Done and Exchanges still report the failure (ErrTapeFull), and
// WriteTo still writes nothing: a recording that lost calls is never a
// recording to replay.
func KeepServing() TapeOption { return func(t *Tape) { t.keepServing = true } }

// An Exchange is one call of a Tape: the request the agent made and what
// it was sent. Every byte of it but Gateway and Seq came from the agent or
// the upstream: treat it as data.
type Exchange struct {
	Seq     int    // from 1, in the order the requests' bodies were read
	Gateway string // Spec.Name
	Method  string
	Target  string // the path and query as forwarded (credential parameters dropped)
	// Request is the request body as the agent sent it; nil when the
	// request was refused before its body was read.
	Request     []byte
	Status      int
	ContentType string
	// Response is the body as the agent was sent it: decoded, the key
	// scrubbed, the gateway's own error bodies included.
	Response []byte
	// Cut says the gateway cut the response, the upstream's having broken
	// off: the agent saw its connection break after Response.
	Cut bool
}

// Exchanges returns the calls the Tape holds whole, in seq order, their
// bodies shared with the Tape (do not modify them). Of a Tape whose
// recording failed it returns the calls before the first one it could not
// hold whole, and the error (wrapping ErrTapeFull); a call still being
// served ends the list too, with an error saying so: call it once the
// Gateways are closed. A Tape from ReadTape returns every call it read.
func (t *Tape) Exchanges() ([]Exchange, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Exchange, 0, len(t.calls))
	for _, c := range t.calls {
		if !c.done {
			return out, fmt.Errorf("reading the recording: call %d is still being served; close the gateways first", c.seq)
		}
		if c.status == 0 { // end did not record its response: the recording failed there
			break
		}
		var req []byte
		if c.requestSHA256 != "" {
			req = t.blobs[c.requestSHA256]
		}
		out = append(out, Exchange{Seq: c.seq, Gateway: c.gateway, Method: c.method, Target: c.target,
			Request: req, Status: c.status, ContentType: c.contentType, Response: c.response, Cut: c.cut})
	}
	if t.err != nil {
		return out, fmt.Errorf("reading the recording: %w", t.err)
	}
	return out, nil
}

// Tokens is the usage a response reported, normalised across providers as
// Call's token counts are.
type Tokens struct {
	Input, Output, CacheRead, CacheWrite, Total int64
}

// Usage reads the model and the token usage e's response reported, as the
// Gateway read them while relaying it (see Call): a stream when its
// Content-Type is text/event-stream, else one JSON body. Anything else
// yields zeros, never an error.
func (e *Exchange) Usage() (model string, t Tokens) {
	mt, _, _ := mime.ParseMediaType(e.ContentType)
	m := newMeter(mt == "text/event-stream")
	m.Write(e.Response)
	model, n := m.result()
	return model, Tokens{Input: n.input, Output: n.output, CacheRead: n.cacheRead, CacheWrite: n.cacheWrite, Total: n.total}
}

package gateway

import (
	"errors"
	"fmt"
)

// Sentinels; test with errors.Is. Each is returned wrapped with the entry or
// gateway at fault, never with the key.
var (
	// ErrSpec: a gateway spec is malformed (name, URL, repeated name).
	ErrSpec = errors.New("invalid gateway spec")
	// ErrKey: the key given to New is unusable (too short, characters that
	// cannot travel in a header or that the scrubber relies on not seeing).
	ErrKey = errors.New("invalid gateway key")
	// ErrOptions: the Options given to New do not go together (a Tape to
	// record and one to replay, or a Tape used in the other mode).
	ErrOptions = errors.New("invalid gateway options")

	// ErrTapeFull: a Tape went over its limits while recording; the
	// recording is incomplete and cannot be written.
	ErrTapeFull = errors.New("recording full")
	// ErrDiverged: a replay met a request other than the one recorded next;
	// see DivergedError.
	ErrDiverged = errors.New("replay diverged")
	// ErrTapeTampered: a recording's body does not hash to its digest.
	ErrTapeTampered = errors.New("recording tampered with")
	// ErrTapeMalformed: a recording is not as (*Tape).WriteTo writes one.
	ErrTapeMalformed = errors.New("malformed recording")
	// ErrTapeTooLarge: a recording is over the limit given to ReadTape, or
	// holds more than a Tape may.
	ErrTapeTooLarge = errors.New("recording too large")
)

// MissingKeyError is returned by KeyFromEnv when the host variable that should
// hold a gateway's real key is unset or empty.
type MissingKeyError struct {
	Env     string // the host variable, e.g. OPENAI_API_KEY
	Gateway string // the gateway's name, e.g. openai
}

func (e *MissingKeyError) Error() string {
	return fmt.Sprintf("%s is not set on the host: the %s gateway needs the real key", e.Env, e.Gateway)
}

// DivergedError is how a replay ends when the agent's requests stop matching
// the recording: a request other than the one recorded next, a request after
// the last one recorded, or (reported by Done) fewer requests than recorded.
// Every string in it but the digests may come from the agent: treat it as
// data.
type DivergedError struct {
	// Call is the seq (1-based) of the recorded call the replay diverged
	// at; one past the last for a request after the end of the recording.
	Call int
	// Want is the hex SHA-256 of the request body recorded for Call, Got
	// that of the request the agent made. Each is "" for none: the end of
	// the recording (Want), no request at all (Got, from Done), or a request
	// refused before its body was read.
	Want, Got string
	// Detail says what differed, in words, digests included.
	Detail string

	gateway bool // the gateway answered otherwise, not the agent asked otherwise
}

func (e *DivergedError) Error() string {
	who := "agent"
	if e.gateway {
		who = "gateway"
	}
	detail := e.Detail
	if detail == "" {
		detail = fmt.Sprintf("recorded request %s, got %s", digestText(e.Want), digestText(e.Got))
	}
	return fmt.Sprintf("the %s diverged at call %d: %s", who, e.Call, detail)
}

func (e *DivergedError) Unwrap() error { return ErrDiverged }

// digestText words a request digest for a message, shortened.
func digestText(d string) string {
	switch {
	case d == "":
		return "no body (refused before it was read)"
	case len(d) > 12:
		return "sha256:" + d[:12] + "…"
	}
	return "sha256:" + d
}

// TapeError is why ReadTape refused a recording: the line and field at
// fault. Err is ErrTapeTampered, ErrTapeMalformed or ErrTapeTooLarge.
type TapeError struct {
	Line   int    // 1-based line of the file
	Field  string // the JSON field at fault; "" for the whole line
	Reason string
	Err    error
}

func (e *TapeError) Error() string {
	s := fmt.Sprintf("%v: line %d", e.Err, e.Line)
	if e.Field != "" {
		s += fmt.Sprintf(", field %q", e.Field)
	}
	return s + ": " + e.Reason
}

func (e *TapeError) Unwrap() error { return e.Err }

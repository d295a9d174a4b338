package trajectory

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Roles of a unit, whatever the provider calls them.
const (
	roleSystem    = "system" // system and developer messages
	roleUser      = "user"
	roleAssistant = "assistant"
	roleTool      = "tool" // tool results sent as messages of their own
)

// A unit is one message of a conversation, as a request carries it or a
// response makes it, in terms common to the providers: text parts,
// reasoning, tool calls, tool results.
type unit struct {
	role      string
	parts     Content
	reasoning []string
	calls     []ToolCall
	results   []result
}

// result is a tool result a request carries back.
type result struct {
	callID  string
	content Content
	isError bool
}

// request is what a turn's request says.
type request struct {
	model    string
	effort   string  // reasoning effort asked for, if the provider has one
	system   Content // a system prompt outside the messages (Anthropic's system, Responses' instructions)
	units    []unit
	previous string // previous_response_id (Responses)
}

// response is what a turn's response says.
type response struct {
	id    string
	model string
	// units are the assistant messages in the form the next request sends
	// them back: one, or (Responses) one per output item.
	units     []unit
	stop      string
	truncated bool
	problems  []string // what could not be read, for the notes
}

// empty reports whether u says nothing a chain or a step would show.
func (u *unit) empty() bool {
	return len(u.parts) == 0 && len(u.calls) == 0 && len(u.results) == 0
}

// text appends a text part; empty text is dropped.
func (u *unit) text(s string) {
	if s != "" {
		u.parts = append(u.parts, ContentPart{Type: "text", Text: s})
	}
}

// key chains u onto prev: the digest of a conversation up to and including
// u. What a message is, for the chain: its role, text parts, tool results
// and, for the assistant, the ids of its tool calls or (with none) its
// text. Provider annotations (cache_control, ids of items, signatures) and
// reasoning are left out, so the same message sent again in another
// request, or made by a response and sent back, chains the same.
func key(prev [32]byte, u *unit) [32]byte {
	h := sha256.New()
	h.Write(prev[:])
	field := func(s string) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(u.role)
	if u.role == roleAssistant && len(u.calls) > 0 {
		field("calls")
		for _, c := range u.calls {
			field(c.ToolCallID)
		}
		return [32]byte(h.Sum(nil))
	}
	for _, p := range u.parts {
		field("part")
		field(p.Text)
	}
	for _, r := range u.results {
		field("result")
		field(r.callID)
		field(fmt.Sprint(r.isError))
		for _, p := range r.content {
			field(p.Text)
		}
	}
	return [32]byte(h.Sum(nil))
}

// arguments makes a tool call's arguments from raw JSON: a JSON object,
// compact; else {} and what was sent, with why, in extra.
func arguments(raw []byte) (json.RawMessage, *ToolCallExtra) {
	t := bytes.TrimSpace(raw)
	why := ""
	switch {
	case len(t) == 0:
		return json.RawMessage(`{}`), nil
	case !utf8.Valid(t):
		why = "not valid UTF-8"
	case !json.Valid(t):
		why = "not valid JSON (cut, or malformed)"
	case t[0] != '{':
		why = "JSON, but not an object"
	default:
		var b bytes.Buffer
		json.Compact(&b, t) // cannot fail: valid
		return json.RawMessage(b.Bytes()), nil
	}
	return json.RawMessage(`{}`), &ToolCallExtra{RawArguments: strings.ToValidUTF8(string(raw), "\uFFFD"), ArgumentsError: why}
}

// stringArguments is arguments from a JSON string holding JSON (OpenAI's
// "arguments"), or from raw JSON if it is not a string.
func stringArguments(raw json.RawMessage) (json.RawMessage, *ToolCallExtra) {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return arguments([]byte(s))
	}
	if isNull(raw) {
		return arguments(nil)
	}
	return arguments(raw)
}

// placeholder is the text part that stands for content Proctor does not
// copy into a trajectory (an image, a file): its kind and, for data sent
// inline, the digest of the data as sent.
func placeholder(kind, mediaType, data string) string {
	s := "[" + kind
	if mediaType != "" {
		s += " " + mediaType
	}
	if data != "" {
		sum := sha256.Sum256([]byte(data))
		s += ", sha256:" + hex.EncodeToString(sum[:])
	}
	return s + ", not kept in the trajectory]"
}

// decode unmarshals b into v; a field of an unexpected type is skipped,
// the rest kept.
func decode(b []byte, v any) error {
	err := json.Unmarshal(b, v)
	if _, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		return nil
	}
	return err
}

func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// jsonString is raw as a string if it is one, else "".
func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return "", false
}

// sseEvent is one server-sent event: its name and data.
type sseEvent struct {
	name string
	data []byte
}

// sseEvents splits a text/event-stream body into its events (the
// WHATWG rules: "event:" and "data:" fields, a blank line dispatches,
// comments and other fields ignored). ended says the body ended with a
// blank line, as a stream that was not cut does.
func sseEvents(body []byte) (events []sseEvent, ended bool) {
	var cur sseEvent
	has := false
	for len(body) > 0 {
		line := body
		rest := []byte(nil)
		if i := bytes.IndexByte(body, '\n'); i >= 0 {
			line, rest = body[:i], body[i+1:]
		}
		body = rest
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			if has {
				events = append(events, cur)
			}
			cur, has = sseEvent{}, false
			ended = true
			continue
		}
		ended = false
		name, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(name) {
		case "event":
			cur.name = string(value)
		case "data":
			if has {
				cur.data = append(cur.data, '\n')
			}
			cur.data = append(cur.data, value...)
			has = true
		}
	}
	if has {
		events = append(events, cur)
	}
	return events, ended
}

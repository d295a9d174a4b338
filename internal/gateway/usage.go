package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

const (
	// maxParse bounds what a meter keeps of one response: the whole of a
	// JSON body, or one line or event of a stream. Larger ones yield no
	// usage; they are relayed all the same.
	maxParse = 8 << 20
	// maxTokens bounds a believable token count; larger or negative counts
	// are ignored, so sums cannot overflow.
	maxTokens = 1 << 48
	// maxModelLen bounds the model name kept for a call.
	maxModelLen = 256
)

// tokens is usage normalised across providers (see Call for the meaning).
type tokens struct {
	input, output, cacheRead, cacheWrite, total int64
}

// A meter reads a response body as it is relayed and keeps the model and
// token usage the provider reports in it: in a JSON body (OpenAI chat
// completions, completions, embeddings and responses; Anthropic messages), or
// in the data of server-sent events (OpenAI's final chunk with usage or
// response.completed event; Anthropic's message_start and message_delta).
// Where a stream reports a count twice, the last report wins. Memory is
// bounded by maxParse; bytes that are not what it expects are skipped, never
// an error. Not safe for concurrent use.
type meter struct {
	sse      bool
	buf      []byte // JSON: the body so far; SSE: the current line
	overflow bool   // buf was cut: JSON body or SSE line too long
	data     []byte // SSE: the data of the current event
	dataCut  bool   // SSE: the current event lost a line
	model    string
	tally    tally
}

func newMeter(sse bool) *meter { return &meter{sse: sse} }

// Write never fails.
func (m *meter) Write(p []byte) (int, error) {
	n := len(p)
	if !m.sse {
		m.keep(p)
		return n, nil
	}
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			m.keep(p)
			break
		}
		m.keep(p[:i])
		m.endLine()
		p = p[i+1:]
	}
	return n, nil
}

func (m *meter) keep(p []byte) {
	if m.overflow {
		return
	}
	if len(m.buf)+len(p) > maxParse {
		m.overflow, m.buf = true, nil
		return
	}
	m.buf = append(m.buf, p...)
}

// endLine handles one SSE line (RFC: text/event-stream): "data:" lines add to
// the event, an empty line dispatches it, anything else is ignored.
func (m *meter) endLine() {
	line := bytes.TrimSuffix(m.buf, []byte("\r"))
	cut := m.overflow
	m.buf, m.overflow = m.buf[:0], false
	switch {
	case cut:
		m.dataCut = true
	case len(line) == 0:
		if !m.dataCut && len(m.data) > 0 {
			m.doc(m.data)
		}
		m.data, m.dataCut = m.data[:0], false
	case bytes.HasPrefix(line, []byte("data:")):
		v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
		if len(m.data)+len(v)+1 > maxParse {
			m.dataCut = true
			return
		}
		if len(m.data) > 0 {
			m.data = append(m.data, '\n')
		}
		m.data = append(m.data, v...)
	}
}

// result ends the body and says what it reported.
func (m *meter) result() (model string, t tokens) {
	if m.sse {
		if len(m.buf) > 0 || m.overflow {
			m.endLine()
		}
		m.endLine() // an event the stream did not end with a blank line
	} else if !m.overflow {
		m.doc(m.buf)
	}
	m.buf, m.data = nil, nil
	return m.model, m.tally.tokens()
}

// usageWire is a usage object as OpenAI and Anthropic write it.
type usageWire struct {
	PromptTokens             json.RawMessage `json:"prompt_tokens"`
	CompletionTokens         json.RawMessage `json:"completion_tokens"`
	InputTokens              json.RawMessage `json:"input_tokens"`
	OutputTokens             json.RawMessage `json:"output_tokens"`
	TotalTokens              json.RawMessage `json:"total_tokens"`
	CacheReadInputTokens     json.RawMessage `json:"cache_read_input_tokens"`
	CacheCreationInputTokens json.RawMessage `json:"cache_creation_input_tokens"`
	PromptTokensDetails      *struct {
		CachedTokens json.RawMessage `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	InputTokensDetails *struct {
		CachedTokens json.RawMessage `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

// reportWire is what a meter reads of a JSON body or event. Message is
// Anthropic's message_start; Response is OpenAI's response.* events.
type reportWire struct {
	Model    string     `json:"model"`
	Usage    *usageWire `json:"usage"`
	Message  *nested    `json:"message"`
	Response *nested    `json:"response"`
}

type nested struct {
	Model string     `json:"model"`
	Usage *usageWire `json:"usage"`
}

// doc reads one JSON document.
func (m *meter) doc(b []byte) {
	var r reportWire
	if err := json.Unmarshal(b, &r); err != nil {
		// A field of an unexpected type is skipped; the rest is kept.
		if _, ok := errors.AsType[*json.UnmarshalTypeError](err); !ok {
			return
		}
	}
	m.setModel(r.Model)
	m.tally.add(r.Usage)
	for _, n := range []*nested{r.Message, r.Response} {
		if n != nil {
			m.setModel(n.Model)
			m.tally.add(n.Usage)
		}
	}
}

func (m *meter) setModel(s string) {
	if s != "" && m.model == "" {
		m.model = clipModel(s)
	}
}

// clipModel bounds a model name, keeping it valid UTF-8.
func clipModel(s string) string {
	if len(s) > maxModelLen {
		s = s[:maxModelLen]
	}
	return string(bytes.ToValidUTF8([]byte(s), nil))
}

// count is a token count a provider may or may not have reported.
type count struct {
	n  int64
	ok bool
}

// set takes raw if it is an integer literal within [0, maxTokens]; null,
// strings, fractions and exponents are ignored.
func (c *count) set(raw json.RawMessage) {
	if len(raw) == 0 || raw[0] < '0' || raw[0] > '9' {
		return
	}
	if n, err := strconv.ParseInt(string(raw), 10, 64); err == nil && n <= maxTokens {
		c.n, c.ok = n, true
	}
}

// tally keeps the last reported value of each field, raw.
type tally struct {
	input      count // prompt_tokens or input_tokens
	output     count // completion_tokens or output_tokens
	total      count // total_tokens
	cached     count // OpenAI's cached_tokens: part of input
	cacheRead  count // Anthropic's cache_read_input_tokens: not part of input
	cacheWrite count // Anthropic's cache_creation_input_tokens: not part of input
}

func (t *tally) add(u *usageWire) {
	if u == nil {
		return
	}
	t.input.set(u.InputTokens)
	t.input.set(u.PromptTokens)
	t.output.set(u.OutputTokens)
	t.output.set(u.CompletionTokens)
	t.total.set(u.TotalTokens)
	t.cacheRead.set(u.CacheReadInputTokens)
	t.cacheWrite.set(u.CacheCreationInputTokens)
	if d := u.PromptTokensDetails; d != nil {
		t.cached.set(d.CachedTokens)
	}
	if d := u.InputTokensDetails; d != nil {
		t.cached.set(d.CachedTokens)
	}
}

func (t *tally) tokens() tokens {
	v := tokens{
		input:      t.input.n + t.cacheRead.n + t.cacheWrite.n,
		output:     t.output.n,
		cacheRead:  t.cached.n + t.cacheRead.n,
		cacheWrite: t.cacheWrite.n,
		total:      t.total.n,
	}
	if !t.total.ok {
		v.total = v.input + v.output
	}
	return v
}

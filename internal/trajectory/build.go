package trajectory

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"slices"
	"strconv"
	"strings"

	"github.com/proctor-sandbox/proctor/internal/gateway"
)

// Options name what the recording cannot say.
type Options struct {
	// AgentName and AgentVersion are the agent's, as the caller knows
	// them; "unknown" if empty (ATIF requires both).
	AgentName, AgentVersion string
	// SessionID identifies the run; if empty, it is the SHA-256 of the
	// calls read (their order, targets and both bodies' digests).
	SessionID string
}

// Producer is the trajectory's extra.producer.
const Producer = "proctor: read from the model gateway's recording of the agent's calls, not written by the agent"

// FromTape builds the trajectory of the calls a Tape holds (see Build).
// A Tape whose recording stopped at a limit gives the trajectory of the
// calls before it, noted as incomplete.
func FromTape(t *gateway.Tape, o Options) (*Trajectory, error) {
	xs, err := t.Exchanges()
	if err != nil && len(xs) == 0 {
		return nil, err
	}
	b := newBuilder(o)
	if err != nil {
		b.complete = false
		b.notef(0, "the recording is incomplete, only the first %d call(s) are read: %v", len(xs), err)
	}
	return b.build(xs)
}

// Build turns the calls of one trial, in order, into a trajectory: the
// system prompts and messages their requests carried, each once however
// many requests sent it again, and an agent step for each model response.
// It fails only when no call is a model turn that makes a step
// (ErrNoTurns); calls it cannot read, or reads in part, are told in the
// trajectory's notes.
func Build(xs []gateway.Exchange, o Options) (*Trajectory, error) {
	return newBuilder(o).build(xs)
}

// A builder holds the trajectory being built and what dedupes it.
type builder struct {
	o     Options
	t     Trajectory
	steps []Step
	// seen holds every conversation prefix sent or answered so far, by
	// its chain key; after maps a response id to the key its answer
	// ends on (for previous_response_id).
	seen  map[[32]byte]bool
	after map[string][32]byte
	// systems holds the system prompts (outside the messages) stepped.
	systems map[[32]byte]bool
	// callStep maps a tool call id to the step that made it; answered
	// holds the agent texts of responses, for echoes that do not chain.
	callStep map[string]int
	answered map[string]bool
	turns    int
	left     int64 // of maxText
	complete bool
	notes    map[string][]int // note → the calls it is about
	order    []string         // notes in the order first made
}

func newBuilder(o Options) *builder {
	return &builder{o: o, seen: map[[32]byte]bool{}, after: map[string][32]byte{}, systems: map[[32]byte]bool{},
		callStep: map[string]int{}, answered: map[string]bool{}, left: maxText, complete: true, notes: map[string][]int{}}
}

// notef notes something about call seq (0: about the recording).
func (b *builder) notef(seq int, format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	if _, ok := b.notes[n]; !ok {
		b.order = append(b.order, n)
	}
	if seq > 0 {
		b.notes[n] = append(b.notes[n], seq)
	}
}

// protocol is how a turn's bodies are read.
type protocol struct {
	readRequest  func([]byte) (*request, error)
	readResponse func([]byte, bool) (*response, error)
}

// protocolOf says which API a call is, by its target's last segments.
func protocolOf(x *gateway.Exchange) (protocol, bool) {
	if x.Method != "POST" {
		return protocol{}, false
	}
	p, _, _ := strings.Cut(x.Target, "?")
	switch {
	case strings.HasSuffix(p, "/chat/completions"):
		return protocol{chatReadRequest, chatReadResponse}, true
	case strings.HasSuffix(p, "/responses"):
		return protocol{responsesReadRequest, responsesReadResponse}, true
	case strings.HasSuffix(p, "/messages"):
		return protocol{anthropicReadRequest, anthropicReadResponse}, true
	}
	return protocol{}, false
}

func (b *builder) build(xs []gateway.Exchange) (*Trajectory, error) {
	for i := range xs {
		b.turn(&xs[i])
	}
	if len(b.steps) == 0 {
		return nil, fmt.Errorf("%w (%d call(s) recorded, %d of them model turns)", ErrNoTurns, len(xs), b.turns)
	}
	name, version := cmp.Or(b.o.AgentName, "unknown"), cmp.Or(b.o.AgentVersion, "unknown")
	t := &Trajectory{SchemaVersion: Version, SessionID: cmp.Or(b.o.SessionID, sessionOf(xs)),
		Agent: Agent{Name: name, Version: version}, Steps: b.steps,
		Extra: &Extra{Producer: Producer, RecordingCalls: len(xs), ModelTurns: b.turns, Complete: b.complete}}
	fm := &FinalMetrics{TotalSteps: len(b.steps)}
	var write int64
	for i := range t.Steps {
		s := &t.Steps[i]
		s.StepID = i + 1
		if s.Source == SourceAgent && t.Agent.ModelName == "" {
			t.Agent.ModelName = s.ModelName
		}
		if m := s.Metrics; m != nil {
			fm.TotalPromptTokens += m.PromptTokens
			fm.TotalCompletionTokens += m.CompletionTokens
			fm.TotalCachedTokens += m.CachedTokens
			if m.Extra != nil {
				write += m.Extra.CacheCreationInputTokens
			}
		}
	}
	if write > 0 {
		fm.Extra = &FinalMetricsExtra{TotalCacheCreationInputTokens: write}
	}
	t.FinalMetrics = fm
	t.Notes = b.renderNotes()
	return t, nil
}

// renderNotes is the notes, one a line, each with the calls it is about.
func (b *builder) renderNotes() string {
	var lines []string
	for _, n := range b.order {
		seqs := b.notes[n]
		switch len(seqs) {
		case 0:
			lines = append(lines, n)
		case 1:
			lines = append(lines, fmt.Sprintf("call %d: %s", seqs[0], n))
		default:
			s := make([]string, len(seqs))
			for i, q := range seqs {
				s[i] = strconv.Itoa(q)
			}
			lines = append(lines, fmt.Sprintf("calls %s: %s", strings.Join(s, ", "), n))
		}
	}
	return strings.Join(lines, "\n")
}

// sessionOf is the default session id: the digest of the calls read.
func sessionOf(xs []gateway.Exchange) string {
	h := sha256.New()
	for _, x := range xs {
		rq, rs := sha256.Sum256(x.Request), sha256.Sum256(x.Response)
		fmt.Fprintf(h, "%d %q %q %q %d %t %x %x\n", x.Seq, x.Gateway, x.Method, x.Target, x.Status, x.Cut, rq, rs)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// turn reads one call into steps.
func (b *builder) turn(x *gateway.Exchange) {
	p, ok := protocolOf(x)
	if !ok {
		path, _, _ := strings.Cut(x.Target, "?")
		b.notef(x.Seq, "%s %s: not a model turn", x.Method, path)
		return
	}
	b.turns++
	var prev [32]byte
	q, err := p.readRequest(x.Request)
	if err != nil || x.Request == nil {
		b.notef(x.Seq, "the request could not be read: %v", cmp.Or[error](err, errors.New("no body")))
		q = &request{}
	}
	if q.previous != "" {
		var ok bool
		if prev, ok = b.after[q.previous]; !ok {
			b.notef(x.Seq, "previous_response_id names a response the recording does not hold")
		}
	}
	if len(q.system) > 0 {
		if k := key([32]byte{}, &unit{role: roleSystem, parts: q.system}); !b.systems[k] {
			b.systems[k] = true
			b.add(Step{Source: SourceSystem, Message: q.system, Extra: &StepExtra{RecordingCall: x.Seq, Gateway: x.Gateway}})
		}
	}
	for i := range q.units {
		u := &q.units[i]
		if u.role == roleAssistant && u.empty() {
			continue // reasoning alone: not in the chain, not a step
		}
		prev = key(prev, u)
		if b.seen[prev] {
			continue
		}
		b.seen[prev] = true
		b.message(x, q, u)
	}

	mt, _, _ := mime.ParseMediaType(x.ContentType)
	if x.Status < 200 || x.Status > 299 {
		b.notef(x.Seq, "status %d: no answer from the model", x.Status)
		return
	}
	r, err := p.readResponse(x.Response, mt == "text/event-stream")
	if err != nil {
		b.notef(x.Seq, "the response could not be read: %v", err)
		return
	}
	for _, pr := range r.problems {
		b.notef(x.Seq, "%s", pr)
	}
	if x.Cut {
		r.truncated = true
	}
	if r.truncated {
		b.complete = false
		b.notef(x.Seq, "the response was cut before its end: its step holds what arrived")
	}
	b.answer(x, q, r, prev)
}

// message steps a message a request carried for the first time.
func (b *builder) message(x *gateway.Exchange, q *request, u *unit) {
	ex := &StepExtra{RecordingCall: x.Seq, Gateway: x.Gateway}
	switch u.role {
	case roleSystem:
		b.add(Step{Source: SourceSystem, Message: u.parts, Extra: ex})
	case roleAssistant:
		if b.echo(u) {
			return
		}
		// No inference made it, so ATIF allows it no reasoning_content:
		// what reasoning it carries is kept in its extra.
		zero := 0
		ex.FromRequest, ex.Reasoning = true, strings.Join(u.reasoning, "\n\n")
		b.add(Step{Source: SourceAgent, ModelName: q.model, Message: u.parts,
			ToolCalls: b.uniqueCalls(x, u.calls), LLMCallCount: &zero, Extra: ex})
	default: // user, tool
		for _, r := range u.results {
			b.observe(x, r)
		}
		if len(u.parts) > 0 {
			b.add(Step{Source: SourceUser, Message: u.parts, Extra: ex})
		}
	}
}

// echo reports whether an assistant message a request carries is one
// already stepped, though it does not chain (its request changed what came
// before it, or its text): every tool call it holds was stepped, or, with
// none, a response said its text.
func (b *builder) echo(u *unit) bool {
	if len(u.calls) > 0 {
		for _, c := range u.calls {
			if _, ok := b.callStep[c.ToolCallID]; !ok {
				return false
			}
		}
		return true
	}
	return b.answered[partsText(u.parts)]
}

// answer steps the model's response, and chains what it said onto prev.
func (b *builder) answer(x *gateway.Exchange, q *request, r *response, prev [32]byte) {
	merged := unit{role: roleAssistant}
	for i := range r.units {
		u := &r.units[i]
		merged.parts = append(merged.parts, u.parts...)
		merged.reasoning = append(merged.reasoning, u.reasoning...)
		merged.calls = append(merged.calls, u.calls...)
		if !u.empty() {
			prev = key(prev, u)
			b.seen[prev] = true
		}
	}
	if r.id != "" {
		b.after[r.id] = prev
	}
	_, tk := x.Usage()
	var m *Metrics
	if tk != (gateway.Tokens{}) {
		m = &Metrics{PromptTokens: tk.Input, CompletionTokens: tk.Output, CachedTokens: tk.CacheRead}
		if tk.CacheWrite > 0 {
			m.Extra = &MetricsExtra{CacheCreationInputTokens: tk.CacheWrite}
		}
	}
	one := 1
	b.add(Step{Source: SourceAgent, ModelName: cmp.Or(q.model, r.model), ReasoningEffort: q.effort,
		Message: merged.parts, ReasoningContent: strings.Join(merged.reasoning, "\n\n"),
		ToolCalls: b.uniqueCalls(x, merged.calls), Metrics: m, LLMCallCount: &one,
		Extra: &StepExtra{RecordingCall: x.Seq, Gateway: x.Gateway, StopReason: r.stop, Truncated: r.truncated}})
	if len(merged.calls) == 0 {
		b.answered[partsText(merged.parts)] = true
	}
}

// uniqueCalls registers the tool calls of the step about to be added, and
// returns them with ids unique within it (ATIF asks it): a repeated or
// missing id gets a suffix, and a note.
func (b *builder) uniqueCalls(x *gateway.Exchange, calls []ToolCall) []ToolCall {
	in := map[string]bool{}
	for i := range calls {
		c := &calls[i]
		if id := c.ToolCallID; id == "" || in[id] {
			for n := 2; ; n++ {
				if alt := fmt.Sprintf("%s#%d", id, n); !in[alt] {
					b.notef(x.Seq, "tool call id %q missing or repeated within a step: written as %q", id, alt)
					c.ToolCallID = alt
					break
				}
			}
		}
		in[c.ToolCallID] = true
		b.callStep[c.ToolCallID] = len(b.steps)
	}
	return calls
}

// observe puts a tool result on the step that made the call, once; a
// result for a call no step made gets a user step of its own.
func (b *builder) observe(x *gateway.Exchange, r result) {
	res := ObservationResult{SourceCallID: r.callID, Content: r.content,
		Extra: ResultExtra{RecordingCall: x.Seq, IsError: r.isError}}
	i, ok := b.callStep[r.callID]
	if !ok {
		res.SourceCallID, res.Extra.ToolCallID = "", r.callID
		b.notef(x.Seq, "a tool result for call id %q, which no recorded step made", r.callID)
		b.add(Step{Source: SourceUser, Message: Content{}, Observation: &Observation{Results: []ObservationResult{res}},
			Extra: &StepExtra{RecordingCall: x.Seq, Gateway: x.Gateway}})
		return
	}
	s := &b.steps[i]
	if s.Observation == nil {
		s.Observation = &Observation{}
	}
	for _, have := range s.Observation.Results {
		if have.SourceCallID == res.SourceCallID && have.Extra.IsError == res.Extra.IsError && slices.Equal(have.Content, res.Content) {
			return // sent again, unchanged
		}
	}
	res.Content = b.keep(res.Content)
	s.Observation.Results = append(s.Observation.Results, res)
}

// add appends s, its text within the trajectory's budget.
func (b *builder) add(s Step) {
	s.Message = b.keep(s.Message)
	if s.ReasoningContent != "" {
		s.ReasoningContent = b.keep(Content{{Type: "text", Text: s.ReasoningContent}})[0].Text
	}
	for i := range s.ToolCalls {
		c := &s.ToolCalls[i]
		n := int64(len(c.Arguments))
		if c.Extra != nil {
			n += int64(len(c.Extra.RawArguments))
		}
		if n > b.left {
			c.Arguments, c.Extra = json.RawMessage(`{}`), &ToolCallExtra{ArgumentsError: b.over(n)}
			continue
		}
		b.left -= n
	}
	if s.Observation != nil {
		for i := range s.Observation.Results {
			s.Observation.Results[i].Content = b.keep(s.Observation.Results[i].Content)
		}
	}
	b.steps = append(b.steps, s)
}

// maxText bounds the text a trajectory holds (messages, reasoning, tool
// arguments and results): the agent chooses it, and the recording's own
// limits allow several times more once escaped for JSON. A variable for
// tests only.
var maxText int64 = 64 << 20

// keep returns c within what is left of the budget: a part past it is cut,
// and says so.
func (b *builder) keep(c Content) Content {
	var out Content
	for _, p := range c {
		n := int64(len(p.Text))
		if n <= b.left {
			b.left -= n
			out = append(out, p)
			continue
		}
		cut := max(b.left, 0)
		b.left = 0
		out = append(out, ContentPart{Type: "text", Text: strings.ToValidUTF8(p.Text[:cut], "") + "[" + b.over(n-cut) + "]"})
	}
	return out
}

// over notes that the budget ran out, and says what n bytes became.
func (b *builder) over(n int64) string {
	b.complete = false
	b.notef(0, "the trajectory holds at most %d bytes of text: what came past that is cut", maxText)
	return fmt.Sprintf("%d bytes not kept: past the trajectory's limit of %d bytes of text", n, maxText)
}

// partsText is the text of parts, for telling an echo by its text.
func partsText(parts Content) string {
	var sb strings.Builder
	for _, p := range parts {
		sb.WriteString(strconv.Itoa(len(p.Text)))
		sb.WriteByte(':')
		sb.WriteString(p.Text)
	}
	return sb.String()
}

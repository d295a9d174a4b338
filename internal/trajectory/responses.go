package trajectory

import (
	"encoding/json"
	"fmt"
	"strings"
)

// OpenAI's Responses API (POST /v1/responses).

// maxItems bounds the output items read of one streamed response.
const maxItems = 10_000

type responsesRequest struct {
	Model        string          `json:"model"`
	Instructions json.RawMessage `json:"instructions"`
	Input        json.RawMessage `json:"input"`
	Reasoning    *struct {
		Effort string `json:"effort"`
	} `json:"reasoning"`
	PreviousResponseID string `json:"previous_response_id"`
}

// responsesItem is an input or output item of any type.
type responsesItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	ID        string          `json:"id"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Input     json.RawMessage `json:"input"`
	Action    json.RawMessage `json:"action"`
	Output    json.RawMessage `json:"output"`
	Summary   []responsesPart `json:"summary"`
	Status    string          `json:"status"`
}

// responsesPart is a content part (input_text, output_text, refusal,
// input_image, input_file, summary_text, reasoning_text, …).
type responsesPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	FileData string `json:"file_data"`
	Filename string `json:"filename"`
}

func responsesReadRequest(body []byte) (*request, error) {
	var r responsesRequest
	if err := decode(body, &r); err != nil {
		return nil, err
	}
	q := &request{model: r.Model, previous: r.PreviousResponseID}
	if r.Reasoning != nil {
		q.effort = r.Reasoning.Effort
	}
	if s, ok := jsonString(r.Instructions); ok && s != "" {
		q.system = Content{{Type: "text", Text: s}}
	}
	if s, ok := jsonString(r.Input); ok {
		u := unit{role: roleUser}
		u.text(s)
		q.units = append(q.units, u)
		return q, nil
	}
	var items []responsesItem
	if decode(r.Input, &items) != nil {
		return q, nil
	}
	for i := range items {
		if u, ok := responsesUnit(&items[i]); ok {
			q.units = append(q.units, u)
		}
	}
	return q, nil
}

// responsesUnit is the unit an item makes, if it makes one: a message, a
// tool call, a tool call's output, reasoning.
func responsesUnit(it *responsesItem) (unit, bool) {
	t := it.Type
	switch {
	case t == "message" || t == "" && it.Role != "":
		u := unit{role: roleUser}
		switch it.Role {
		case "assistant":
			u.role = roleAssistant
		case "system", "developer":
			u.role = roleSystem
		}
		responsesContent(&u, it.Content)
		return u, true
	case t == "reasoning":
		u := unit{role: roleAssistant}
		var parts []responsesPart
		decode(it.Content, &parts)
		for _, p := range append(it.Summary, parts...) {
			if p.Text != "" {
				u.reasoning = append(u.reasoning, p.Text)
			}
		}
		return u, true
	case strings.HasSuffix(t, "_call_output"):
		id := it.CallID
		if id == "" {
			id = it.ID // local_shell_call_output names its call by id
		}
		var r unit
		responsesContent(&r, it.Output)
		return unit{role: roleTool, results: []result{{callID: id, content: r.parts}}}, true
	case strings.HasSuffix(t, "_call"):
		name := it.Name
		if name == "" {
			name = strings.TrimSuffix(t, "_call")
		}
		var args json.RawMessage
		var extra *ToolCallExtra
		switch {
		case !isNull(it.Arguments):
			args, extra = stringArguments(it.Arguments)
		case !isNull(it.Input): // custom tools take free text
			args, extra = wrapArgument("input", it.Input)
		case !isNull(it.Action): // local_shell_call, computer_call
			args, extra = wrapArgument("action", it.Action)
		default:
			args, extra = arguments(nil)
		}
		id := it.CallID
		if id == "" {
			id = it.ID
		}
		return unit{role: roleAssistant, calls: []ToolCall{{ToolCallID: id, FunctionName: name, Arguments: args, Extra: extra}}}, true
	}
	return unit{}, false // item_reference and types not known: nothing to read
}

// wrapArgument makes {"name": raw}: the arguments of a call whose input is
// not an object of named arguments.
func wrapArgument(name string, raw json.RawMessage) (json.RawMessage, *ToolCallExtra) {
	b, err := marshal(map[string]json.RawMessage{name: raw})
	if err != nil {
		return arguments(raw)
	}
	return arguments(b)
}

// responsesContent adds content, a string or an array of parts, to u.
func responsesContent(u *unit, content json.RawMessage) {
	if s, ok := jsonString(content); ok {
		u.text(s)
		return
	}
	var parts []responsesPart
	if decode(content, &parts) != nil {
		return
	}
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text", "summary_text", "reasoning_text":
			u.text(p.Text)
		case "refusal":
			u.text(p.Refusal)
		case "input_image":
			u.text(placeholder("image", "", p.ImageURL))
		case "input_file":
			u.text(placeholder("file "+p.Filename, "", p.FileData))
		default:
			u.text(placeholder(p.Type+" part", "", ""))
		}
	}
}

// responsesResponse is a Response object.
type responsesResponse struct {
	ID                string          `json:"id"`
	Model             string          `json:"model"`
	Status            string          `json:"status"`
	Output            []responsesItem `json:"output"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func responsesReadResponse(body []byte, sse bool) (*response, error) {
	if !sse {
		var rr responsesResponse
		if err := decode(body, &rr); err != nil {
			return nil, err
		}
		return responsesFrom(&rr, false), nil
	}
	return responsesReadStream(body)
}

// responsesFrom is the response rr says.
func responsesFrom(rr *responsesResponse, truncated bool) *response {
	r := &response{id: rr.ID, model: rr.Model, stop: rr.Status, truncated: truncated}
	if d := rr.IncompleteDetails; d != nil && d.Reason != "" {
		r.stop += ": " + d.Reason
	}
	if e := rr.Error; e != nil && (e.Code != "" || e.Message != "") {
		r.problems = append(r.problems, fmt.Sprintf("the response reported an error: %s: %s", e.Code, e.Message))
	}
	for i := range rr.Output {
		if u, ok := responsesUnit(&rr.Output[i]); ok {
			r.units = append(r.units, u)
		}
	}
	return r
}

// responsesEvent is any event of a Responses stream.
type responsesEvent struct {
	Type         string             `json:"type"`
	Response     *responsesResponse `json:"response"`
	OutputIndex  int                `json:"output_index"`
	ContentIndex int                `json:"content_index"`
	SummaryIndex int                `json:"summary_index"`
	Item         *responsesItem     `json:"item"`
	Delta        string             `json:"delta"`
	Arguments    *string            `json:"arguments"`
	Message      string             `json:"message"`
	Code         string             `json:"code"`
}

// streamItem is an output item being put together from its events.
type streamItem struct {
	it      responsesItem
	text    []string // by content_index
	summary []string // by summary_index
	args    string
	done    bool // response.output_item.done gave the whole item
}

// responsesReadStream takes the output of the response.completed (or
// .incomplete, .failed) event; a stream without one is truncated, and
// its items are put together from response.output_item.added and .done,
// and the text, refusal, arguments and reasoning deltas.
func responsesReadStream(body []byte) (*response, error) {
	events, _ := sseEvents(body)
	var items []*streamItem
	var head responsesResponse
	var problems []string
	bad := 0
	at := func(i int) *streamItem {
		if i < 0 || i >= maxItems {
			bad++
			return &streamItem{}
		}
		for len(items) <= i {
			items = append(items, &streamItem{})
		}
		return items[i]
	}
	grow := func(s []string, i int) []string {
		for len(s) <= i && i < maxBlocks {
			s = append(s, "")
		}
		return s
	}
	for _, ev := range events {
		var e responsesEvent
		if decode(ev.data, &e) != nil {
			bad++
			continue
		}
		switch e.Type {
		case "response.created", "response.in_progress":
			if e.Response != nil {
				head.ID, head.Model = e.Response.ID, e.Response.Model
			}
		case "response.completed", "response.incomplete", "response.failed":
			if e.Response != nil {
				r := responsesFrom(e.Response, false)
				if len(e.Response.Output) == 0 && len(items) > 0 {
					r.units = streamUnits(items)
				}
				r.problems = append(problems, r.problems...)
				if bad > 0 {
					r.problems = append(r.problems, fmt.Sprintf("%d event(s) of the stream could not be read", bad))
				}
				return r, nil
			}
		case "response.output_item.added", "response.output_item.done":
			if e.Item != nil {
				si := at(e.OutputIndex)
				si.it = *e.Item
				si.done = si.done || e.Type == "response.output_item.done"
			}
		case "response.output_text.delta", "response.refusal.delta", "response.reasoning_text.delta":
			si := at(e.OutputIndex)
			if si.text = grow(si.text, e.ContentIndex); e.ContentIndex >= 0 && e.ContentIndex < len(si.text) {
				si.text[e.ContentIndex] += e.Delta
			}
		case "response.reasoning_summary_text.delta":
			si := at(e.OutputIndex)
			if si.summary = grow(si.summary, e.SummaryIndex); e.SummaryIndex >= 0 && e.SummaryIndex < len(si.summary) {
				si.summary[e.SummaryIndex] += e.Delta
			}
		case "response.function_call_arguments.delta", "response.custom_tool_call_input.delta":
			at(e.OutputIndex).args += e.Delta
		case "response.function_call_arguments.done":
			if e.Arguments != nil {
				at(e.OutputIndex).args = *e.Arguments
			}
		case "error":
			problems = append(problems, fmt.Sprintf("the stream reported an error: %s: %s", e.Code, e.Message))
		}
	}
	r := &response{id: head.ID, model: head.Model, truncated: true, units: streamUnits(items), problems: problems}
	if bad > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d event(s) of the stream could not be read", bad))
	}
	return r, nil
}

// streamUnits makes the units of items put together from a stream: an
// item the stream gave whole as it is, another from its deltas.
func streamUnits(items []*streamItem) []unit {
	var out []unit
	for _, si := range items {
		it := si.it
		if !si.done {
			switch {
			case it.Type == "reasoning":
				for _, s := range si.summary {
					it.Summary = append(it.Summary, responsesPart{Type: "summary_text", Text: s})
				}
				it.Content = textParts("reasoning_text", si.text)
			case it.Type == "message":
				it.Content = textParts("output_text", si.text)
			case it.Type == "custom_tool_call" && si.args != "":
				it.Input, _ = marshal(si.args)
			case si.args != "":
				it.Arguments, _ = marshal(si.args)
			}
		}
		if u, ok := responsesUnit(&it); ok {
			out = append(out, u)
		}
	}
	return out
}

// textParts is texts as a content array of parts of type typ.
func textParts(typ string, texts []string) json.RawMessage {
	parts := make([]responsesPart, 0, len(texts))
	for _, s := range texts {
		parts = append(parts, responsesPart{Type: typ, Text: s})
	}
	b, _ := json.Marshal(parts)
	return b
}

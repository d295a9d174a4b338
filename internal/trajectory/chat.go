package trajectory

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// OpenAI's Chat Completions API (POST /v1/chat/completions), which most
// other providers and local model servers speak too.

type chatRequest struct {
	Model           string        `json:"model"`
	Messages        []chatMessage `json:"messages"`
	ReasoningEffort string        `json:"reasoning_effort"`
}

type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Refusal          string          `json:"refusal"`
	ReasoningContent string          `json:"reasoning_content"` // DeepSeek, vLLM
	Reasoning        string          `json:"reasoning"`         // OpenRouter
	ToolCalls        []chatToolCall  `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
}

type chatToolCall struct {
	Index    int    `json:"index"` // streamed deltas
	ID       string `json:"id"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type chatPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

func chatReadRequest(body []byte) (*request, error) {
	var r chatRequest
	if err := decode(body, &r); err != nil {
		return nil, err
	}
	q := &request{model: r.Model, effort: r.ReasoningEffort}
	for i := range r.Messages {
		q.units = append(q.units, chatUnit(&r.Messages[i]))
	}
	return q, nil
}

// chatUnit is the unit a message makes.
func chatUnit(m *chatMessage) unit {
	u := unit{role: roleUser}
	switch m.Role {
	case "assistant":
		u.role = roleAssistant
	case "system", "developer":
		u.role = roleSystem
	case "tool", "function":
		var r unit
		chatContent(&r, m.Content)
		return unit{role: roleTool, results: []result{{callID: m.ToolCallID, content: r.parts}}}
	}
	chatContent(&u, m.Content)
	u.text(m.Refusal)
	for _, s := range []string{m.ReasoningContent, m.Reasoning} {
		if s != "" {
			u.reasoning = append(u.reasoning, s)
		}
	}
	for _, c := range m.ToolCalls {
		args, extra := stringArguments(c.Function.Arguments)
		u.calls = append(u.calls, ToolCall{ToolCallID: c.ID, FunctionName: c.Function.Name, Arguments: args, Extra: extra})
	}
	return u
}

// chatContent adds content, a string, null or an array of parts, to u.
func chatContent(u *unit, content json.RawMessage) {
	if s, ok := jsonString(content); ok {
		u.text(s)
		return
	}
	var parts []chatPart
	if decode(content, &parts) != nil {
		return
	}
	for _, p := range parts {
		switch p.Type {
		case "text":
			u.text(p.Text)
		case "image_url":
			url := ""
			if p.ImageURL != nil {
				url = p.ImageURL.URL
			}
			u.text(placeholder("image", "", url))
		default:
			u.text(placeholder(p.Type+" part", "", ""))
		}
	}
}

type chatResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index        int          `json:"index"`
		Message      *chatMessage `json:"message"`
		Delta        *chatMessage `json:"delta"`
		FinishReason string       `json:"finish_reason"`
	} `json:"choices"`
}

func chatReadResponse(body []byte, sse bool) (*response, error) {
	if !sse {
		var cr chatResponse
		if err := decode(body, &cr); err != nil {
			return nil, err
		}
		r := &response{id: cr.ID, model: cr.Model}
		for _, c := range cr.Choices {
			if c.Index != 0 || c.Message == nil {
				continue
			}
			u := chatUnit(c.Message)
			u.role = roleAssistant
			r.units, r.stop = []unit{u}, c.FinishReason
		}
		if len(cr.Choices) > 1 {
			r.problems = append(r.problems, fmt.Sprintf("%d choices: only the first is read", len(cr.Choices)))
		}
		return r, nil
	}
	return chatReadStream(body)
}

// chatReadStream puts the first choice's message together from its
// chunks' deltas; a stream that ends without "data: [DONE]" and without a
// finish_reason is truncated.
func chatReadStream(body []byte) (*response, error) {
	events, _ := sseEvents(body)
	r := &response{truncated: true}
	var msg chatMessage
	var content bytes.Buffer
	var calls []*chatToolCall
	args := map[*chatToolCall]*bytes.Buffer{}
	bad, others, done := 0, false, false
	for _, ev := range events {
		if string(ev.data) == "[DONE]" {
			done = true
			continue
		}
		var cr chatResponse
		if decode(ev.data, &cr) != nil {
			bad++
			continue
		}
		if r.id == "" {
			r.id = cr.ID
		}
		if r.model == "" {
			r.model = cr.Model
		}
		for _, c := range cr.Choices {
			if c.Index != 0 {
				others = true
				continue
			}
			if c.FinishReason != "" {
				r.stop = c.FinishReason
			}
			d := c.Delta
			if d == nil {
				continue
			}
			if s, ok := jsonString(d.Content); ok {
				content.WriteString(s)
			}
			msg.Refusal += d.Refusal
			msg.ReasoningContent += d.ReasoningContent
			msg.Reasoning += d.Reasoning
			for _, tc := range d.ToolCalls {
				if tc.Index < 0 || tc.Index >= maxBlocks {
					bad++
					continue
				}
				for len(calls) <= tc.Index {
					calls = append(calls, &chatToolCall{})
				}
				call := calls[tc.Index]
				if tc.ID != "" {
					call.ID = tc.ID
				}
				call.Function.Name += tc.Function.Name
				if args[call] == nil {
					args[call] = &bytes.Buffer{}
				}
				if s, ok := jsonString(tc.Function.Arguments); ok {
					args[call].WriteString(s)
				}
			}
		}
	}
	r.truncated = !done && r.stop == ""
	msg.Content, _ = marshal(content.String())
	for _, c := range calls {
		if b := args[c]; b != nil {
			c.Function.Arguments, _ = marshal(b.String())
		}
		msg.ToolCalls = append(msg.ToolCalls, *c)
	}
	u := chatUnit(&msg)
	u.role = roleAssistant
	r.units = []unit{u}
	if others {
		r.problems = append(r.problems, "more than one choice: only the first is read")
	}
	if bad > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d event(s) of the stream could not be read", bad))
	}
	return r, nil
}

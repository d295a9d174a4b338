package trajectory

import (
	"encoding/json"
	"fmt"
)

// Anthropic's Messages API (POST /v1/messages).

// maxBlocks bounds the content blocks read of one streamed message.
const maxBlocks = 10_000

type anthropicRequest struct {
	Model    string             `json:"model"`
	System   json.RawMessage    `json:"system"`
	Messages []anthropicMessage `json:"messages"`
}

type anthropicMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// anthropicBlock is a content block, of any type, request's or response's.
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Source    *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
}

func anthropicReadRequest(body []byte) (*request, error) {
	var r anthropicRequest
	if err := decode(body, &r); err != nil {
		return nil, err
	}
	q := &request{model: r.Model}
	var sys unit
	anthropicContent(&sys, r.System)
	q.system = sys.parts
	for _, m := range r.Messages {
		u := unit{role: roleUser}
		if m.Role == "assistant" {
			u.role = roleAssistant
		}
		anthropicContent(&u, m.Content)
		q.units = append(q.units, u)
	}
	return q, nil
}

// anthropicContent adds content, a string or an array of blocks, to u.
func anthropicContent(u *unit, content json.RawMessage) {
	if s, ok := jsonString(content); ok {
		u.text(s)
		return
	}
	var blocks []anthropicBlock
	if decode(content, &blocks) != nil {
		return
	}
	for i := range blocks {
		anthropicAdd(u, &blocks[i])
	}
}

// anthropicAdd adds one block to u.
func anthropicAdd(u *unit, b *anthropicBlock) {
	switch b.Type {
	case "text":
		u.text(b.Text)
	case "thinking":
		if b.Thinking != "" {
			u.reasoning = append(u.reasoning, b.Thinking)
		}
	case "redacted_thinking":
		// Encrypted: nothing to read.
	case "tool_use", "server_tool_use":
		args, extra := arguments(b.Input)
		u.calls = append(u.calls, ToolCall{ToolCallID: b.ID, FunctionName: b.Name, Arguments: args, Extra: extra})
	case "tool_result":
		var r unit
		anthropicContent(&r, b.Content)
		u.results = append(u.results, result{callID: b.ToolUseID, content: r.parts, isError: b.IsError})
	case "image", "document":
		media, data := "", ""
		if b.Source != nil {
			media, data = b.Source.MediaType, b.Source.Data
		}
		u.text(placeholder(b.Type, media, data))
	default:
		u.text(placeholder(b.Type+" block", "", ""))
	}
}

// anthropicResponse is a Message, as a JSON body or message_start has it.
type anthropicResponse struct {
	ID         string           `json:"id"`
	Model      string           `json:"model"`
	Content    []anthropicBlock `json:"content"`
	StopReason string           `json:"stop_reason"`
}

func anthropicReadResponse(body []byte, sse bool) (*response, error) {
	if !sse {
		var m anthropicResponse
		if err := decode(body, &m); err != nil {
			return nil, err
		}
		u := unit{role: roleAssistant}
		for i := range m.Content {
			anthropicAdd(&u, &m.Content[i])
		}
		return &response{id: m.ID, model: m.Model, units: []unit{u}, stop: m.StopReason}, nil
	}
	return anthropicReadStream(body)
}

// anthropicEvent is any event of a Messages stream.
type anthropicEvent struct {
	Type         string             `json:"type"`
	Message      *anthropicResponse `json:"message"`
	Index        int                `json:"index"`
	ContentBlock *anthropicBlock    `json:"content_block"`
	Delta        *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// streamBlock is a content block being put together from its deltas.
type streamBlock struct {
	b       anthropicBlock
	input   []byte // input_json_delta fragments, joined
	started bool
}

// anthropicReadStream puts the message together from message_start,
// content_block_start, content_block_delta (text, thinking and
// input_json_delta), message_delta (stop_reason) and message_stop; a
// stream without message_stop is truncated.
func anthropicReadStream(body []byte) (*response, error) {
	events, _ := sseEvents(body)
	r := &response{truncated: true}
	var blocks []*streamBlock
	bad := 0
	for _, ev := range events {
		var e anthropicEvent
		if decode(ev.data, &e) != nil {
			bad++
			continue
		}
		switch e.Type {
		case "message_start":
			if e.Message != nil {
				r.id, r.model = e.Message.ID, e.Message.Model
			}
		case "content_block_start", "content_block_delta":
			if e.Index < 0 || e.Index >= maxBlocks {
				bad++
				continue
			}
			for len(blocks) <= e.Index {
				blocks = append(blocks, &streamBlock{})
			}
			sb := blocks[e.Index]
			if e.ContentBlock != nil {
				sb.b, sb.started = *e.ContentBlock, true
			}
			if d := e.Delta; d != nil {
				sb.b.Text += d.Text
				sb.b.Thinking += d.Thinking
				sb.input = append(sb.input, d.PartialJSON...)
			}
		case "message_delta":
			if e.Delta != nil && e.Delta.StopReason != "" {
				r.stop = e.Delta.StopReason
			}
		case "message_stop":
			r.truncated = false
		case "error":
			if e.Error != nil {
				r.problems = append(r.problems, fmt.Sprintf("the stream reported an error: %s: %s", e.Error.Type, e.Error.Message))
			}
		}
	}
	if bad > 0 {
		r.problems = append(r.problems, fmt.Sprintf("%d event(s) of the stream could not be read", bad))
	}
	u := unit{role: roleAssistant}
	for _, sb := range blocks {
		if !sb.started {
			continue
		}
		if len(sb.input) > 0 {
			sb.b.Input = sb.input
		}
		anthropicAdd(&u, &sb.b)
	}
	r.units = []unit{u}
	return r, nil
}

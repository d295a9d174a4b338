package scriptedmodel

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// chat answers OpenAI's Chat Completions API: the turn is the number of
// role "tool" messages.
func (s *Server) chat(w http.ResponseWriter, r *http.Request, body []byte) {
	model, turn, st := s.begin(r, body, func() int {
		var req struct {
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		_ = json.Unmarshal(body, &req)
		n := 0
		for _, m := range req.Messages {
			if m.Role == "tool" {
				n++
			}
		}
		return n
	})
	id := fmt.Sprintf("chatcmpl-%d", turn+1)
	msg := map[string]any{"role": "assistant", "content": st.Text}
	finish := "stop"
	var call map[string]any
	if st.Tool != "" {
		finish = "tool_calls"
		call = map[string]any{"index": 0, "id": fmt.Sprintf("call_%02d", turn+1), "type": "function",
			"function": map[string]any{"name": st.Tool, "arguments": inputJSON(st.Input)}}
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{call}}
	}
	usage := map[string]any{"prompt_tokens": 100 + 10*max(turn, 0), "completion_tokens": 20, "total_tokens": 120 + 10*max(turn, 0)}
	if !streaming(body) {
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(delta map[string]any, finish any, usage any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
		if usage != nil {
			c["usage"] = usage
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	if call != nil {
		chunk(map[string]any{"role": "assistant", "tool_calls": []any{call}}, nil, nil)
	} else {
		chunk(map[string]any{"role": "assistant", "content": st.Text}, nil, nil)
	}
	chunk(map[string]any{}, finish, usage)
	fmt.Fprint(w, "data: [DONE]\n\n")
}

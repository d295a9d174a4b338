package scriptedmodel

import (
	"fmt"
	"net/http"
)

func (s *Server) responses(w http.ResponseWriter, r *http.Request, body []byte) {
	model, turn, st := s.begin(r, body, func() int {
		return count(body, "function_call_output") + count(body, "custom_tool_call_output")
	})
	id := fmt.Sprintf("resp_%d", turn+1)
	var item map[string]any
	if st.Tool != "" {
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_%02d", turn+1), "call_id": fmt.Sprintf("call_%02d", turn+1),
			"name": st.Tool, "arguments": inputJSON(st.Input), "status": "completed"}
	} else {
		item = map[string]any{"type": "message", "id": fmt.Sprintf("msg_%02d", turn+1), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": st.Text, "annotations": []any{}}}}
	}
	usage := map[string]any{"input_tokens": 100 + 10*max(turn, 0), "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": 20, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 120 + 10*max(turn, 0)}
	resp := map[string]any{"id": id, "object": "response", "model": model, "status": "completed", "output": []any{item}, "usage": usage}
	if !streaming(body) {
		writeJSON(w, resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	created := map[string]any{"id": id, "object": "response", "model": model, "status": "in_progress", "output": []any{}}
	sse(w, "response.created", map[string]any{"type": "response.created", "sequence_number": 0, "response": created})
	sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": item})
	if st.Tool != "" {
		sse(w, "response.function_call_arguments.delta", map[string]any{"type": "response.function_call_arguments.delta", "sequence_number": 2,
			"item_id": item["id"], "output_index": 0, "delta": item["arguments"]})
		sse(w, "response.function_call_arguments.done", map[string]any{"type": "response.function_call_arguments.done", "sequence_number": 3,
			"item_id": item["id"], "output_index": 0, "arguments": item["arguments"]})
	} else {
		sse(w, "response.output_text.delta", map[string]any{"type": "response.output_text.delta", "sequence_number": 2,
			"item_id": item["id"], "output_index": 0, "content_index": 0, "delta": st.Text})
	}
	sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "sequence_number": 4, "output_index": 0, "item": item})
	sse(w, "response.completed", map[string]any{"type": "response.completed", "sequence_number": 5, "response": resp})
}

package scriptedmodel

import (
	"fmt"
	"net/http"
)

func (s *Server) anthropic(w http.ResponseWriter, r *http.Request, body []byte) {
	model, turn, st := s.begin(r, body, func() int { return count(body, "tool_result") })
	id := fmt.Sprintf("msg_%d", turn+1)
	usage := map[string]any{"input_tokens": 100 + 10*max(turn, 0), "output_tokens": 20, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
	var block map[string]any
	stop := "end_turn"
	if st.Tool != "" {
		stop = "tool_use"
		block = map[string]any{"type": "tool_use", "id": fmt.Sprintf("toolu_%02d", turn+1), "name": st.Tool, "input": st.Input}
	} else {
		block = map[string]any{"type": "text", "text": st.Text}
	}
	if !streaming(body) {
		writeJSON(w, map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	sse(w, "message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]any{"input_tokens": usage["input_tokens"], "output_tokens": 1}}})
	if st.Tool != "" {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{
			"type": "tool_use", "id": block["id"], "name": st.Tool, "input": map[string]any{}}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{
			"type": "input_json_delta", "partial_json": inputJSON(st.Input)}})
	} else {
		sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": st.Text}})
	}
	sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": usage["output_tokens"]}})
	sse(w, "message_stop", map[string]any{"type": "message_stop"})
}

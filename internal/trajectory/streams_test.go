package trajectory

import (
	"strings"

	"github.com/proctor-sandbox/proctor/internal/gateway"
)

// Realistic recordings: requests as the agents send them, responses as the
// providers answer, streams event by event.

// sse joins events into a text/event-stream body, each ended by a blank
// line; an event is "name\tdata" or, with no tab, data alone.
func sse(events ...string) []byte {
	var b strings.Builder
	for _, e := range events {
		if name, data, ok := strings.Cut(e, "\t"); ok {
			b.WriteString("event: " + name + "\n")
			e = data
		}
		b.WriteString("data: " + e + "\n\n")
	}
	return []byte(b.String())
}

func post(seq int, gw, target, req string, ctype string, resp []byte) gateway.Exchange {
	return gateway.Exchange{Seq: seq, Gateway: gw, Method: "POST", Target: target, Request: []byte(req),
		Status: 200, ContentType: ctype, Response: resp}
}

const (
	jsonType = "application/json"
	sseType  = "text/event-stream; charset=utf-8"
)

// anthropicTurn1 is Claude Code's first request: a system prompt in
// blocks with cache_control, the task, tools, a stream.
const anthropicTurn1 = `{"model":"claude-sonnet-4-5","max_tokens":32000,"stream":true,
"system":[{"type":"text","text":"You are Claude Code, Anthropic's official CLI for Claude.","cache_control":{"type":"ephemeral"}}],
"tools":[{"name":"Bash","description":"Run a command","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}}],
"messages":[{"role":"user","content":[{"type":"text","text":"Fix the failing test in /app.","cache_control":{"type":"ephemeral"}}]}]}`

// anthropicStream1 thinks, says a line, and calls Bash, its input in
// fragments.
var anthropicStream1 = sse(
	"message_start\t"+`{"type":"message_start","message":{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[],"stop_reason":null,"usage":{"input_tokens":10,"cache_read_input_tokens":100,"cache_creation_input_tokens":20,"output_tokens":1}}}`,
	"content_block_start\t"+`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
	"content_block_delta\t"+`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"The test runner "}}`,
	"content_block_delta\t"+`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"will say what fails."}}`,
	"content_block_delta\t"+`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCkYIBxgCKkB"}}`,
	"content_block_stop\t"+`{"type":"content_block_stop","index":0}`,
	"ping\t"+`{"type":"ping"}`,
	"content_block_start\t"+`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
	"content_block_delta\t"+`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"I'll run "}}`,
	"content_block_delta\t"+`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"the tests."}}`,
	"content_block_stop\t"+`{"type":"content_block_stop","index":1}`,
	"content_block_start\t"+`{"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"toolu_01A","name":"Bash","input":{}}}`,
	"content_block_delta\t"+`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":""}}`,
	"content_block_delta\t"+`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"go te"}}`,
	"content_block_delta\t"+`{"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"st ./...\"}"}}`,
	"content_block_stop\t"+`{"type":"content_block_stop","index":2}`,
	"message_delta\t"+`{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":42}}`,
	"message_stop\t"+`{"type":"message_stop"}`,
)

// anthropicTurn2 sends it all back (the cache_control marker moved to the
// last message, the thinking with its signature), the tool's result and a
// reminder beside it.
const anthropicTurn2 = `{"model":"claude-sonnet-4-5","max_tokens":32000,
"system":[{"type":"text","text":"You are Claude Code, Anthropic's official CLI for Claude."}],
"messages":[{"role":"user","content":[{"type":"text","text":"Fix the failing test in /app."}]},
{"role":"assistant","content":[{"type":"thinking","thinking":"The test runner will say what fails.","signature":"EqQBCkYIBxgCKkB"},{"type":"text","text":"I'll run the tests."},{"type":"tool_use","id":"toolu_01A","name":"Bash","input":{"command":"go test ./..."}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01A","content":"--- FAIL: TestAdd\nFAIL","is_error":true},{"type":"text","text":"<system-reminder>Keep going.</system-reminder>","cache_control":{"type":"ephemeral"}}]}]}`

const anthropicResponse2 = `{"id":"msg_02","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929",
"content":[{"type":"text","text":"TestAdd fails: Add subtracts."}],"stop_reason":"end_turn",
"usage":{"input_tokens":300,"cache_read_input_tokens":0,"cache_creation_input_tokens":0,"output_tokens":12}}`

func anthropicSession() []gateway.Exchange {
	return []gateway.Exchange{
		post(1, "anthropic", "/v1/messages", anthropicTurn1, "text/event-stream", anthropicStream1),
		{Seq: 2, Gateway: "anthropic", Method: "POST", Target: "/v1/messages/count_tokens", Request: []byte(`{"model":"claude-sonnet-4-5","messages":[]}`),
			Status: 200, ContentType: jsonType, Response: []byte(`{"input_tokens":5}`)},
		post(3, "anthropic", "/v1/messages", anthropicTurn2, jsonType, []byte(anthropicResponse2)),
	}
}

// responsesTurn1 is Codex's first request: instructions, a developer
// message, the task, reasoning asked for.
const responsesTurn1 = `{"model":"gpt-5-codex","instructions":"You are Codex, a coding agent.","stream":true,"store":false,
"reasoning":{"effort":"high","summary":"auto"},
"tools":[{"type":"function","name":"shell","parameters":{"type":"object","properties":{"command":{"type":"array"}}}}],
"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions>workspace-write</permissions>"}]},
{"type":"message","role":"user","content":[{"type":"input_text","text":"List the files."}]}]}`

// responsesStream1 reasons, then calls shell, its arguments in deltas.
var responsesStream1 = sse(
	"response.created\t"+`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","model":"gpt-5-codex","status":"in_progress","output":[]}}`,
	"response.output_item.added\t"+`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_1","type":"reasoning","summary":[]}}`,
	"response.reasoning_summary_text.delta\t"+`{"type":"response.reasoning_summary_text.delta","sequence_number":2,"item_id":"rs_1","output_index":0,"summary_index":0,"delta":"**Listing** the workspace."}`,
	"response.output_item.done\t"+`{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":{"id":"rs_1","type":"reasoning","encrypted_content":"gAAAA","summary":[{"type":"summary_text","text":"**Listing** the workspace."}]}}`,
	"response.output_item.added\t"+`{"type":"response.output_item.added","sequence_number":4,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"in_progress","arguments":"","call_id":"call_abc","name":"shell"}}`,
	"response.function_call_arguments.delta\t"+`{"type":"response.function_call_arguments.delta","sequence_number":5,"item_id":"fc_1","output_index":1,"delta":"{\"command\":[\"ls\","}`,
	"response.function_call_arguments.delta\t"+`{"type":"response.function_call_arguments.delta","sequence_number":6,"item_id":"fc_1","output_index":1,"delta":"\"-a\"]}"}`,
	"response.function_call_arguments.done\t"+`{"type":"response.function_call_arguments.done","sequence_number":7,"item_id":"fc_1","output_index":1,"arguments":"{\"command\":[\"ls\",\"-a\"]}"}`,
	"response.output_item.done\t"+`{"type":"response.output_item.done","sequence_number":8,"output_index":1,"item":{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"command\":[\"ls\",\"-a\"]}","call_id":"call_abc","name":"shell"}}`,
	"response.completed\t"+`{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","model":"gpt-5-codex","status":"completed","output":[{"id":"rs_1","type":"reasoning","encrypted_content":"gAAAA","summary":[{"type":"summary_text","text":"**Listing** the workspace."}]},{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"command\":[\"ls\",\"-a\"]}","call_id":"call_abc","name":"shell"}],"usage":{"input_tokens":500,"input_tokens_details":{"cached_tokens":400},"output_tokens":50,"output_tokens_details":{"reasoning_tokens":30},"total_tokens":550}}}`,
)

// responsesTurn2 sends the whole input again, the output (reasoning
// encrypted) and the call's output.
const responsesTurn2 = `{"model":"gpt-5-codex","instructions":"You are Codex, a coding agent.","store":false,"reasoning":{"effort":"high"},
"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions>workspace-write</permissions>"}]},
{"type":"message","role":"user","content":[{"type":"input_text","text":"List the files."}]},
{"type":"reasoning","id":"rs_1","encrypted_content":"gAAAA","summary":[{"type":"summary_text","text":"**Listing** the workspace."}]},
{"type":"function_call","id":"fc_1","call_id":"call_abc","name":"shell","arguments":"{\"command\":[\"ls\",\"-a\"]}"},
{"type":"function_call_output","call_id":"call_abc","output":"a.txt\nb.txt"}]}`

// responsesTurn2Chained is the same turn through previous_response_id.
const responsesTurn2Chained = `{"model":"gpt-5-codex","instructions":"You are Codex, a coding agent.","previous_response_id":"resp_1","reasoning":{"effort":"high"},
"input":[{"type":"function_call_output","call_id":"call_abc","output":"a.txt\nb.txt"}]}`

const responsesResponse2 = `{"id":"resp_2","object":"response","model":"gpt-5-codex","status":"completed",
"output":[{"id":"msg_2","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Two files: a.txt and b.txt.","annotations":[]}]}],
"usage":{"input_tokens":560,"input_tokens_details":{"cached_tokens":500},"output_tokens":9,"total_tokens":569}}`

func responsesSession(turn2 string) []gateway.Exchange {
	return []gateway.Exchange{
		post(1, "openai", "/v1/responses", responsesTurn1, sseType, responsesStream1),
		post(2, "openai", "/v1/responses", turn2, jsonType, []byte(responsesResponse2)),
	}
}

// A Chat Completions session: a streamed tool call, its result sent back
// as a tool message, a plain answer.
const chatTurn1 = `{"model":"qwen3-coder","stream":true,"stream_options":{"include_usage":true},
"messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"What is in README?"}],
"tools":[{"type":"function","function":{"name":"read_file","parameters":{"type":"object"}}}]}`

var chatStream1 = sse(
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3-coder","choices":[{"index":0,"delta":{"role":"assistant","content":"Reading it."},"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3-coder","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_r1","type":"function","function":{"name":"read_file","arguments":""}}]},"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3-coder","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]},"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3-coder","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"README\"}"}}]},"finish_reason":null}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3-coder","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
	`{"id":"chatcmpl-1","object":"chat.completion.chunk","model":"qwen3-coder","choices":[],"usage":{"prompt_tokens":80,"completion_tokens":20,"total_tokens":100,"prompt_tokens_details":{"cached_tokens":64}}}`,
	`[DONE]`,
)

const chatTurn2 = `{"model":"qwen3-coder","messages":[{"role":"system","content":"You are a coding agent."},{"role":"user","content":"What is in README?"},
{"role":"assistant","content":"Reading it.","tool_calls":[{"id":"call_r1","type":"function","function":{"name":"read_file","arguments":"{\"path\":\"README\"}"}}]},
{"role":"tool","tool_call_id":"call_r1","content":"# Demo"}]}`

const chatResponse2 = `{"id":"chatcmpl-2","object":"chat.completion","model":"qwen3-coder","choices":[{"index":0,"message":{"role":"assistant","content":"It says: # Demo"},"finish_reason":"stop"}],
"usage":{"prompt_tokens":120,"completion_tokens":6,"total_tokens":126}}`

func chatSession() []gateway.Exchange {
	return []gateway.Exchange{
		post(1, "openai", "/v1/chat/completions", chatTurn1, sseType, chatStream1),
		post(2, "openai", "/v1/chat/completions", chatTurn2, jsonType, []byte(chatResponse2)),
	}
}

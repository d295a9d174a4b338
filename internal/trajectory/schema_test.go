package trajectory

import (
	"strings"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/trajectory/atiftest"
)

// mustEncode encodes tr, and fails the test if that is not a valid ATIF
// trajectory.
func mustEncode(t testing.TB, tr *Trajectory) []byte {
	t.Helper()
	data, err := tr.Encode()
	if err != nil {
		t.Fatalf("Encode: %v", err)
	}
	if err := atiftest.Validate(data); err != nil {
		t.Fatalf("not a valid ATIF-v1.7 trajectory: %v\n%s", err, data)
	}
	return data
}

// The validator can fail: each of these breaks one rule of ATIF-v1.7, and
// the example from the RFC (section IV, relabelled v1.7) passes.
func TestSchemaRefuses(t *testing.T) {
	good := `{"schema_version":"ATIF-v1.7","session_id":"s","agent":{"name":"a","version":"1","model_name":"m"},
"steps":[{"step_id":1,"source":"user","message":"What is GOOGL at?"},
{"step_id":2,"source":"agent","model_name":"m","reasoning_effort":"medium","message":"I will search.","reasoning_content":"two calls",
"tool_calls":[{"tool_call_id":"call_price_1","function_name":"financial_search","arguments":{"ticker":"GOOGL","metric":"price"}}],
"observation":{"results":[{"source_call_id":"call_price_1","content":"185.35"}]},
"metrics":{"prompt_tokens":520,"completion_tokens":80,"cached_tokens":200,"cost_usd":0.00045}},
{"step_id":3,"source":"agent","message":[{"type":"text","text":"It trades at $185.35."}],"metrics":{"prompt_tokens":600,"completion_tokens":44,"logprobs":[-0.1],"extra":{"reasoning_tokens":12}}}],
"final_metrics":{"total_prompt_tokens":1120,"total_completion_tokens":124,"total_cached_tokens":200,"total_cost_usd":0.00078,"total_steps":3}}`
	if err := atiftest.Validate([]byte(good)); err != nil {
		t.Fatalf("the RFC's example: %v", err)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"an unknown version", `"ATIF-v1.7"`, `"ATIF-v2.0"`},
		{"no agent version", `"name":"a","version":"1",`, `"name":"a",`},
		{"an unknown field", `"session_id":"s",`, `"session_id":"s","steps_count":3,`},
		{"an unknown source", `"source":"user"`, `"source":"tool"`},
		{"no message", `"source":"user","message":"What is GOOGL at?"`, `"source":"user"`},
		{"tool calls on a user step", `"source":"user","message":"What is GOOGL at?"`, `"source":"user","message":"x","tool_calls":[]`},
		{"metrics on a user step", `"source":"user","message":"What is GOOGL at?"`, `"source":"user","message":"x","metrics":{}`},
		{"arguments not an object", `"arguments":{"ticker":"GOOGL","metric":"price"}`, `"arguments":"ticker=GOOGL"`},
		{"a step id of 0", `"step_id":1,`, `"step_id":0,`},
		{"step ids out of order", `"step_id":3,`, `"step_id":4,`},
		{"a result for another step's call", `"source_call_id":"call_price_1"`, `"source_call_id":"call_volume_2"`},
		{"a repeated tool call id", `"tool_calls":[{"tool_call_id":"call_price_1","function_name":"financial_search","arguments":{"ticker":"GOOGL","metric":"price"}}]`,
			`"tool_calls":[{"tool_call_id":"c","function_name":"f","arguments":{}},{"tool_call_id":"c","function_name":"f","arguments":{}}]`},
		{"a text part without text", `[{"type":"text","text":"It trades at $185.35."}]`, `[{"type":"text"}]`},
		{"metrics on a deterministic dispatch", `"step_id":3,"source":"agent",`, `"step_id":3,"source":"agent","llm_call_count":0,`},
		{"a negative total_steps", `"total_steps":3`, `"total_steps":-1`},
		{"no steps", `"steps":[{"step_id":1,`, `"steps":[],"x":[{"step_id":1,`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(good, tc.from, tc.to, 1)
			if bad == good {
				t.Fatalf("%q not in the example", tc.from)
			}
			if err := atiftest.Validate([]byte(bad)); err == nil {
				t.Errorf("validated:\n%s", bad)
			}
		})
	}
}

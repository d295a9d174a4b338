package trajectory_test

import (
	"fmt"

	"github.com/proctor-sandbox/proctor/internal/gateway"
	"github.com/proctor-sandbox/proctor/internal/trajectory"
)

// Two turns through a Chat Completions gateway: the second request sends
// the first back with the tool's result, which lands on the step that made
// the call.
func ExampleBuild() {
	xs := []gateway.Exchange{
		{Seq: 1, Gateway: "openai", Method: "POST", Target: "/v1/chat/completions", Status: 200, ContentType: "application/json",
			Request:  []byte(`{"model":"m","messages":[{"role":"user","content":"How many files?"}]}`),
			Response: []byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]}}],"usage":{"prompt_tokens":12,"completion_tokens":5}}`)},
		{Seq: 2, Gateway: "openai", Method: "POST", Target: "/v1/chat/completions", Status: 200, ContentType: "application/json",
			Request:  []byte(`{"model":"m","messages":[{"role":"user","content":"How many files?"},{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"a b"}]}`),
			Response: []byte(`{"choices":[{"index":0,"message":{"role":"assistant","content":"Two."}}],"usage":{"prompt_tokens":30,"completion_tokens":2}}`)},
	}
	tr, err := trajectory.Build(xs, trajectory.Options{AgentName: "my-agent", AgentVersion: "1.0"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range tr.Steps {
		msg, _ := s.Message.MarshalJSON()
		fmt.Printf("%d %s %s", s.StepID, s.Source, msg)
		for _, c := range s.ToolCalls {
			fmt.Printf(" calls %s %s%s", c.ToolCallID, c.FunctionName, c.Arguments)
		}
		if s.Observation != nil {
			fmt.Printf(" gets %q", s.Observation.Results[0].Content[0].Text)
		}
		fmt.Println()
	}
	fmt.Println(tr.SchemaVersion, tr.FinalMetrics.TotalPromptTokens, tr.FinalMetrics.TotalCompletionTokens)
	// Output:
	// 1 user "How many files?"
	// 2 agent "" calls c1 ls{} gets "a b"
	// 3 agent "Two."
	// ATIF-v1.7 42 7
}

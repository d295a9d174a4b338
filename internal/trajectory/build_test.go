package trajectory

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/gateway"
)

// shape renders a trajectory's steps one a line, for comparing.
func shape(t *Trajectory) []string {
	var out []string
	for _, s := range t.Steps {
		msg, _ := s.Message.MarshalJSON()
		l := fmt.Sprintf("%d %s call=%d %s", s.StepID, s.Source, s.Extra.RecordingCall, msg)
		if s.ModelName != "" {
			l += " model=" + s.ModelName
		}
		if s.ReasoningEffort != "" {
			l += " effort=" + s.ReasoningEffort
		}
		if s.ReasoningContent != "" {
			l += fmt.Sprintf(" reasoning=%q", s.ReasoningContent)
		}
		for _, c := range s.ToolCalls {
			l += fmt.Sprintf(" tool=%s:%s%s", c.ToolCallID, c.FunctionName, c.Arguments)
		}
		if s.Observation != nil {
			for _, r := range s.Observation.Results {
				content, _ := r.Content.MarshalJSON()
				l += fmt.Sprintf(" result=%s@%d:%s", r.SourceCallID, r.Extra.RecordingCall, content)
				if r.Extra.IsError {
					l += "(error)"
				}
			}
		}
		if m := s.Metrics; m != nil {
			l += fmt.Sprintf(" tokens=%d/%d/%d", m.PromptTokens, m.CompletionTokens, m.CachedTokens)
			if m.Extra != nil {
				l += fmt.Sprintf("+w%d", m.Extra.CacheCreationInputTokens)
			}
		}
		if s.LLMCallCount != nil {
			l += fmt.Sprintf(" llm=%d", *s.LLMCallCount)
		}
		if s.Extra.StopReason != "" {
			l += " stop=" + s.Extra.StopReason
		}
		if s.Extra.Truncated {
			l += " truncated"
		}
		out = append(out, l)
	}
	return out
}

// build builds xs, checks the result is valid ATIF and that building again
// gives the same bytes, and returns it.
func build(t *testing.T, xs []gateway.Exchange) (*Trajectory, []byte) {
	t.Helper()
	tr, err := Build(xs, Options{AgentName: "claude-code", AgentVersion: "2.0.0"})
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	data := mustEncode(t, tr)
	again, _ := Build(xs, Options{AgentName: "claude-code", AgentVersion: "2.0.0"})
	if b, _ := again.Encode(); !bytes.Equal(b, data) {
		t.Errorf("two builds of the same calls differ:\n%s\n%s", data, b)
	}
	return tr, data
}

func sameShape(t *testing.T, tr *Trajectory, want []string) {
	t.Helper()
	got := shape(tr)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("steps:\n%s\nwant:\n%s\nnotes: %s", strings.Join(got, "\n"), strings.Join(want, "\n"), tr.Notes)
	}
}

// Two turns of Claude Code: the streamed thinking, text and tool call
// (its input in input_json_delta fragments) become one agent step with the
// usage of message_start and message_delta; the next request sends the
// conversation back (cache_control moved): only the tool's result (on the
// step that called it) and the reminder beside it are new.
func TestAnthropic(t *testing.T) {
	tr, _ := build(t, anthropicSession())
	sameShape(t, tr, []string{
		`1 system call=1 "You are Claude Code, Anthropic's official CLI for Claude."`,
		`2 user call=1 "Fix the failing test in /app."`,
		`3 agent call=1 "I'll run the tests." model=claude-sonnet-4-5 reasoning="The test runner will say what fails." tool=toolu_01A:Bash{"command":"go test ./..."} result=toolu_01A@3:"--- FAIL: TestAdd\nFAIL"(error) tokens=130/42/100+w20 llm=1 stop=tool_use`,
		`4 user call=3 "<system-reminder>Keep going.</system-reminder>"`,
		`5 agent call=3 "TestAdd fails: Add subtracts." model=claude-sonnet-4-5 tokens=300/12/0 llm=1 stop=end_turn`,
	})
	if tr.Agent.Name != "claude-code" || tr.Agent.Version != "2.0.0" || tr.Agent.ModelName != "claude-sonnet-4-5" || tr.SchemaVersion != "ATIF-v1.7" {
		t.Errorf("agent %+v, version %s", tr.Agent, tr.SchemaVersion)
	}
	fm := tr.FinalMetrics
	if fm.TotalPromptTokens != 430 || fm.TotalCompletionTokens != 54 || fm.TotalCachedTokens != 100 || fm.TotalSteps != 5 ||
		fm.Extra == nil || fm.Extra.TotalCacheCreationInputTokens != 20 {
		t.Errorf("final metrics %+v", fm)
	}
	if tr.Notes != "call 2: POST /v1/messages/count_tokens: not a model turn" || !tr.Extra.Complete || tr.Extra.ModelTurns != 2 || tr.Extra.RecordingCalls != 3 {
		t.Errorf("notes %q, extra %+v", tr.Notes, tr.Extra)
	}
	if !strings.HasPrefix(tr.SessionID, "sha256:") {
		t.Errorf("session id %q", tr.SessionID)
	}
}

// Two turns of Codex on the Responses API: the streamed reasoning summary
// and function call (arguments in deltas), then the function_call_output
// the next request carries, whether it sends the whole input again or
// chains with previous_response_id.
func TestResponses(t *testing.T) {
	want := []string{
		`1 system call=1 "You are Codex, a coding agent."`,
		`2 system call=1 "<permissions>workspace-write</permissions>"`,
		`3 user call=1 "List the files."`,
		`4 agent call=1 "" model=gpt-5-codex effort=high reasoning="**Listing** the workspace." tool=call_abc:shell{"command":["ls","-a"]} result=call_abc@2:"a.txt\nb.txt" tokens=500/50/400 llm=1 stop=completed`,
		`5 agent call=2 "Two files: a.txt and b.txt." model=gpt-5-codex effort=high tokens=560/9/500 llm=1 stop=completed`,
	}
	for name, turn2 := range map[string]string{"whole input": responsesTurn2, "previous_response_id": responsesTurn2Chained} {
		t.Run(name, func(t *testing.T) {
			tr, _ := build(t, responsesSession(turn2))
			sameShape(t, tr, want)
			if tr.Notes != "" {
				t.Errorf("notes: %s", tr.Notes)
			}
		})
	}
	// Without response.completed the items are put together from the
	// stream's own events, and the step is marked truncated.
	cut := responsesStream1[:bytes.Index(responsesStream1, []byte("event: response.completed"))]
	xs := responsesSession(responsesTurn2)
	xs[0].Response = cut
	tr, _ := build(t, xs)
	if got := shape(tr)[3]; got != `4 agent call=1 "" model=gpt-5-codex effort=high reasoning="**Listing** the workspace." tool=call_abc:shell{"command":["ls","-a"]} result=call_abc@2:"a.txt\nb.txt" llm=1 truncated` {
		t.Errorf("a stream without its end: %s", got)
	}
	if tr.Extra.Complete || !strings.Contains(tr.Notes, "call 1: the response was cut before its end") {
		t.Errorf("notes %q, extra %+v", tr.Notes, tr.Extra)
	}
	// Cut before the call's arguments were done: they come from the deltas.
	xs[0].Response = responsesStream1[:bytes.Index(responsesStream1, []byte("event: response.function_call_arguments.done"))]
	tr, _ = build(t, xs)
	if got := tr.Steps[3].ToolCalls; len(got) != 1 || string(got[0].Arguments) != `{"command":["ls","-a"]}` || got[0].ToolCallID != "call_abc" {
		t.Errorf("a call put together from its deltas: %+v", got)
	}
}

// Chat Completions: a streamed tool call put together from its chunks, the
// usage of the last chunk, a tool message answering it.
func TestChat(t *testing.T) {
	tr, _ := build(t, chatSession())
	sameShape(t, tr, []string{
		`1 system call=1 "You are a coding agent."`,
		`2 user call=1 "What is in README?"`,
		`3 agent call=1 "Reading it." model=qwen3-coder tool=call_r1:read_file{"path":"README"} result=call_r1@2:"# Demo" tokens=80/20/64 llm=1 stop=tool_calls`,
		`4 agent call=2 "It says: # Demo" model=qwen3-coder tokens=120/6/0 llm=1 stop=stop`,
	})
}

// What the agent does beside its model turns, and what went wrong, is in
// the notes and marks; never a panic or a made-up step.
func TestDamage(t *testing.T) {
	anth := anthropicSession()
	t.Run("a stream cut in a tool call's input", func(t *testing.T) {
		xs := anth[:1]
		cut := anthropicStream1[:bytes.Index(anthropicStream1, []byte(`st ./...`))]
		xs[0].Response, xs[0].Cut = cut, true
		tr, _ := build(t, xs)
		s := tr.Steps[2]
		if !s.Extra.Truncated || len(s.ToolCalls) != 1 || string(s.ToolCalls[0].Arguments) != "{}" || s.ToolCalls[0].Extra == nil ||
			s.ToolCalls[0].Extra.RawArguments != `{"command": "go te` || s.Message[0].Text != "I'll run the tests." {
			t.Errorf("step %+v, call %+v", s, s.ToolCalls)
		}
		if tr.Extra.Complete || !strings.Contains(tr.Notes, "call 1: the response was cut before its end: its step holds what arrived") {
			t.Errorf("notes %q", tr.Notes)
		}
	})
	t.Run("failures and other calls", func(t *testing.T) {
		xs := []gateway.Exchange{
			{Seq: 1, Gateway: "openai", Method: "GET", Target: "/v1/models?limit=2", Status: 200, ContentType: jsonType, Response: []byte(`{"data":[]}`)},
			post(2, "openai", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, jsonType, []byte(`{"error":{"message":"overloaded"}}`)),
			post(3, "openai", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, jsonType, []byte(`{"choices":[{"index":0,"message":{"content":"hello"}}]}`)),
			post(4, "openai", "/v1/chat/completions", `not json`, jsonType, []byte(`{"choices":[{"index":0,"message":{"content":"still answered"}}]}`)),
			post(5, "openai", "/v1/chat/completions", `{"model":"m","messages":[]}`, sseType, []byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"par\"}}]}\n\ndata: {broken\n\n")),
			post(6, "openai", "/v1/chat/completions", `{"model":"m","messages":[]}`, jsonType, []byte(`<html>bad gateway</html>`)),
			post(7, "openai", "/v1/chat/completions", `{"model":"m","messages":[{"role":"tool","tool_call_id":"call_nobody","content":"orphan"},{"role":"assistant","content":"I said this myself","tool_calls":[{"id":"x","function":{"name":"f","arguments":"[1]"}},{"id":"x","function":{"name":"g","arguments":""}}]}]}`, jsonType, []byte(`{"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}`)),
		}
		xs[1].Status = 529
		tr, _ := build(t, xs)
		sameShape(t, tr, []string{
			`1 user call=2 "hi"`,
			`2 agent call=3 "hello" model=m llm=1`,
			`3 agent call=4 "still answered" llm=1`,
			`4 agent call=5 "par" model=m llm=1 truncated`,
			`5 user call=7 "" result=@7:"orphan"`,
			`6 agent call=7 "I said this myself" model=m tool=x:f{} tool=x#2:g{} llm=0`,
			`7 agent call=7 "ok" model=m llm=1 stop=stop`,
		})
		for _, n := range []string{
			"call 1: GET /v1/models: not a model turn",
			"call 2: status 529: no answer from the model",
			"call 4: the request could not be read: invalid character 'o' in literal null (expecting 'u')",
			"call 5: 1 event(s) of the stream could not be read",
			"call 5: the response was cut before its end: its step holds what arrived",
			"call 6: the response could not be read: invalid character '<' looking for beginning of value",
			`call 7: a tool result for call id "call_nobody", which no recorded step made`,
			`call 7: tool call id "x" missing or repeated within a step: written as "x#2"`,
		} {
			if !strings.Contains(tr.Notes+"\n", n+"\n") {
				t.Errorf("notes lack %q:\n%s", n, tr.Notes)
			}
		}
		s := tr.Steps[5]
		if !s.Extra.FromRequest || s.ToolCalls[0].Extra == nil || s.ToolCalls[0].Extra.ArgumentsError != "JSON, but not an object" {
			t.Errorf("the agent's own history: %+v %+v", s.Extra, s.ToolCalls[0].Extra)
		}
		if r := tr.Steps[4].Observation.Results[0]; r.Extra.ToolCallID != "call_nobody" {
			t.Errorf("an orphan result: %+v", r)
		}
	})
	t.Run("no model turn", func(t *testing.T) {
		_, err := Build([]gateway.Exchange{{Seq: 1, Method: "GET", Target: "/v1/models", Status: 200}}, Options{})
		if !errors.Is(err, ErrNoTurns) {
			t.Errorf("Build = %v, want ErrNoTurns", err)
		}
		if _, err := Build(nil, Options{}); !errors.Is(err, ErrNoTurns) {
			t.Errorf("Build(nil) = %v, want ErrNoTurns", err)
		}
	})
}

// Messages are stepped once, however many requests send them, and again
// only as the model saw them again: a conversation the agent rewrote, a
// second conversation at once (a subagent) alongside the first.
func TestDedupe(t *testing.T) {
	turn := func(seq int, msgs, answer string) gateway.Exchange {
		return post(seq, "openai", "/v1/chat/completions", `{"model":"m","messages":[`+msgs+`]}`, jsonType,
			[]byte(`{"choices":[{"index":0,"message":{"content":"`+answer+`"},"finish_reason":"stop"}]}`))
	}
	u := func(s string) string { return `{"role":"user","content":"` + s + `"}` }
	a := func(s string) string { return `{"role":"assistant","content":"` + s + `"}` }
	j := func(ms ...string) string { return strings.Join(ms, ",") }
	xs := []gateway.Exchange{
		turn(1, j(u("task")), "A1"),
		turn(2, j(u("sub: look")), "S1"), // a subagent's own conversation
		turn(3, j(u("task"), a("A1"), u("go on")), "A2"),
		turn(4, j(u("sub: look"), a("S1"), u("go on")), "S2"), // "go on" again, in the other conversation
		turn(5, j(u("task"), a("A1"), u("go on"), a("A2"), u("go on")), "A3"),
		turn(6, j(u("task (edited)"), a("A1"), u("go on")), "A4"), // history rewritten
	}
	tr, _ := build(t, xs)
	sameShape(t, tr, []string{
		`1 user call=1 "task"`,
		`2 agent call=1 "A1" model=m llm=1 stop=stop`,
		`3 user call=2 "sub: look"`,
		`4 agent call=2 "S1" model=m llm=1 stop=stop`,
		`5 user call=3 "go on"`,
		`6 agent call=3 "A2" model=m llm=1 stop=stop`,
		`7 user call=4 "go on"`,
		`8 agent call=4 "S2" model=m llm=1 stop=stop`,
		`9 user call=5 "go on"`,
		`10 agent call=5 "A3" model=m llm=1 stop=stop`,
		`11 user call=6 "task (edited)"`,
		`12 user call=6 "go on"`,
		`13 agent call=6 "A4" model=m llm=1 stop=stop`,
	})
}

// The encoding is ATIF's: a message of several parts is an array of text
// parts, arguments stay as the model ordered them, nothing is escaped for
// HTML.
func TestEncode(t *testing.T) {
	xs := []gateway.Exchange{post(1, "anthropic", "/v1/messages",
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a <b> & c"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}`,
		jsonType, []byte(`{"content":[{"type":"tool_use","id":"t1","name":"f","input":{"z":1,"a":[2, 3]}}],"usage":{"input_tokens":1,"output_tokens":1}}`))}
	_, data := build(t, xs)
	var doc struct {
		Steps []json.RawMessage `json:"steps"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"message": [
        {
          "type": "text",
          "text": "a <b> & c"
        },
        {
          "type": "text",
          "text": "[image image/png, sha256:`,
		`"arguments": {
            "z": 1,
            "a": [
              2,
              3
            ]
          }`,
	} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("the trajectory lacks %s:\n%s", want, data)
		}
	}
}

// A trajectory holds at most maxText bytes of text, whatever the agent
// sends: past it, text is cut where it stands and tool arguments become {},
// each saying so, and the trajectory is marked incomplete.
func TestTextLimit(t *testing.T) {
	defer func(n int64) { maxText = n }(maxText)
	maxText = 120
	tr, _ := build(t, anthropicSession())
	// The agent's first step, after 57+29 bytes of system prompt and task,
	// and its own 19 of text: 15 left for its reasoning, none for the call.
	s := tr.Steps[2]
	if got := s.ReasoningContent; got != "The test runner[21 bytes not kept: past the trajectory's limit of 120 bytes of text]" {
		t.Errorf("reasoning %q", got)
	}
	if c := s.ToolCalls[0]; string(c.Arguments) != "{}" || c.Extra == nil || !strings.HasPrefix(c.Extra.ArgumentsError, "27 bytes not kept") {
		t.Errorf("tool call %+v %+v", c, c.Extra)
	}
	if tr.Extra.Complete || !strings.Contains(tr.Notes, "the trajectory holds at most 120 bytes of text: what came past that is cut") {
		t.Errorf("notes %q, extra %+v", tr.Notes, tr.Extra)
	}
}

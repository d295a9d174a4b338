package gateway

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// convBody is an Anthropic request of a real CLI's shape: its framing
// (system prompt, metadata) varies by session, its conversation by what
// the agent's tools returned.
func convBody(session, result string) string {
	return `{"model":"claude-x","stream":true,"max_tokens":9,"system":"Today is ` + session + `","metadata":{"user_id":"session_` + session + `"},` +
		`"tools":[{"name":"Bash","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"fix it"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"cat x"}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"` + result + `"}]}]}`
}

func recordSteps(t *testing.T, steps []step) []byte {
	t.Helper()
	tape := NewTape()
	hs := recordingPair(t, tape)
	play(t, hs, steps)
	for _, h := range hs {
		h.close()
	}
	return encode(t, tape)
}

// A replay of a real CLI matches its requests by conversation when asked
// to: another session's framing is the same trial, other tool results or
// another model are not, and concurrent side requests may come in another
// order.
func TestTapeMatchConversation(t *testing.T) {
	side := `{"model":"claude-haiku","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"title for: fix it, session A"}]}`
	recorded := []step{
		{1, "POST", "/v1/messages", convBody("A", "1 2 3")},
		{1, "POST", "/v1/messages", side},
	}
	file := recordSteps(t, recorded)
	replay := func(t *testing.T, loose bool, steps []step) (*Tape, []answer) {
		tape := readTape(t, file)
		tape.MatchConversation = loose
		hs := replayPair(t, tape)
		answers := play(t, hs, steps)
		for _, h := range hs {
			h.close()
		}
		return tape, answers
	}
	sideB := strings.Replace(side, "session A", "session B", 1)
	t.Run("strict", func(t *testing.T) {
		tape, answers := replay(t, false, []step{{1, "POST", "/v1/messages", convBody("B", "1 2 3")}})
		if answers[0].status != 409 || tape.Done() == nil {
			t.Errorf("another session's request matched by digest: %+v", answers[0])
		}
	})
	t.Run("another session", func(t *testing.T) {
		tape, answers := replay(t, true, []step{{1, "POST", "/v1/messages", convBody("B", "1 2 3")}, {1, "POST", "/v1/messages", sideB}})
		if answers[0].status != 200 || answers[1].status != 200 || tape.Done() != nil || tape.Loose() != 2 {
			t.Errorf("answers %+v, done %v, loose %d", answers, tape.Done(), tape.Loose())
		}
	})
	t.Run("side request first", func(t *testing.T) {
		tape, answers := replay(t, true, []step{{1, "POST", "/v1/messages", sideB}, {1, "POST", "/v1/messages", convBody("B", "1 2 3")}})
		if answers[0].status != 200 || answers[1].status != 200 || tape.Done() != nil {
			t.Errorf("answers %+v, done %v", answers, tape.Done())
		}
		if !bytes.Contains([]byte(answers[0].body), []byte("event:")) {
			t.Errorf("not the recorded stream: %q", answers[0].body)
		}
	})
	t.Run("other tool results", func(t *testing.T) {
		tape, answers := replay(t, true, []step{{1, "POST", "/v1/messages", convBody("B", "1 2 4")}})
		if answers[0].status != 409 || tape.Done() == nil {
			t.Errorf("a request with another tool result matched: %+v", answers[0])
		}
	})
	t.Run("another model", func(t *testing.T) {
		body := strings.Replace(convBody("A", "1 2 3"), "claude-x", "claude-y", 1)
		tape, answers := replay(t, true, []step{{1, "POST", "/v1/messages", body}})
		if answers[0].status != 409 || tape.Done() == nil {
			t.Errorf("a request for another model matched: %+v", answers[0])
		}
	})
	t.Run("once each", func(t *testing.T) {
		b := convBody("B", "1 2 3")
		tape, answers := replay(t, true, []step{{1, "POST", "/v1/messages", b}, {1, "POST", "/v1/messages", b}})
		if answers[1].status != 409 || tape.Done() == nil {
			t.Errorf("one recorded call answered twice: %+v", answers[1])
		}
	})
}

func TestConversationKey(t *testing.T) {
	a, b := convBody("A", "x"), convBody("B", "x")
	if conversationKey([]byte(a), "1", nil) != conversationKey([]byte(b), "2", nil) {
		t.Error("framing changed the key")
	}
	for _, other := range []string{
		convBody("A", "y"),
		strings.Replace(a, `"command":"cat x"`, `"command":"cat y"`, 1),
		strings.Replace(a, `"name":"Bash","input":{`, `"name":"Read","input":{`, 1),
	} {
		if conversationKey([]byte(other), "3", nil) == conversationKey([]byte(a), "1", nil) {
			t.Errorf("the same key for another conversation: %s", other)
		}
	}
	resp := func(out string) string {
		return `{"model":"gpt-x","prompt_cache_key":"s1","tools":[{"type":"function","name":"exec_command"}],"input":[` +
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},` +
			`{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"c1"},` +
			`{"type":"function_call_output","call_id":"c1","output":"` + out + `"}]}`
	}
	if conversationKey([]byte(resp("a")), "1", nil) == conversationKey([]byte(resp("b")), "2", nil) {
		t.Error("responses: another function output, the same key")
	}
	if conversationKey([]byte(resp("a")), "1", nil) != conversationKey([]byte(strings.Replace(resp("a"), "s1", "s2", 1)), "2", nil) {
		t.Error("responses: the cache key changed the key")
	}
	if conversationKey([]byte("not json"), "1", nil) == conversationKey([]byte("not json either"), "2", nil) {
		t.Error("two bodies that do not parse share a key")
	}
}

// A CLI's framing of a tool result (Codex's chunk id and wall time) is
// left out when its recipe says so; the output itself never is.
func TestConversationKeyIgnoresFraming(t *testing.T) {
	out := func(chunk, result string) []byte {
		return []byte(`{"model":"gpt-x","tools":[{"type":"function","name":"exec_command"}],"input":[` +
			`{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"c1"},` +
			`{"type":"function_call_output","call_id":"c1","output":"Chunk ID: ` + chunk + `\nWall time: 0.0012 seconds\nOutput:\n` + result + `\n"}]}`)
	}
	ignore := []*regexp.Regexp{regexp.MustCompile(`^Chunk ID: [0-9a-f]+$`), regexp.MustCompile(`^Wall time: [0-9.]+ seconds$`)}
	if conversationKey(out("2848f1", "42"), "1", nil) == conversationKey(out("de3e42", "42"), "2", nil) {
		t.Error("without the recipe's patterns, another chunk id gives the same key")
	}
	if conversationKey(out("2848f1", "42"), "1", ignore) != conversationKey(out("de3e42", "42"), "2", ignore) {
		t.Error("the chunk id changed the key")
	}
	if conversationKey(out("2848f1", "42"), "1", ignore) == conversationKey(out("2848f1", "43"), "2", ignore) {
		t.Error("another output, the same key")
	}
	if conversationKey(out("2848f1", "Chunk ID: 1"), "1", ignore) == conversationKey(out("2848f1", "Chunk ID: 2"), "2", ignore) {
		t.Error("output lines that look like framing were dropped")
	}
}

// Every kind of tool output a request carries back is something the agent
// observed: two requests that differ in one must not share a key, whatever
// the API calls the item (Responses' apply_patch, shell, computer and MCP
// calls; Anthropic's server and MCP tool results).
func TestConversationKeySeesEveryToolOutput(t *testing.T) {
	pairs := map[string][2]string{
		"apply_patch_call_output": {
			`{"model":"m","input":[{"type":"apply_patch_call_output","call_id":"c1","status":"completed","output":"patched"}]}`,
			`{"model":"m","input":[{"type":"apply_patch_call_output","call_id":"c1","status":"failed","output":"no such file"}]}`},
		"shell_call_output": {
			`{"model":"m","input":[{"type":"shell_call_output","call_id":"c1","output":[{"stdout":"tests pass","stderr":""}]}]}`,
			`{"model":"m","input":[{"type":"shell_call_output","call_id":"c1","output":[{"stdout":"SECRET from /tests","stderr":""}]}]}`},
		"mcp_call": {
			`{"model":"m","input":[{"type":"mcp_call","name":"read","arguments":"{}","output":"one"}]}`,
			`{"model":"m","input":[{"type":"mcp_call","name":"read","arguments":"{}","output":"two"}]}`},
		"mcp_tool_result": {
			`{"model":"m","messages":[{"role":"user","content":[{"type":"mcp_tool_result","tool_use_id":"t1","content":[{"type":"text","text":"one"}]}]}]}`,
			`{"model":"m","messages":[{"role":"user","content":[{"type":"mcp_tool_result","tool_use_id":"t1","content":[{"type":"text","text":"two"}]}]}]}`},
	}
	for name, p := range pairs {
		if conversationKey([]byte(p[0]), "a", nil) == conversationKey([]byte(p[1]), "b", nil) {
			t.Errorf("%s: two different tool outputs share a conversation key", name)
		}
	}
}

// The key reads a request's fields as the provider does, by their exact
// names: a "MODEL" or "Input" beside "model" or "input", which the
// provider ignores, must not stand in for them.
func TestConversationKeyExactFieldNames(t *testing.T) {
	for name, p := range map[string][2]string{
		"model": {`{"model":"gpt-5","MODEL":"gpt-5-mini"}`, `{"model":"gpt-5-mini"}`},
		"input": {`{"model":"m","input":[{"type":"function_call_output","output":"seen"}],"Input":[{"type":"function_call_output","output":"other"}]}`,
			`{"model":"m","input":[{"type":"function_call_output","output":"other"}]}`},
	} {
		if conversationKey([]byte(p[0]), "a", nil) == conversationKey([]byte(p[1]), "b", nil) {
			t.Errorf("%s: a field the provider ignores decided the key", name)
		}
	}
}

// replay_ignore drops a CLI's header lines, never the output: a pattern
// that matches any line (a recipe's '^.*$') takes at most one line of
// each result, so results that differ still differ.
func TestConversationKeyIgnoreTakesOneLineAPattern(t *testing.T) {
	ignore := []*regexp.Regexp{regexp.MustCompile(`^.*$`)}
	a := `{"model":"m","input":[{"type":"function_call_output","output":"Chunk ID: 1\nall tests pass"}]}`
	b := `{"model":"m","input":[{"type":"function_call_output","output":"Chunk ID: 1\nFAILED: 3 tests"}]}`
	if conversationKey([]byte(a), "a", ignore) == conversationKey([]byte(b), "b", ignore) {
		t.Errorf("a catch-all replay_ignore pattern hid the whole tool result")
	}
	c := `{"model":"m","input":[{"type":"function_call_output","output":"Chunk ID: 2\nall tests pass"}]}`
	if conversationKey([]byte(a), "a", ignore) != conversationKey([]byte(c), "c", ignore) {
		t.Errorf("the header line was not left out")
	}
}

// What a CLI attaches beside a tool result in the same message (Claude
// Code's system reminders: "the file was modified, here are the
// changes") is an observation of the environment too.
func TestConversationKeySeesTextBesideToolResults(t *testing.T) {
	body := func(note string) []byte {
		return []byte(`{"model":"m","messages":[{"role":"user","content":"fix it"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"make"}}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"},{"type":"text","text":"<system-reminder>` + note + `</system-reminder>"}]}]}`)
	}
	if conversationKey(body("x.py was modified: def f(): return 1"), "a", nil) == conversationKey(body("x.py was modified: def f(): return 2"), "b", nil) {
		t.Errorf("a reminder beside a tool result, which the agent observed, is not in the key")
	}
}

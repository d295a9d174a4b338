package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// conversationKey digests what a request carries back from the agent's
// environment: the tool calls the model made and the results the agent
// sends back, in order, with the model asked for; not the agent's own
// framing (system prompt, dates, session and request ids, metadata),
// which a real agent CLI varies from run to run. Two requests with the
// same key continue the same conversation with the same observations. It
// reads Anthropic Messages (tool_use, tool_result in messages) and OpenAI
// Responses (function_call, function_call_output, custom tool calls and
// their outputs in input) and Chat Completions (tool_calls, role "tool"
// messages); a body it cannot read has the key of its digest alone.
//
// The leading lines of a tool result that match one of ignore (a CLI's own
// header on a result: a random chunk id, the wall time) are left out.
func conversationKey(body []byte, sum string, ignore []*regexp.Regexp) string {
	// Fields by their exact names, as the provider reads them (a struct
	// would take "MODEL" or "Input" for them too).
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return "body:" + sum
	}
	var req struct {
		Model    string
		Messages []json.RawMessage
		Input    json.RawMessage
		Tools    []json.RawMessage
	}
	if raw, ok := top["model"]; ok && json.Unmarshal(raw, &req.Model) != nil {
		return "body:" + sum
	}
	if raw, ok := top["messages"]; ok && json.Unmarshal(raw, &req.Messages) != nil {
		return "body:" + sum
	}
	if raw, ok := top["tools"]; ok && json.Unmarshal(raw, &req.Tools) != nil {
		return "body:" + sum
	}
	req.Input = top["input"]
	var parts []any
	add := func(kind string, v ...any) { parts = append(parts, append([]any{kind}, v...)) }
	var walkBlocks func(raw json.RawMessage)
	walkBlocks = func(raw json.RawMessage) {
		var items []map[string]json.RawMessage
		if json.Unmarshal(raw, &items) != nil {
			return
		}
		// Text a CLI puts beside tool results in the same message (Claude
		// Code's system reminders: "the file was modified, here are the
		// changes") is an observation of the environment too.
		beside := slices.ContainsFunc(items, func(it map[string]json.RawMessage) bool {
			var typ string
			_ = json.Unmarshal(it["type"], &typ)
			return typ == "tool_result"
		})
		for _, it := range items {
			var typ, role string
			_ = json.Unmarshal(it["type"], &typ)
			_ = json.Unmarshal(it["role"], &role)
			if beside && typ == "text" {
				add("beside", canonical(it["text"]))
			}
			switch typ {
			case "tool_use", "server_tool_use":
				add(typ, string(it["name"]), canonical(it["input"]))
			case "tool_result":
				add(typ, filtered(it["content"], ignore), string(it["is_error"]))
			case "function_call", "custom_tool_call", "local_shell_call":
				add(typ, string(it["name"]), canonical(it["arguments"]), canonical(it["input"]), canonical(it["action"]))
			case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
				add(typ, filtered(it["output"], ignore))
			default:
				// Any other call or its outcome (apply_patch_call_output,
				// shell_call_output, mcp_call, mcp_tool_result, a server
				// tool's result ...) is something the agent observed:
				// the whole item, less its ids.
				if hasAnySuffix(typ, "_call", "_use", "_output", "_result") {
					rest := maps.Clone(it)
					for _, k := range []string{"id", "call_id", "tool_use_id"} {
						delete(rest, k)
					}
					b, _ := json.Marshal(rest)
					add(typ, filtered(b, ignore))
				}
			}
			if role == "tool" { // chat completions
				add("tool", filtered(it["content"], ignore))
			}
			if tc, ok := it["tool_calls"]; ok {
				var calls []struct {
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				}
				if json.Unmarshal(tc, &calls) == nil {
					for _, c := range calls {
						add("tool_call", c.Function.Name, canonical(json.RawMessage(c.Function.Arguments)))
					}
				}
			}
			if c, ok := it["content"]; ok && typ != "tool_result" {
				walkBlocks(c)
			}
		}
	}
	msgs, _ := json.Marshal(req.Messages)
	walkBlocks(msgs)
	walkBlocks(req.Input)
	add("model", req.Model, len(req.Tools) > 0)
	b, _ := json.Marshal(parts)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// filtered is canonical(raw) with the leading lines matching ignore left
// out of every string in it.
func filtered(raw json.RawMessage, ignore []*regexp.Regexp) string {
	if len(ignore) == 0 || len(raw) == 0 {
		return canonical(raw)
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			// Only the leading lines, each pattern at most one: a header
			// of the CLI's, never the output that follows it (a
			// pattern that matches any line takes one line, not all).
			lines := strings.Split(x, "\n")
			used := make([]bool, len(ignore))
			header := func(line string) bool {
				for j, re := range ignore {
					if !used[j] && re.MatchString(line) {
						used[j] = true
						return true
					}
				}
				return false
			}
			i := 0
			for i < len(lines) && header(lines[i]) {
				i++
			}
			return strings.Join(lines[i:], "\n")
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			for k := range x {
				x[k] = walk(x[k])
			}
		}
		return v
	}
	b, _ := json.Marshal(walk(v))
	return string(b)
}

func hasAnySuffix(s string, suffixes ...string) bool {
	return slices.ContainsFunc(suffixes, func(x string) bool { return strings.HasSuffix(s, x) })
}

// canonical is raw JSON re-encoded (objects' keys sorted, no spaces), or
// raw as it is when it does not parse.
func canonical(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

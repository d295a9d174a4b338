package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// Tools are declared in groups too: a namespace tool groups tools under a
// name, and Codex declares its tools in input items (additional_tools,
// tool_search_output). These tests check a group is judged by the tools in
// it, wherever it stands.

// ns is a namespace tool named name holding the JSON array tools.
func ns(name, tools string) string {
	return `{"type":"namespace","name":"` + name + `","description":"","tools":` + tools + `}`
}

// fn is a function tool, as Codex declares them in a namespace.
const fn = `{"type":"function","name":"spawn_agent","description":"d","strict":false,"parameters":{"type":"object","properties":{}}}`

// inNamespaces is a tool inside n namespaces, the outermost named n0.
func inNamespaces(n int, tool string) string {
	for i := n - 1; i >= 0; i-- {
		tool = ns("n"+string(rune('0'+i)), "["+tool+"]")
	}
	return tool
}

// postRefused posts body to path and checks the gateway refused it with
// status and a one-line reason holding each of want, without relaying it.
func postRefused(t *testing.T, path, body string, status int, want ...string) {
	t.Helper()
	up := &spy{}
	hs := newHarness(t, config{path: "/v1"}, up.ServeHTTP)
	resp, got := hs.do(t, "POST", "/v1"+path, []byte(body), nil)
	refusedCall(t, hs, up, resp, status, want[0])
	var e struct{ Error struct{ Message string } }
	if json.Unmarshal(got, &e) != nil || strings.Contains(e.Error.Message, "\n") {
		t.Fatalf("the agent got %q, want a JSON error with a one-line message", got)
	}
	for _, w := range want {
		if !strings.Contains(e.Error.Message, w) {
			t.Errorf("the agent got %q, want a message holding %q", e.Error.Message, w)
		}
	}
}

// postRelayed posts body to path and checks it reached the upstream as it
// was sent.
func postRelayed(t *testing.T, path, body string) {
	t.Helper()
	up := &spy{}
	hs := newHarness(t, config{path: "/v1"}, up.ServeHTTP)
	resp, got := hs.do(t, "POST", "/v1"+path, []byte(body), nil)
	if resp.StatusCode != 200 {
		t.Errorf("status %d: %s", resp.StatusCode, got)
	}
	if c := hs.rec.wait(t, 1)[0]; c.Error != "" {
		t.Errorf("recorded %+v", c)
	}
	if seen := up.last(t); string(seen.Body) != body {
		t.Errorf("the upstream got %q, want it as sent", seen.Body)
	}
}

// TestNamespaceSmuggling hides server-side tools, and malformed groups, in
// namespaces. None may reach the upstream.
func TestNamespaceSmuggling(t *testing.T) {
	tools := func(ts ...string) string { return `{"model":"m","input":"hi","tools":[` + strings.Join(ts, ",") + `]}` }
	for _, tc := range []struct {
		name string
		body string
		want []string
	}{
		{"web search beside functions", tools(ns("multi_agent_v1", "["+fn+`,{"type":"web_search","external_web_access":true}]`)), []string{`server-side tool "web_search"`, `namespace "multi_agent_v1"`}},
		{"web search preview", tools(ns("g", `[{"type":"web_search_preview"}]`)), []string{`"web_search_preview"`}},
		{"file search", tools(ns("g", `[{"type":"file_search","vector_store_ids":["vs_abc"]}]`)), []string{`"file_search"`}},
		{"computer use", tools(ns("g", `[{"type":"computer_use"}]`)), []string{`"computer_use"`}},
		{"code interpreter", tools(ns("g", `[{"type":"code_interpreter","container":{"type":"auto"}}]`)), []string{`"code_interpreter"`}},
		{"mcp", tools(ns("g", `[{"type":"mcp","server_label":"x","server_url":"https://evil.test/mcp"}]`)), []string{`"mcp"`}},
		{"image generation", tools(ns("g", `[{"type":"image_generation"}]`)), []string{`"image_generation"`}},
		{"hosted shell", tools(ns("g", `[{"type":"shell","environment":{"type":"container_auto"}}]`)), []string{`"shell"`}},
		{"hosted tool search", tools(ns("g", `[{"type":"tool_search"}]`)), []string{`"tool_search"`}},
		{"anthropic web search", tools(ns("g", `[{"type":"web_search_20250305","name":"web_search"}]`)), []string{`"web_search_20250305"`}},
		{"unknown type", tools(ns("g", `[{"type":"frobnicate"}]`)), []string{`server-side tool "frobnicate"`, `namespace "g"`}},
		{"type in upper case", tools(ns("g", `[{"type":"WEB_SEARCH"}]`)), []string{`"WEB_SEARCH"`}},
		{"namespace in upper case", tools(`{"type":"NAMESPACE","name":"g","tools":[` + fn + `]}`), []string{`server-side tool "NAMESPACE"`}},
		{"in the second namespace", tools(ns("a", "["+fn+"]"), ns("b", `[{"type":"web_search"}]`)), []string{`namespace "b"`}},
		{"two levels down", tools(ns("outer", "["+ns("inner", `[{"type":"web_search"}]`)+"]")), []string{`"web_search"`, `namespace "inner"`}},
		{"as deep as allowed", tools(inNamespaces(maxNamespaceDepth, `{"type":"web_search"}`)), []string{`"web_search"`}},
		{"nested beyond the bound", tools(inNamespaces(maxNamespaceDepth+1, fn)), []string{"nest more than 4"}},
		{"escaped key", tools(`{"type":"namespace","name":"g","t\u006fols":[{"type":"web\u005fsearch"}]}`), []string{`"web_search"`}},
		{"tools twice, the last harmless", tools(`{"type":"namespace","name":"g","tools":[{"type":"web_search"}],"Tools":[]}`), []string{`gives "tools" twice`}},
		{"tools not an array", tools(`{"type":"namespace","name":"g","tools":{"type":"web_search"}}`), []string{`"tools" of namespace "g" is not an array`}},
		{"tools a string", tools(`{"type":"namespace","name":"g","tools":"web_search"}`), []string{"not an array"}},
		{"tools null", tools(`{"type":"namespace","name":"g","tools":null}`), []string{"not an array"}},
		{"no tools", tools(`{"type":"namespace","name":"g"}`), []string{`namespace "g" has no "tools"`}},
		{"a tool not an object", tools(ns("g", `["web_search"]`)), []string{`in namespace "g" is not a JSON object`}},
		{"type twice", tools(ns("g", `[{"type":"function","type":"web_search"}]`)), []string{`gives "type" twice`}},
		{"no name", tools(`{"type":"namespace","tools":[{"type":"web_search"}]}`), []string{`"web_search" in a namespace`}},
		{"anthropic messages", tools(ns("g", `[{"type":"web_fetch_20250910","name":"web_fetch"}]`)), []string{`"web_fetch_20250910"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := "/responses"
			if strings.HasPrefix(tc.name, "anthropic") {
				path = "/messages"
			}
			postRefused(t, path, tc.body, http.StatusForbidden, tc.want...)
		})
	}
}

// TestNamespacesOffered checks that namespaces of tools the agent runs pass.
func TestNamespacesOffered(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"functions", `{"tools":[{"type":"function","name":"exec_command","parameters":{}},` + ns("multi_agent_v1", "["+fn+","+fn+"]") + `]}`},
		{"custom and client tools", `{"tools":[` + ns("functions", `[{"type":"custom","name":"exec","format":{"type":"text"}},{"type":"local_shell"},{"type":"apply_patch"}]`) + `]}`},
		{"empty", `{"tools":[` + ns("g", `[]`) + `]}`},
		{"as deep as allowed", `{"tools":[` + inNamespaces(maxNamespaceDepth, fn) + `]}`},
		{"anthropic custom tool inside", `{"tools":[` + ns("g", `[{"name":"f","input_schema":{"type":"object"}}]`) + `]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			postRelayed(t, "/responses", tc.body)
		})
	}
}

// TestToolsInInputItems hides server-side tools in the input items that
// declare tools: Codex's additional_tools (its models of the "responses
// lite" kind declare every tool there) and tool_search_output (the tools a
// client-run tool search loaded). None may reach the upstream.
func TestToolsInInputItems(t *testing.T) {
	item := func(typ, tools string) string {
		return `{"model":"m","input":[{"type":"` + typ + `","role":"developer","tools":` + tools + `},{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]}`
	}
	for _, tc := range []struct {
		name string
		body string
		want []string
	}{
		{"additional tools", item("additional_tools", `[{"type":"web_search"}]`), []string{`server-side tool "web_search" in an object of type "additional_tools"`}},
		{"after client tools", item("additional_tools", `[`+fn+`,{"type":"mcp","server_label":"x","server_url":"https://evil.test/mcp"}]`), []string{`"mcp"`}},
		{"in a namespace", item("additional_tools", `[`+ns("collaboration", `[`+fn+`,{"type":"code_interpreter"}]`)+`]`), []string{`"code_interpreter" in namespace "collaboration"`}},
		{"loaded by a tool search", item("tool_search_output", `[{"type":"file_search","vector_store_ids":["vs_abc"]}]`), []string{`"file_search" in an object of type "tool_search_output"`}},
		{"type in another case", item("Additional_Tools", `[{"type":"web_search"}]`), []string{`"web_search"`}},
		{"type given twice", `{"input":[{"type":"message","type":"additional_tools","tools":[{"type":"web_search"}]}]}`, []string{`"web_search"`}},
		{"tools given twice", `{"input":[{"type":"additional_tools","tools":[{"type":"web_search"}],"tools":[]}]}`, []string{`gives "tools" twice`}},
		{"tools not an array", item("additional_tools", `{"type":"web_search"}`), []string{"not an array"}},
		{"deep in another field", `{"metadata":{"a":[{"type":"additional_tools","tools":[{"type":"image_generation"}]}]}}`, []string{`"image_generation"`}},
		{"a malformed namespace", item("additional_tools", `[{"type":"namespace","name":"g","tools":"web_search"}]`), []string{"not an array"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			postRefused(t, "/responses", tc.body, http.StatusForbidden, tc.want...)
		})
	}
	for _, tc := range []struct{ name, body string }{
		{"client tools", item("additional_tools", `[`+ns("functions", `[{"type":"custom","name":"exec","format":{"type":"text"}},`+fn+`]`)+`,`+fn+`]`)},
		{"loaded by a tool search", item("tool_search_output", `[`+fn+`]`)},
		{"tools null", item("additional_tools", `null`)},
		{"a tools field of other data", `{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"x"}],"tools":["web_search"]}]}`},
	} {
		t.Run("offered: "+tc.name, func(t *testing.T) {
			t.Parallel()
			postRelayed(t, "/responses", tc.body)
		})
	}
}

// TestClientToolSearch checks that a tool search the agent runs itself
// (Codex declares one, execution "client") passes, and that the hosted one,
// which the provider runs, does not.
func TestClientToolSearch(t *testing.T) {
	search := func(members string) string {
		return `{"model":"m","input":"hi","tools":[` + fn + `,{"type":"tool_search"` + members + `}]}`
	}
	const params = `,"description":"d","parameters":{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`
	for _, tc := range []struct{ name, body string }{
		{"hosted", search(``)},
		{"hosted by name", search(`,"execution":"server"`)},
		{"execution in upper case", search(`,"execution":"CLIENT"` + params)},
		{"execution twice, the last hosted", search(`,"execution":"client","Execution":"server"`)},
		{"execution not a string", search(`,"execution":["client"]`)},
		{"execution null", search(`,"execution":null`)},
		{"execution escaped", search(`,"execution":"clien\u0074x"`)},
		{"in a namespace", `{"tools":[` + ns("g", `[{"type":"tool_search","execution":"server"}]`) + `]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			postRefused(t, "/responses", tc.body, http.StatusForbidden, `server-side tool "tool_search"`)
		})
	}
	for _, tc := range []struct{ name, body string }{
		{"run by the agent", search(`,"execution":"client"` + params)},
		{"escaped", search(`,"execution":"clien\u0074"` + params)},
		{"in a namespace", `{"tools":[` + ns("g", `[{"type":"tool_search","execution":"client"}]`) + `]}`},
	} {
		t.Run("offered: "+tc.name, func(t *testing.T) {
			t.Parallel()
			postRelayed(t, "/responses", tc.body)
		})
	}
}

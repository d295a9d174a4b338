package gateway

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// upstreams are the ways an upstream's path can be given: the agent's
// requests carry the same API path, under base.
var upstreams = []struct {
	name, path, base string
}{
	{"upstream with /v1", "/v1", "/v1"},
	{"upstream at the root", "", "/v1"},
	{"azure deployment", "/openai/deployments/d", "/openai/deployments/d"},
}

// refusedCall checks that a call was answered status and recorded exactly
// once with that status and an Error holding want, and that the upstream saw
// nothing.
func refusedCall(t *testing.T, hs *harness, up *spy, resp *http.Response, status int, want string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status %d, want %d", resp.StatusCode, status)
	}
	if n := up.hits.Load(); n != 0 {
		t.Errorf("refused, yet relayed: the upstream saw %+v", up.last(t))
	}
	c := hs.rec.wait(t, 1)[0]
	if c.Status != status || !strings.Contains(c.Error, want) {
		t.Errorf("recorded status %d, error %q; want %d, an error holding %q", c.Status, c.Error, status, want)
	}
}

// TestEndpointsRefused asks for what the shared key could reach beyond the
// model: stored completions, responses, files, batches, vector stores,
// Assistants threads, and odd methods. None may reach the upstream.
func TestEndpointsRefused(t *testing.T) {
	for _, u := range upstreams {
		t.Run(u.name, func(t *testing.T) {
			for _, tc := range []struct{ method, path string }{
				{"GET", "/chat/completions"}, // lists stored completions
				{"GET", "/chat/completions/chatcmpl-abc"},
				{"GET", "/chat/completions/chatcmpl-abc/messages"},
				{"POST", "/chat/completions/chatcmpl-abc"},
				{"DELETE", "/chat/completions/chatcmpl-abc"},
				{"GET", "/responses/resp_abc"},
				{"GET", "/responses/resp_abc/input_items"},
				{"POST", "/responses/resp_abc"},
				{"POST", "/responses/resp_abc/cancel"},
				{"DELETE", "/responses/resp_abc"},
				{"GET", "/files"},
				{"GET", "/files/file-abc/content"},
				{"POST", "/files"},
				{"GET", "/batches"},
				{"POST", "/batches"},
				{"GET", "/vector_stores"},
				{"POST", "/vector_stores/vs_abc/search"},
				{"GET", "/messages/batches"},
				{"POST", "/messages/batches"},
				{"GET", "/messages/batches/msgbatch_abc/results"},
				{"POST", "/threads/thread_abc/messages"}, // Assistants, not Anthropic's /messages
				{"GET", "/files/models"},                 // ends like /models, under a stored collection
				{"GET", "/files%2Ffile-abc%2Fcontent/models"},
				{"GET", "/models/a%2Fb"},
				{"GET", "/models/a/b"},
				{"GET", "/models/"},
				{"POST", "/models"},
				{"DELETE", "/models/ft:gpt-4o:org::abc"},
				{"HEAD", "/models"},
				{"OPTIONS", "/chat/completions"},
				{"PUT", "/chat/completions"},
				{"PATCH", "/messages"},
				{"POST", "/chat/completions/"},
				{"POST", "/embeddings/x"},
				{"POST", "/messages/count_tokens/x"},
				{"POST", "/audio/speech"},
				{"POST", "/images/generations"},
				{"POST", ""},
				{"GET", ""},
			} {
				t.Run(tc.method+" "+tc.path, func(t *testing.T) {
					t.Parallel()
					up := &spy{}
					hs := newHarness(t, config{path: u.path}, up.ServeHTTP)
					path := u.base + tc.path
					resp, _ := hs.do(t, tc.method, path, []byte(`{"model":"m"}`), nil)
					refusedCall(t, hs, up, resp, http.StatusForbidden, "endpoint not offered by the gateway: "+tc.method+" "+path)
				})
			}
		})
	}
}

// TestEndpointsOffered checks the endpoints an agent needs still work,
// whichever way the upstream's path is given.
func TestEndpointsOffered(t *testing.T) {
	for _, u := range upstreams {
		t.Run(u.name, func(t *testing.T) {
			for _, tc := range []struct{ method, path string }{
				{"POST", "/chat/completions"},
				{"POST", "/completions"},
				{"POST", "/responses"},
				{"POST", "/messages?beta=true"},
				{"POST", "/messages/count_tokens"},
				{"POST", "/embeddings"},
				{"GET", "/models"},
				{"GET", "/models?limit=20"},
				{"GET", "/models/claude-sonnet-4-5"},
				{"GET", "/models/ft:gpt-4o:org::abc"},
			} {
				t.Run(tc.method+" "+tc.path, func(t *testing.T) {
					t.Parallel()
					up := &spy{}
					hs := newHarness(t, config{path: u.path}, up.ServeHTTP)
					path := u.base + tc.path
					resp, _ := hs.do(t, tc.method, path, []byte(`{"model":"m"}`), nil)
					if resp.StatusCode != 200 {
						t.Errorf("status %d", resp.StatusCode)
					}
					if c := hs.rec.wait(t, 1)[0]; c.Status != 200 || c.Error != "" {
						t.Errorf("recorded %+v", c)
					}
					if got := up.last(t); got.Method != tc.method || got.URI != path {
						t.Errorf("the upstream saw %s %s, want %s %s", got.Method, got.URI, tc.method, path)
					}
				})
			}
		})
	}
}

// TestServerSideToolsRefused asks the provider to fetch, search, run code or
// reach MCP servers for the agent, plainly and through parser tricks. None may
// reach the upstream.
func TestServerSideToolsRefused(t *testing.T) {
	gz := func(s string) []byte {
		var b bytes.Buffer
		w := gzip.NewWriter(&b)
		io.WriteString(w, s)
		w.Close()
		return b.Bytes()
	}
	utf16le := func(s string) []byte {
		var b []byte
		for _, r := range utf16.Encode([]rune(s)) {
			b = append(b, byte(r), byte(r>>8))
		}
		return b
	}
	tool := func(typ string) string { return `{"model":"m","input":"hi","tools":[{"type":"` + typ + `"}]}` }
	for _, tc := range []struct {
		name, path string
		body       []byte
		header     http.Header
		status     int
		want       string // in the recorded Error
	}{
		{"openai web search", "/responses", []byte(tool("web_search_preview")), nil, 403, `server-side tool "web_search_preview" not offered`},
		{"openai web search GA", "/responses", []byte(tool("web_search")), nil, 403, `"web_search"`},
		{"openai mcp", "/responses", []byte(`{"tools":[{"type":"mcp","server_label":"x","server_url":"https://evil.test/mcp"}]}`), nil, 403, `"mcp"`},
		{"openai code interpreter", "/responses", []byte(`{"tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`), nil, 403, `"code_interpreter"`},
		{"openai file search", "/responses", []byte(tool("file_search")), nil, 403, `"file_search"`},
		{"openai image generation", "/responses", []byte(tool("image_generation")), nil, 403, `"image_generation"`},
		{"openai hosted shell", "/responses", []byte(`{"tools":[{"type":"shell","environment":{"type":"container_auto"}}]}`), nil, 403, `"shell"`},
		{"openai tool search", "/responses", []byte(tool("tool_search")), nil, 403, `"tool_search"`},
		{"chat web search options", "/chat/completions", []byte(`{"model":"gpt-4o-search-preview","web_search_options":{}}`), nil, 403, `field "web_search_options"`},
		{"anthropic web search", "/messages", []byte(`{"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]}`), nil, 403, `"web_search_20250305"`},
		{"anthropic web fetch", "/messages", []byte(tool("web_fetch_20250910")), nil, 403, `"web_fetch_20250910"`},
		{"anthropic code execution", "/messages", []byte(tool("code_execution_20250825")), nil, 403, `"code_execution_20250825"`},
		{"anthropic memory", "/messages", []byte(tool("memory_20250818")), nil, 403, `"memory_20250818"`},
		{"anthropic tool search", "/messages", []byte(tool("tool_search_tool_regex_20251119")), nil, 403, `"tool_search_tool_regex_20251119"`},
		{"anthropic mcp toolset", "/messages", []byte(tool("mcp_toolset")), nil, 403, `"mcp_toolset"`},
		{"a server tool among client ones", "/messages", []byte(`{"tools":[{"name":"f","input_schema":{}},{"type":"bash_20250124","name":"bash"},{"type":"web_fetch_20250910","name":"web_fetch"}]}`), nil, 403, `"web_fetch_20250910"`},
		{"count tokens too", "/messages/count_tokens", []byte(tool("web_search_20250305")), nil, 403, `"web_search_20250305"`},
		{"mcp servers", "/messages", []byte(`{"mcp_servers":[{"type":"url","url":"https://evil.test/sse","name":"x"}]}`), nil, 403, `field "mcp_servers"`},
		{"mcp servers empty", "/messages", []byte(`{"mcp_servers":[]}`), nil, 403, `field "mcp_servers"`},
		{"mcp servers null", "/messages", []byte(`{"mcp_servers":null}`), nil, 403, `field "mcp_servers"`},
		{"container", "/messages", []byte(`{"container":"container_abc"}`), nil, 403, `field "container"`},
		{"container with skills", "/messages", []byte(`{"container":{"skills":[{"type":"anthropic","skill_id":"pptx"}]}}`), nil, 403, `field "container"`},
		{"stored conversation", "/responses", []byte(`{"model":"m","input":"hi","conversation":"conv_abc"}`), nil, 403, `field "conversation"`},
		{"stored conversation by object", "/responses", []byte(`{"conversation":{"id":"conv_abc"}}`), nil, 403, `field "conversation"`},
		{"stored conversation in upper case", "/responses", []byte(`{"CONVERSATION":"conv_abc"}`), nil, 403, `field "conversation"`},
		{"stored prompt", "/responses", []byte(`{"model":"m","prompt":{"id":"pmpt_abc","version":"2","variables":{"x":"y"}}}`), nil, 403, `field "prompt"`},
		{"stored prompt without id", "/responses", []byte(`{"prompt":{}}`), nil, 403, `field "prompt"`},
		{"prompt twice, the last stored", "/completions", []byte(`{"prompt":"hi","Prompt":{"id":"pmpt_abc"}}`), nil, 403, `gives "prompt" twice`},
		{"type not a date", "/messages", []byte(tool("bash_2025012x")), nil, 403, `"bash_2025012x"`},
		{"type without a date", "/messages", []byte(tool("bash")), nil, 403, `"bash"`},
		{"type in upper case", "/chat/completions", []byte(tool("FUNCTION")), nil, 403, `"FUNCTION"`},
		{"field in upper case", "/messages", []byte(`{"TOOLS":[{"type":"web_search_20250305"}]}`), nil, 403, `"web_search_20250305"`},
		{"mcp servers in mixed case", "/messages", []byte(`{"Mcp_Servers":[]}`), nil, 403, `field "mcp_servers"`},
		{"field escaped", "/responses", []byte(`{"t\u006fols":[{"type":"web\u005fsearch"}]}`), nil, 403, `"web_search"`},
		{"tools twice, the last empty", "/responses", []byte(`{"tools":[{"type":"web_search"}],"tools":[]}`), nil, 403, `gives "tools" twice`},
		{"tools twice, in two cases", "/responses", []byte(`{"tools":[{"type":"web_search"}],"Tools":null}`), nil, 403, `gives "tools" twice`},
		{"type twice", "/responses", []byte(`{"tools":[{"type":"web_search","type":"function"}]}`), nil, 403, `gives "type" twice`},
		{"tools not an array", "/responses", []byte(`{"tools":{"type":"web_search"}}`), nil, 403, `"tools" is not an array`},
		{"tool not an object", "/responses", []byte(`{"tools":["web_search"]}`), nil, 403, "not a JSON object"},
		{"type not a string", "/responses", []byte(`{"tools":[{"type":["web_search"]}]}`), nil, 403, `"type" is not a string`},
		{"type null", "/responses", []byte(`{"tools":[{"type":null,"name":"web_search"}]}`), nil, 403, `"type" is not a string`},
		{"typeless, not an Anthropic custom tool", "/chat/completions", []byte(`{"tools":[{"google_search":{}}]}`), nil, 403, `neither "type" nor "input_schema"`},
		{"past the model parser's cap", "/responses", jsonPadded(maxParse+1<<20, `"tools":[{"type":"web_search"}]`), nil, 403, `"web_search"`},
		{"NaN, which Python's json takes", "/responses", []byte(`{"temperature":NaN,"tools":[{"type":"web_search"}]}`), nil, 400, "not JSON"},
		{"trailing comma", "/responses", []byte(`{"tools":[{"type":"web_search"}],}`), nil, 400, "not JSON"},
		{"a second object", "/responses", []byte(`{} {"tools":[{"type":"web_search"}]}`), nil, 400, "not JSON"},
		{"utf-16", "/responses", utf16le(tool("web_search")), nil, 400, "not JSON"},
		{"invalid utf-8", "/responses", []byte("{\"tools\xff\":[{\"type\":\"web_search\"}]}"), nil, 400, "not JSON"},
		{"not an object", "/responses", []byte(`[{"tools":[{"type":"web_search"}]}]`), nil, 400, "not a JSON object"},
		{"nested too deep", "/responses", deepBody(maxDepth, `[]`), nil, 400, "nested more than 128 levels deep"},
		{"nested too deep, media inside", "/messages", deepBody(maxDepth, `{"type":"image","source":{"type":"url","url":"https://evil.test/fix.png"}}`), nil, 400, "nested more than 128 levels deep"},
		{"empty", "/responses", nil, nil, 400, "not JSON"},
		{"gzip", "/responses", gz(tool("web_search")), http.Header{"Content-Encoding": {"gzip"}}, 415, `content encoding "gzip"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := &spy{}
			hs := newHarness(t, config{path: "/v1"}, up.ServeHTTP)
			resp, body := hs.do(t, "POST", "/v1"+tc.path, tc.body, tc.header)
			refusedCall(t, hs, up, resp, tc.status, tc.want)
			if c := hs.rec.snapshot()[0]; c.RequestSHA256 != sha(tc.body) || c.ResponseSHA256 != sha(body) {
				t.Errorf("recorded digests %s, %s; want those of the bodies", c.RequestSHA256, c.ResponseSHA256)
			}
			var e struct{ Error struct{ Message string } }
			if json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error.Message, tc.want) || strings.Contains(e.Error.Message, "\n") {
				t.Errorf("the agent got %q, want a one-line message holding %q", body, tc.want)
			}
		})
	}
}

// deepBody is a JSON object holding v at depth n+1: within n-1 arrays, in
// the object.
func deepBody(n int, v string) []byte {
	return []byte(`{"a":` + strings.Repeat("[", n-1) + v + strings.Repeat("]", n-1) + `}`)
}

// jsonPadded is a JSON object of about n bytes: a long string, then fields.
func jsonPadded(n int, fields string) []byte {
	return []byte(`{"pad":"` + strings.Repeat("x", n) + `",` + fields + `}`)
}

// TestClientToolsOffered checks the tools the agent runs itself still pass.
func TestClientToolsOffered(t *testing.T) {
	for _, tc := range []struct{ name, path, body string }{
		{"chat function", "/chat/completions", `{"model":"m","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`},
		{"responses function", "/responses", `{"model":"m","tools":[{"type":"function","name":"f","parameters":{}}]}`},
		{"openai custom", "/responses", `{"tools":[{"type":"custom","name":"apply","format":{"type":"text"}}]}`},
		{"openai client tools", "/responses", `{"tools":[{"type":"local_shell"},{"type":"apply_patch"},{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"linux"}]}`},
		{"anthropic custom without type", "/messages", `{"model":"c","tools":[{"name":"get_weather","description":"d","input_schema":{"type":"object","properties":{"url":{"type":"string"}}}}]}`},
		{"anthropic custom typed", "/messages", `{"tools":[{"type":"custom","name":"f","input_schema":{}}]}`},
		{"bash", "/messages", `{"tools":[{"type":"bash_20250124","name":"bash"}]}`},
		{"anthropic client tools", "/messages", `{"tools":[{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"},{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768}]}`},
		{"no tools", "/messages", `{"model":"c","messages":[{"role":"user","content":"use the tools: [{\"type\":\"web_search\"}]"}]}`},
		{"tools empty", "/responses", `{"tools":[]}`},
		{"tools null", "/responses", `{"tools":null}`},
		{"nested fields of those names", "/messages", `{"metadata":{"tools":[{"type":"web_search"}],"container":"x","mcp_servers":[]}}`},
		{"tool choice", "/chat/completions", `{"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`},
		{"spaces everywhere", "/responses", " \n{ \"tools\" : [ { \"type\" : \"function\" } , { \"type\":\"local_shell\" } ] , \"x\" : 1 } \n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := &spy{}
			hs := newHarness(t, config{path: "/v1"}, up.ServeHTTP)
			resp, _ := hs.do(t, "POST", "/v1"+tc.path, []byte(tc.body), http.Header{"Content-Encoding": {"identity"}})
			if resp.StatusCode != 200 {
				t.Errorf("status %d", resp.StatusCode)
			}
			if c := hs.rec.wait(t, 1)[0]; c.Error != "" {
				t.Errorf("recorded %+v", c)
			}
			if got := up.last(t); string(got.Body) != tc.body {
				t.Errorf("the upstream got %q, want it as sent", got.Body)
			}
		})
	}
}

// TestAccountHeadersDropped tries to switch the key to another organisation
// or project: the upstream must get none of those headers.
func TestAccountHeadersDropped(t *testing.T) {
	up := &spy{}
	hs := newHarness(t, config{path: "/v1"}, up.ServeHTTP)
	b := raw(t, hs.addr, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n"+
		"OpenAI-Organization: org-other\r\nOpenAI-Project: proj_other\r\nopenai-organization: org-lower\r\n"+
		"OpenAI_Organization: org-underscore\r\nOPENAI-PROJECT: proj_upper\r\nOpenAI-Future-Account: x\r\n"+
		"OpenAI-Beta: responses=v1\r\nAnthropic-Version: 2023-06-01\r\nAnthropic-Beta: interleaved-thinking-2025-05-14\r\n\r\n{}")
	if resp, _ := parse(t, b); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := up.last(t)
	for name, values := range got.Header {
		n := strings.ToLower(name)
		if strings.Contains(n, "organization") || strings.Contains(n, "project") || strings.Contains(n, "future") {
			t.Errorf("the upstream got %s: %q", name, values)
		}
	}
	for _, name := range []string{"OpenAI-Beta", "Anthropic-Version", "Anthropic-Beta"} {
		if got.Header.Get(name) == "" {
			t.Errorf("%s was dropped", name)
		}
	}
	hs.rec.wait(t, 1)
}

// FuzzMembers checks the walk of a JSON object against encoding/json: the
// same keys, in order, with the same raw values, and the same elements in
// each array, at every depth.
func FuzzMembers(f *testing.F) {
	seeds := []string{
		`{}`, ` { "a" : 1 , "b":[1,{"c":"]}"}],"d":"\"}","e":null,"f":true,"g":-1.5e3 } `,
		`{"t\u006fols":[{"type":"x"},[],"s\\"]}`, `{"a":{"b":{"c":[[[]]]}},"":""}`,
		`{"tools":[{"type":"function","type":"web_search"}],"TOOLS":[]}`,
		`{"a":[ 1 , "x" ,{"b":[]},[ ] ,null,-0.5E+2,true ]}`,
		`{"a":"\\\\\"\\","b":["\\",{"\\\"":"\"\\"}]}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		b = bytes.TrimSpace(b)
		if !utf8.Valid(b) || !json.Valid(b) || b[0] != '{' {
			return // checkBody refuses these before walking them
		}
		sameAsJSON(t, b)
	})
}

// sameAsJSON checks members or elements on the JSON value v, and then on
// every value in it, against encoding/json.
func sameAsJSON(t *testing.T, v []byte) {
	t.Helper()
	switch v[0] {
	case '{':
		type member struct{ key, val string }
		var want []member
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.Token()
		for dec.More() {
			k, _ := dec.Token()
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				t.Fatal(err)
			}
			want = append(want, member{k.(string), string(raw)})
		}
		var got []member
		for k, val := range members(v) {
			got = append(got, member{k, string(val)})
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, want %d: %q", v, len(got), len(want), got)
		}
		for i, w := range want {
			if got[i].key == "" && len(w.key) > (maxKeyLen-2)/6 {
				w.key = "" // too long to be a checked field: not decoded
			}
			if got[i] != w {
				t.Fatalf("%q: member %d: %q, want %q", v, i, got[i], w)
			}
			sameAsJSON(t, []byte(w.val))
		}
	case '[':
		var want []json.RawMessage
		if err := json.Unmarshal(v, &want); err != nil {
			t.Fatal(err)
		}
		j := 0
		for e := range elements(v) {
			if j >= len(want) || string(e) != string(want[j]) {
				t.Fatalf("%q: element %d: %q, want %q", v, j, e, want)
			}
			sameAsJSON(t, e)
			j++
		}
		if j != len(want) {
			t.Fatalf("%q: %d elements, want %d", v, j, len(want))
		}
	}
}

package gateway

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The requests real agent CLIs make, as testdata/clients/*.json keeps them:
// each file says which CLI sent it and how it was run, and holds the body
// with every tool declaration as sent (long texts elsewhere shortened).

// clientVector is one file of testdata/clients.
type clientVector struct {
	Client string          `json:"client"`
	How    string          `json:"how"`
	Method string          `json:"method"`
	Target string          `json:"target"`
	Body   json.RawMessage `json:"body"`
}

// clientVerdicts is what the gateway must do with each vector: relay it
// (status 0), or refuse it with status and a reason holding want. A
// refused one is refused for the tool types in drop alone: without them it
// is relayed.
var clientVerdicts = map[string]struct {
	status int
	want   string
	drop   []string
}{
	// Codex's default tools for a model outside its catalog: function
	// tools, the multi_agent_v1 namespace, and web_search.
	"codex-0.169.0-responses.json": {403, `server-side tool "web_search" not offered by the gateway`, []string{"web_search"}},
	// The same with the recipe's flags: no web_search, no namespace.
	"codex-0.169.0-responses-recipe.json": {},
	// gpt-5.5: tool_search run by Codex, and web_search.
	"codex-0.169.0-responses-gpt-5.5.json":        {403, `server-side tool "web_search" not offered by the gateway`, []string{"web_search"}},
	"codex-0.169.0-responses-gpt-5.5-recipe.json": {},
	// The default model: every tool in an additional_tools input item, in
	// three namespaces.
	"codex-0.169.0-responses-lite.json": {},
	// Claude Code declares custom tools only.
	"claude-code-2.1.328-messages.json": {},
	// What its WebSearch tool sends when the model calls it.
	"claude-code-2.1.328-web-search.json": {403, `server-side tool "web_search_20250305" not offered by the gateway`, []string{"web_search_20250305"}},
}

// readClientVector reads testdata/clients/name.
func readClientVector(t *testing.T, name string) clientVector {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "clients", name))
	if err != nil {
		t.Fatal(err)
	}
	var v clientVector
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if v.Client == "" || v.How == "" || v.Method != "POST" || v.Target == "" || len(v.Body) == 0 || v.Body[0] != '{' {
		t.Fatalf("%s: not a request vector (client, how, method POST, target and an object body)", name)
	}
	return v
}

// clientHarness is a gateway for the provider v was sent to.
func clientHarness(t *testing.T, v clientVector, up *spy) *harness {
	t.Helper()
	if strings.HasPrefix(v.Target, "/v1/messages") {
		return newHarness(t, config{name: "anthropic"}, up.ServeHTTP)
	}
	return newHarness(t, config{path: "/v1"}, up.ServeHTTP)
}

// TestClientVectors sends each real request through a gateway: those the
// agent recipes' flags give are relayed as sent; the defaults that declare
// a server-side tool are refused for that tool, and for nothing else.
func TestClientVectors(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "clients", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	for name := range clientVerdicts {
		if !slices.Contains(names, name) {
			t.Errorf("testdata/clients/%s is missing", name)
		}
	}
	for _, name := range names {
		verdict, ok := clientVerdicts[name]
		if !ok {
			t.Errorf("testdata/clients/%s has no verdict in clientVerdicts", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v := readClientVector(t, name)
			up := &spy{}
			hs := clientHarness(t, v, up)
			resp, body := hs.do(t, v.Method, v.Target, v.Body, http.Header{"Content-Type": {"application/json"}})
			if verdict.status == 0 {
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				if got := up.last(t); string(got.Body) != string(v.Body) {
					t.Errorf("the upstream got another body than the client sent")
				}
				hs.rec.wait(t, 1)
				return
			}
			refusedCall(t, hs, up, resp, verdict.status, verdict.want)
			if strings.Contains(string(body), "namespace") {
				t.Errorf("refused for a namespace: %s", body)
			}

			// Without the tool refused, the rest passes.
			up2 := &spy{}
			hs2 := clientHarness(t, v, up2)
			rest := editBody(t, v.Body, func(b map[string]any) {
				tools, _ := b["tools"].([]any)
				b["tools"] = slices.DeleteFunc(tools, func(tool any) bool {
					typ, _ := tool.(map[string]any)["type"].(string)
					return slices.Contains(verdict.drop, typ)
				})
			})
			if resp, body := hs2.do(t, v.Method, v.Target, rest, nil); resp.StatusCode != 200 {
				t.Errorf("without %v: status %d: %s", verdict.drop, resp.StatusCode, body)
			}
			hs2.rec.wait(t, 1)
		})
	}
}

// TestClientVectorsSmuggled puts server-side tools into the groups real
// requests declare tools in: Codex's multi_agent_v1 namespace, and the
// namespaces of its additional_tools item. None may reach the upstream.
func TestClientVectorsSmuggled(t *testing.T) {
	smuggled := []string{
		`{"type":"web_search","external_web_access":true}`,
		`{"type":"file_search","vector_store_ids":["vs_abc"]}`,
		`{"type":"computer_use"}`,
		`{"type":"code_interpreter","container":{"type":"auto"}}`,
		`{"type":"mcp","server_label":"x","server_url":"https://evil.test/mcp"}`,
		`{"type":"image_generation"}`,
		`{"type":"tool_search"}`,
	}
	for _, tc := range []struct {
		file, namespace string
		group           func(b map[string]any) []any // the tools the namespaces are in
	}{
		{"codex-0.169.0-responses.json", "multi_agent_v1", func(b map[string]any) []any { return b["tools"].([]any) }},
		{"codex-0.169.0-responses-lite.json", "collaboration", func(b map[string]any) []any {
			for _, item := range b["input"].([]any) {
				if item := item.(map[string]any); item["type"] == "additional_tools" {
					return item["tools"].([]any)
				}
			}
			return nil
		}},
	} {
		for _, s := range smuggled {
			var tool map[string]any
			if err := json.Unmarshal([]byte(s), &tool); err != nil {
				t.Fatal(err)
			}
			typ := tool["type"].(string)
			t.Run(tc.file+"/"+typ, func(t *testing.T) {
				t.Parallel()
				v := readClientVector(t, tc.file)
				found := false
				body := editBody(t, v.Body, func(b map[string]any) {
					for _, g := range tc.group(b) {
						if g := g.(map[string]any); g["type"] == "namespace" && g["name"] == tc.namespace {
							g["tools"] = append(g["tools"].([]any), tool)
							found = true
						}
					}
				})
				if !found {
					t.Fatalf("%s declares no namespace %q", tc.file, tc.namespace)
				}
				up := &spy{}
				hs := clientHarness(t, v, up)
				resp, _ := hs.do(t, v.Method, v.Target, body, nil)
				refusedCall(t, hs, up, resp, http.StatusForbidden, `server-side tool "`+typ+`" in namespace "`+tc.namespace+`"`)
			})
		}
	}
}

// editBody decodes the JSON object body, lets edit change it, and encodes
// it again.
func editBody(t *testing.T, body []byte, edit func(map[string]any)) []byte {
	t.Helper()
	var b map[string]any
	if err := json.Unmarshal(body, &b); err != nil {
		t.Fatal(err)
	}
	edit(b)
	out, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

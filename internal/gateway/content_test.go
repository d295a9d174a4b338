package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// fetchingParts are content parts that make a provider fetch a URL or read
// a stored file, plainly and through parser tricks. want is in the reason.
var fetchingParts = []struct {
	name, part, want string
	partOnly         bool // refused only as an element of a "content" array
}{
	{name: "chat image url", part: `{"type":"image_url","image_url":{"url":"https://evil.test/fix.png","detail":"high"}}`, want: "from a URL is not offered by the gateway: image_url.url"},
	{name: "chat image url as a string", part: `{"type":"image_url","image_url":"https://evil.test/fix.png"}`, want: "from a URL is not offered by the gateway: image_url"},
	{name: "chat file url", part: `{"type":"file","file":{"file_url":"https://evil.test/fix.pdf"}}`, want: "from a URL is not offered by the gateway: file.file_url"},
	{name: "chat file id", part: `{"type":"file","file":{"file_id":"file-abc"}}`, want: "files stored under the key are not offered by the gateway: file.file_id"},
	{name: "chat file data as a url", part: `{"type":"file","file":{"filename":"fix.pdf","file_data":"https://evil.test/fix.pdf"}}`, want: "from a URL is not offered by the gateway: file.file_data"},
	{name: "responses image url", part: `{"type":"input_image","image_url":"https://evil.test/fix.png","detail":"auto"}`, want: ": image_url"},
	{name: "responses image file id", part: `{"type":"input_image","file_id":"file-abc"}`, want: "files stored under the key are not offered by the gateway: file_id"},
	{name: "responses file url", part: `{"type":"input_file","file_url":"https://evil.test/fix.pdf"}`, want: ": file_url"},
	{name: "responses file id", part: `{"type":"input_file","file_id":"file-abc"}`, want: "stored under the key are not offered by the gateway: file_id"},
	{name: "responses file data as a url", part: `{"type":"input_file","filename":"fix.pdf","file_data":"http://evil.test/fix.pdf"}`, want: ": file_data"},
	{name: "anthropic image url", part: `{"type":"image","source":{"type":"url","url":"https://evil.test/fix.png"}}`, want: "from a URL is not offered by the gateway: source.url"},
	{name: "anthropic document url", part: `{"type":"document","source":{"type":"url","url":"https://evil.test/fix.pdf"},"citations":{"enabled":true}}`, want: ": source.url"},
	{name: "anthropic document file", part: `{"type":"document","source":{"type":"file","file_id":"file_011abc"}}`, want: "stored under the key are not offered by the gateway: file_id"},
	{name: "anthropic image file", part: `{"type":"image","source":{"type":"file","file_id":"file_011abc"}}`, want: ": file_id"},
	{name: "anthropic image url in a document's content", part: `{"type":"document","source":{"type":"content","content":[{"type":"text","text":"x"},{"type":"image","source":{"type":"url","url":"https://evil.test/fix.png"}}]}}`, want: ": source.url"},
	{name: "anthropic container upload", part: `{"type":"container_upload","file_id":"file_011abc"}`, want: `content of type "container_upload" not offered by the gateway`},
	{name: "vllm audio url", part: `{"type":"audio_url","audio_url":{"url":"https://evil.test/fix.mp3"}}`, want: ": audio_url.url"},
	{name: "vllm video url", part: `{"type":"video_url","video_url":"https://evil.test/fix.mp4"}`, want: ": video_url"},
	{name: "mistral document url", part: `{"type":"document_url","document_url":"https://evil.test/fix.pdf"}`, want: ": document_url"},
	{name: "vllm part without type", part: `{"image_url":"https://evil.test/fix.png"}`, want: ": image_url", partOnly: true},
	{name: "vllm part with a uuid", part: `{"type":"text","text":"x","uuid":"u1","video_url":{"url":"https://evil.test/fix.mp4"}}`, want: ": video_url.url", partOnly: true},
	{name: "type in upper case", part: `{"type":"IMAGE_URL","image_url":{"url":"https://evil.test/fix.png"}}`, want: ": image_url.url"},
	{name: "names in mixed case", part: `{"Type":"input_image","Image_URL":"https://evil.test/fix.png"}`, want: ": image_url"},
	{name: "names escaped", part: `{"typ\u0065":"input\u005fimage","image\u005furl":"https://evil.test/fix.png"}`, want: ": image_url"},
	{name: "type twice, the fetching one last", part: `{"type":"text","text":"x","type":"input_image","image_url":"https://evil.test/fix.png"}`, want: ": image_url"},
	{name: "type twice, the fetching one first", part: `{"type":"input_image","image_url":"https://evil.test/fix.png","type":"text","text":"x"}`, want: ": image_url"},
	{name: "member twice, inline first", part: `{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo=","image_url":"https://evil.test/fix.png"}`, want: ": image_url"},
	{name: "url twice, inline first", part: `{"type":"image_url","image_url":{"url":"data:,x","URL":"https://evil.test/fix.png"}}`, want: ": image_url.url"},
	{name: "url holding data: later", part: `{"type":"input_image","image_url":"https://evil.test/fix.png?data:"}`, want: ": image_url"},
	{name: "url escaped, not data", part: `{"type":"input_image","image_url":"d\u0061ta;https://evil.test/fix.png"}`, want: ": image_url"},
	{name: "url not a string", part: `{"type":"image_url","image_url":{"url":["https://evil.test/fix.png"]}}`, want: ": image_url.url"},
	{name: "url in an object in the url", part: `{"type":"image_url","image_url":{"url":{"url":"https://evil.test/fix.png"}}}`, want: ": image_url.url"},
	{name: "file id not a string", part: `{"type":"input_file","file_id":7}`, want: ": file_id"},
	{name: "file id a data url", part: `{"type":"input_file","file_id":"data:,x"}`, want: ": file_id"},
	{name: "file id in an object", part: `{"type":"input_file","file_id":{"id":"file-abc"}}`, want: ": file_id"},
	{name: "file data with an escaped colon", part: `{"type":"input_file","file_data":"https\u003A//evil.test/fix.pdf"}`, want: ": file_data"},
}

// places put a content part where agents send parts, at any depth. content
// says the part is then an element of a "content" array.
var places = []struct {
	name, path string
	content    bool
	body       func(part string) string
}{
	{"chat message", "/chat/completions", true, func(p string) string {
		return `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"read this"},` + p + `]}]}`
	}},
	{"chat tool result", "/chat/completions", true, func(p string) string {
		return `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":[` + p + `]}]}`
	}},
	{"responses input", "/responses", true, func(p string) string {
		return `{"model":"m","input":[{"role":"user","content":[` + p + `]}]}`
	}},
	{"responses function output", "/responses", false, func(p string) string {
		return `{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[` + p + `]}]}`
	}},
	{"anthropic message", "/messages", true, func(p string) string {
		return `{"model":"c","max_tokens":9,"messages":[{"role":"user","content":[` + p + `]}]}`
	}},
	{"anthropic tool result", "/messages/count_tokens", true, func(p string) string {
		return `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[` + p + `]}]}]}`
	}},
	{"anthropic system", "/messages", false, func(p string) string {
		return `{"system":[` + p + `],"messages":[]}`
	}},
	{"the body itself", "/responses", false, func(p string) string { return p }},
	{"as deep as allowed", "/responses", false, func(p string) string { return string(deepBody(maxDepth-jsonDepth([]byte(p)), p)) }},
}

// TestFetchedContentRefused puts content the provider would fetch from a URL
// or read from storage everywhere a body may hold it. None may reach the
// upstream.
func TestFetchedContentRefused(t *testing.T) {
	for _, pl := range places {
		t.Run(pl.name, func(t *testing.T) {
			for _, tc := range fetchingParts {
				if tc.partOnly && !pl.content {
					continue
				}
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					body := []byte(pl.body(tc.part))
					up := &spy{}
					hs := newHarness(t, config{path: "/v1"}, up.ServeHTTP)
					resp, got := hs.do(t, "POST", "/v1"+pl.path, body, nil)
					refusedCall(t, hs, up, resp, http.StatusForbidden, tc.want)
					var e struct{ Error struct{ Message string } }
					if json.Unmarshal(got, &e) != nil || !strings.Contains(e.Error.Message, tc.want) || strings.Contains(e.Error.Message, "\n") {
						t.Errorf("the agent got %q, want a one-line message holding %q", got, tc.want)
					}
				})
			}
		})
	}
}

// inlineBodies carry media inline, or name what the agent made itself: all
// pass as they are.
var inlineBodies = []struct{ name, path, body string }{
	{"chat image data url", "/chat/completions", `{"messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo=","detail":"low"}}]}]}`},
	{"data url in upper case", "/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"DATA:image/png;base64,iVBORw0KGgo="}}]}]}`},
	{"data url escaped", "/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"\u0064ata:image\/png;base64,iVBORw0KGgo="}}]}]}`},
	{"chat file data", "/chat/completions", `{"messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjQ="}}]}]}`},
	{"chat file data in base64", "/chat/completions", `{"messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf","file_data":"JVBERi0xLjQ\/+=="}}]}]}`},
	{"chat audio", "/chat/completions", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}}]}]}`},
	{"responses image data url", "/responses", `{"input":[{"role":"user","content":[{"type":"input_text","text":"see"},{"type":"input_image","image_url":"data:image/jpeg;base64,/9j/4AAQ","detail":"auto","file_id":null}]}]}`},
	{"responses file data", "/responses", `{"input":[{"role":"user","content":[{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjQ="}]}]}`},
	{"responses image in a function output", "/responses", `{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"data:image/png;base64,iVBORw0KGgo="}]}]}`},
	{"anthropic image base64", "/messages", `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"text","text":"see"}]}]}`},
	{"anthropic document text and content", "/messages", `{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}},{"type":"document","source":{"type":"content","content":[{"type":"text","text":"x"}]}}]}]}`},
	{"anthropic screenshot in a tool result", "/messages", `{"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}]}`},
	{"anthropic search result", "/messages", `{"messages":[{"role":"user","content":[{"type":"search_result","source":"https://example.com/page","title":"t","content":[{"type":"text","text":"x"}],"citations":{"enabled":true}}]}]}`},
	{"anthropic tool call with a url", "/messages", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"view","input":{"image_url":"https://example.com/a.png","source":"https://example.com"}}]}]}`},
	{"responses citation echoed", "/responses", `{"input":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"x","annotations":[{"type":"url_citation","url":"https://example.com","title":"t","start_index":0,"end_index":1}]}]}]}`},
	{"shapes as text", "/chat/completions", `{"messages":[{"role":"user","content":"{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://evil.test/fix.png\"}}"}]}`},
	{"tool schema naming the members", "/responses", `{"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"image_url":{"type":"string"},"file_id":{"type":"string"},"source":{"type":"string"}}}}]}`},
	{"previous response", "/responses", `{"model":"m","previous_response_id":"resp_abc","input":"next","store":true}`},
	{"item reference", "/responses", `{"input":[{"type":"item_reference","id":"msg_abc"},{"role":"user","content":"next"}]}`},
	{"completions prompt", "/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"Say this"}`},
	{"completions prompts", "/completions", `{"model":"m","prompt":["a","b"]}`},
	{"nested to the limit", "/responses", string(deepBody(maxDepth, `1`))},
	{"brackets in a string", "/responses", `{"a":"` + strings.Repeat("[", 2*maxDepth) + `"}`},
}

// TestInlineContentOffered checks that media given inline, and ids of what
// the agent made itself, still pass.
func TestInlineContentOffered(t *testing.T) {
	for _, tc := range inlineBodies {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up := &spy{}
			hs := newHarness(t, config{path: "/v1"}, up.ServeHTTP)
			resp, _ := hs.do(t, "POST", "/v1"+tc.path, []byte(tc.body), nil)
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

// refContent is scanContent done with members and elements: simpler, and
// slower (each value is read once for each object or array around it).
func refContent(v []byte, part bool) string {
	switch v[0] {
	case '[':
		for e := range elements(v) {
			if reason := refContent(e, part); reason != "" {
				return reason
			}
		}
		return ""
	case '{':
	default:
		return ""
	}
	var ms []member
	for key, val := range members(v) {
		if reason := refContent(val, val[0] == '[' && strings.EqualFold(key, "content")); reason != "" {
			return reason
		}
		ms = append(ms, member{key, val})
	}
	return contentReason(ms, part)
}

// jsonDepth is how deep objects and arrays nest in the JSON value b.
func jsonDepth(b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	depth, deepest := 0, 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return deepest
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			deepest = max(deepest, depth)
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// FuzzContent checks tooDeep against encoding/json, and scanContent against
// refContent (whose walk FuzzMembers checks): the same end and the same
// verdict, whatever the spacing.
func FuzzContent(f *testing.F) {
	for _, tc := range fetchingParts {
		f.Add([]byte(places[0].body(tc.part)))
	}
	for _, tc := range inlineBodies {
		f.Add([]byte(tc.body))
	}
	f.Add(deepBody(maxDepth, `[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		b = bytes.TrimSpace(b)
		if !utf8.Valid(b) || !json.Valid(b) || b[0] != '{' {
			return // checkBody refuses these before walking them
		}
		deep := jsonDepth(b) > maxDepth
		if tooDeep(b) != deep {
			t.Fatalf("tooDeep %v, want %v", !deep, deep)
		}
		if deep {
			return
		}
		end, reason := scanContent(b, 0, false)
		if reason == "" && end != len(b) {
			t.Errorf("scanContent ends at %d of %d", end, len(b))
		}
		if want := refContent(b, false); reason != want {
			t.Errorf("scanContent says %q, want %q", reason, want)
		}
		for _, respace := range []func(*bytes.Buffer, []byte) error{
			json.Compact,
			func(dst *bytes.Buffer, src []byte) error { return json.Indent(dst, src, " ", "\t") },
		} {
			var o bytes.Buffer
			if err := respace(&o, b); err != nil {
				t.Fatal(err)
			}
			if _, r := scanContent(o.Bytes(), 0, false); r != reason {
				t.Errorf("respaced, scanContent says %q, want %q", r, reason)
			}
		}
	})
}

package gateway

import (
	"bytes"
	"embed"
	"path"
	"strings"
	"testing"
)

//go:embed testdata/usage
var usageSeeds embed.FS

func seed(t testing.TB, name string) []byte {
	t.Helper()
	b, err := usageSeeds.ReadFile(path.Join("testdata/usage", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// meterAll feeds body to a fresh meter in pieces of size step (0: at once).
func meterAll(sse bool, body []byte, step int) (string, tokens) {
	m := newMeter(sse)
	if step <= 0 {
		step = len(body) + 1
	}
	for p := body; len(p) > 0; {
		n := min(step, len(p))
		m.Write(p[:n])
		p = p[n:]
	}
	return m.result()
}

func TestMeter(t *testing.T) {
	huge := `{"model":"big","usage":{"input_tokens":5},"pad":"` + strings.Repeat("x", maxParse) + `"}`
	longLine := "data: " + strings.Repeat("y", maxParse) + "\n\n"
	for _, tc := range []struct {
		name  string
		file  string // in testdata/usage, else body
		body  string
		sse   bool
		model string
		want  tokens
	}{
		{name: "openai chat", file: "openai-chat.json", model: "gpt-4o-2024-08-06",
			want: tokens{input: 1200, output: 35, cacheRead: 1024, total: 1235}},
		{name: "openai responses", file: "openai-responses.json", model: "gpt-4.1-2025-04-14",
			want: tokens{input: 328, output: 52, cacheRead: 128, total: 380}},
		{name: "openai embeddings", file: "openai-embeddings.json", model: "text-embedding-3-small",
			want: tokens{input: 8, total: 8}},
		{name: "anthropic messages", file: "anthropic-messages.json", model: "claude-sonnet-4-20250514",
			want: tokens{input: 12 + 2000 + 3000, output: 40, cacheRead: 3000, cacheWrite: 2000, total: 5052}},
		{name: "anthropic error", file: "anthropic-error.json"},
		{name: "openai chat stream", file: "openai-chat-stream.sse", sse: true, model: "gpt-4o-mini",
			want: tokens{input: 19, output: 10, total: 29}},
		{name: "openai chat stream without usage", file: "openai-chat-stream-nousage.sse", sse: true, model: "gpt-4o-mini"},
		{name: "openai responses stream", file: "openai-responses-stream.sse", sse: true, model: "o4-mini-2025-04-16",
			want: tokens{input: 36, output: 87, total: 123}},
		{name: "anthropic stream", file: "anthropic-stream.sse", sse: true, model: "claude-opus-4-1-20250805",
			want: tokens{input: 125, output: 15, cacheRead: 100, total: 140}},
		{name: "anthropic stream crlf", file: "anthropic-stream-crlf.sse", sse: true, model: "claude-opus-4-1-20250805",
			want: tokens{input: 125, output: 15, cacheRead: 100, total: 140}},
		{name: "not json", file: "not-json.txt"},
		{name: "not json as sse", file: "not-json.txt", sse: true},
		{name: "json read as sse", file: "openai-chat.json", sse: true},
		{name: "empty", body: ""},
		{name: "truncated", body: `{"model":"m","usage":{"prompt_tokens":3`},
		{name: "array", body: `[{"model":"m","usage":{"prompt_tokens":3}}]`},
		{name: "null usage", body: `{"model":"m","usage":null}`, model: "m"},
		{name: "wrong types skipped", body: `{"model":7,"usage":{"prompt_tokens":"3","completion_tokens":4.5,"total_tokens":9}}`,
			want: tokens{total: 9}},
		{name: "negative and huge ignored", body: `{"usage":{"prompt_tokens":-3,"completion_tokens":1e30,"input_tokens":-0,"prompt_tokens":12.0,"total_tokens":281474976710657,"output_tokens":2}}`,
			want: tokens{output: 2, total: 2}},
		{name: "json over the parse bound", body: huge},
		{name: "sse event without final blank line", sse: true, body: `data: {"model":"m","usage":{"input_tokens":1,"output_tokens":2}}`,
			model: "m", want: tokens{input: 1, output: 2, total: 3}},
		{name: "sse multi-line data", sse: true, body: "data: {\"model\":\"m\",\ndata: \"usage\":{\"input_tokens\":4}}\n\n",
			model: "m", want: tokens{input: 4, total: 4}},
		{name: "sse overlong line skipped", sse: true,
			body: longLine + `data: {"usage":{"input_tokens":1}}` + "\n\n", want: tokens{input: 1, total: 1}},
		{name: "sse data without space, comments, ids", sse: true,
			body: ": hi\nid: 3\nretry: 10\ndata:{\"usage\":{\"output_tokens\":6}}\n\n", want: tokens{output: 6, total: 6}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := []byte(tc.body)
			if tc.file != "" {
				body = seed(t, tc.file)
			}
			for _, step := range []int{0, 1, 7, 4096} {
				if step == 1 && len(body) > 1<<16 {
					continue // the huge cases, byte by byte, take too long to be worth it
				}
				model, got := meterAll(tc.sse, body, step)
				if model != tc.model || got != tc.want {
					t.Errorf("fed %d bytes at a time: got model %q %+v, want %q %+v", step, model, got, tc.model, tc.want)
				}
			}
		})
	}
}

func TestRequestModel(t *testing.T) {
	for body, want := range map[string]string{
		`{"messages":[{"role":"user","content":"hi"}],"model":"gpt-4o"}`: "gpt-4o",
		`{"model":5}`: "",
		`not json`:    "",
		``:            "",
		`{"model":"` + strings.Repeat("m", 300) + `"}`: strings.Repeat("m", maxModelLen),
		"{\"model\":\"a\xffb\"}":                       "a\ufffdb",
	} {
		if got := requestModel([]byte(body)); got != want {
			t.Errorf("requestModel(%.40q) = %q, want %q", body, got, want)
		}
	}
}

// FuzzMeter checks that a meter never panics, reports no negative or
// unbounded count, and reads the same whichever way the body is cut.
func FuzzMeter(f *testing.F) {
	ents, err := usageSeeds.ReadDir("testdata/usage")
	if err != nil {
		f.Fatal(err)
	}
	if len(ents) == 0 {
		f.Fatal("the seed corpus testdata/usage is empty")
	}
	for _, e := range ents {
		b := seed(f, e.Name())
		f.Add(b, strings.HasSuffix(e.Name(), ".sse"), uint16(len(b)/2))
	}
	f.Fuzz(func(t *testing.T, body []byte, sse bool, cut uint16) {
		model, whole := meterAll(sse, body, 0)
		for _, v := range []int64{whole.input, whole.output, whole.cacheRead, whole.cacheWrite, whole.total} {
			if v < 0 || v > 4*maxTokens {
				t.Fatalf("count %d out of range: %+v", v, whole)
			}
		}
		if len(model) > maxModelLen {
			t.Fatalf("model name of %d bytes", len(model))
		}
		m := newMeter(sse)
		i := int(cut) % (len(body) + 1)
		m.Write(body[:i])
		m.Write(body[i:])
		if model2, split := m.result(); model2 != model || split != whole {
			t.Fatalf("cut at %d: %q %+v; whole: %q %+v", i, model2, split, model, whole)
		}
		if sse && !bytes.Contains(body, []byte("data:")) && (model != "" || whole != tokens{}) {
			t.Fatalf("a stream without data lines reported %q %+v", model, whole)
		}
	})
}

package answerscan

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// chat is an OpenAI chat request body with these messages, role then
// content.
func chat(msgs ...string) []byte {
	var parts []string
	for i := 0; i+1 < len(msgs); i += 2 {
		parts = append(parts, fmt.Sprintf(`{"role":%q,"content":%s}`, msgs[i], jsonString(msgs[i+1])))
	}
	return []byte(`{"model":"m","messages":[` + strings.Join(parts, ",") + `]}`)
}

// respond closes a response with body on s.
func respond(s *Scan, body string) {
	w := s.Response()
	for len(body) > 0 { // in pieces, as a stream arrives
		n := min(len(body), 7)
		w.Write([]byte(body[:n]))
		body = body[n:]
	}
	w.Close()
}

// sse is a stream of events, each data line one JSON event.
func sse(events ...string) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "event: x\ndata: %s\n\n", e)
	}
	return b.String() + "data: [DONE]\n\n"
}

// pieces cuts s into pieces of n bytes, as a stream's deltas come.
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// In model requests: the answer the agent sends is found and named by the
// request; the model's own answer sent back is not, however the model said
// it (a JSON body, an OpenAI or an Anthropic stream, a sed edit); nor is a
// data line a program of the agent's may have printed.
func TestRequests(t *testing.T) {
	x := taskIndex(t, Doc{"tests/expected.csv", []byte("region,total\n2024-01-05,north-west,19.99,1234.5,widgets\n")})
	code := strings.TrimSpace(fixLine)
	openai := func(text string) string {
		var ev []string
		for _, p := range pieces(text, 5) {
			ev = append(ev, `{"choices":[{"delta":{"content":`+jsonString(p)+`}}]}`)
		}
		return sse(ev...)
	}
	anthropic := func(text string) string {
		args := `{"command": ` + jsonString("cat > /app/stats.py <<'PY'\n"+text+"\nPY") + `}`
		ev := []string{`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","name":"bash","input":{}}}`}
		for _, p := range pieces(args, 9) {
			ev = append(ev, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`+jsonString(p)+`}}`)
		}
		return sse(ev...)
	}
	cases := []struct {
		name     string
		response string // the model's answer to the first request
		second   []byte
		want     string // the hit's place, or ""
	}{
		{"answer in the system prompt", `{"choices":[{"message":{"content":"ok"}}]}`,
			chat("system", "Hints:\n"+fixLine, "user", "Fix mean."), "model request #2"},
		{"the model's answer sent back", `{"choices":[{"message":{"content":` + jsonString("Here:\n"+fixLine) + `}}]}`,
			chat("user", "Fix mean.", "assistant", "Here:\n"+fixLine), ""},
		{"the model's streamed answer sent back", openai("Try:\n" + code + "\n"),
			chat("user", "Fix mean.", "assistant", "Try:\n"+code), ""},
		{"the model's streamed tool call sent back", anthropic(fixLine),
			chat("user", "Fix mean.", "user", "tool output:\n"+fixLine), ""},
		{"a sed edit shown back", `{"content":` + jsonString(`sed -i 's/total \/\/ len(xs)/sum(xs) \/ len(xs) if xs else float("nan")/' stats.py`) + `}`,
			chat("user", "$ cat stats.py\ndef mean(xs):\n"+fixLine), ""},
		{"another answer than the model's", `{"choices":[{"message":{"content":` + jsonString(fixLine) + `}}]}`,
			chat("user", "Fix mean.", "assistant", "Here:\n"+assertLine), "model request #2"},
		{"expected output printed", `{"choices":[{"message":{"content":"ok"}}]}`,
			chat("user", "$ python3 report.py\n2024-01-05,north-west,19.99,1234.5,widgets\n"), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := x.NewScan()
			s.Request(chat("user", instr), "first")
			respond(s, c.response)
			s.Request(c.second, "second")
			h := s.Hits()
			switch {
			case c.want == "" && len(h) != 0:
				t.Errorf("hits %+v, want none", h)
			case c.want != "" && (len(h) != 1 || h[0].Where != c.want || h[0].Note != "second"):
				t.Errorf("hits %+v, want one at %s", h, c.want)
			}
			if s.Requests() != 2 {
				t.Errorf("%d requests counted", s.Requests())
			}
		})
	}
	// The data line is an answer in the agent's own files.
	s := x.NewScan()
	s.Text("/agent/notes.txt", []byte("2024-01-05,north-west,19.99,1234.5,widgets\n"))
	if h := s.Hits(); len(h) != 1 || h[0].Source != "tests/expected.csv" {
		t.Errorf("hits %+v, want the expected output in the agent's file", h)
	}
}

// The model's text is joined back from a stream's pieces.
func TestModelText(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"json": {`{"a":1}`, `{"a":1}`},
		"openai chat": {sse(`{"choices":[{"delta":{"role":"assistant","content":"Hel"}}]}`, `{"choices":[{"delta":{"content":"lo"}}]}`,
			`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"sh","arguments":"{\"c\""}}]}}]}`), `Hello{"c"`},
		"openai responses": {sse(`{"type":"response.output_text.delta","delta":"wor"}`, `{"type":"response.output_text.delta","delta":"ld"}`), "world"},
		"anthropic": {sse(`{"type":"content_block_delta","delta":{"type":"thinking_delta","thinking":"hm"}}`,
			`{"type":"content_block_delta","delta":{"type":"text_delta","text":"ok"}}`), "hmok"},
		"CRLF": {"data: {\"delta\":\"a\"}\r\n\r\ndata: {\"delta\":\"b\"}\r\n\r\n", "ab"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if got := string(modelText([]byte(c.body))); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// Every gateway of a trial uses one Scan at once: each fragment is still
// reported once, every request counted.
func TestScanConcurrent(t *testing.T) {
	x := taskIndex(t)
	s := x.NewScan()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 20 {
				s.Request(chat("user", fixLine), fmt.Sprint(i, j))
				respond(s, `{"content":"ok"}`)
			}
		})
	}
	wg.Wait()
	if h := s.Hits(); len(h) != 1 || s.Requests() != 160 {
		t.Errorf("hits %+v, %d requests: want one hit of 160 requests", h, s.Requests())
	}
}

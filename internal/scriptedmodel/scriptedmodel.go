package scriptedmodel

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Step is one turn of the script: a call of tool Tool with Input (a JSON
// object), or, with Tool empty, the final text.
type Step struct {
	Tool  string
	Input map[string]any
	Text  string
}

// Request is one request the handler answered.
type Request struct {
	Path   string
	Header http.Header
	Body   []byte
	Turn   int // -1 for a side query
}

// Server answers from a script and keeps every request. It is safe for
// concurrent use.
type Server struct {
	script []Step

	mu       sync.Mutex
	requests []Request
}

// New returns a server for script; after its last step every turn gets
// the final text "Done.".
func New(script ...Step) *Server { return &Server{script: script} }

// Requests returns the requests answered so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) step(turn int) Step {
	if turn < len(s.script) {
		return s.script[turn]
	}
	return Step{Text: "Done."}
}

// begin reads a request's model and turn (results counts the tool results
// it carries back), keeps the request, and returns the script's step for
// it: a side query (no tools declared) gets a short text, turn -1.
func (s *Server) begin(r *http.Request, body []byte, results func() int) (model string, turn int, st Step) {
	var req struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &req)
	turn, st = -1, Step{Text: "Proctor task"}
	if hasTools(body) {
		turn = results()
		st = s.step(turn)
	}
	s.keep(r, body, turn)
	return req.Model, turn, st
}

func (s *Server) keep(r *http.Request, body []byte, turn int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Path: r.URL.Path, Header: r.Header.Clone(), Body: body, Turn: turn})
}

// ServeHTTP answers POST …/messages as Anthropic, POST …/responses as
// OpenAI's Responses API, POST …/chat/completions as its Chat Completions, GET …/models with an empty list, and anything
// else 404.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages/count_tokens"):
		s.keep(r, body, -1)
		writeJSON(w, map[string]any{"input_tokens": 100})
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/messages"):
		s.anthropic(w, r, body)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		s.chat(w, r, body)
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/responses"):
		s.responses(w, r, body)
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models"):
		s.keep(r, body, -1)
		writeJSON(w, map[string]any{"object": "list", "data": []any{}})
	default:
		s.keep(r, body, -1)
		http.Error(w, `{"error":{"message":"not scripted"}}`, http.StatusNotFound)
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// sse writes one server-sent event.
func sse(w io.Writer, event string, data any) {
	b, _ := json.Marshal(data)
	fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// count counts occurrences of "type":"KIND" in a JSON body, however it is
// spaced.
func count(body []byte, kind string) int {
	var n int
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if t, _ := x["type"].(string); t == kind {
				n++
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	var v any
	if json.Unmarshal(body, &v) == nil {
		walk(v)
	}
	return n
}

func hasTools(body []byte) bool {
	var v struct {
		Tools []json.RawMessage `json:"tools"`
	}
	return json.Unmarshal(body, &v) == nil && len(v.Tools) > 0
}

func streaming(body []byte) bool {
	var v struct {
		Stream bool `json:"stream"`
	}
	return json.Unmarshal(body, &v) == nil && v.Stream
}

func inputJSON(in map[string]any) string {
	if in == nil {
		return "{}"
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(in)
	return strings.TrimSpace(b.String())
}

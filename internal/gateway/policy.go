package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"
)

// What the agent may ask; doc.go says why. Each list is an allow-list:
// anything not on it is refused.

// endpoint is an API endpoint the gateway offers: the last segments of a
// path, and the method.
type endpoint struct {
	method string
	segs   []string
	id     bool // one more segment, any non-empty one, follows segs
}

// endpoints are matched against the end of the path below the upstream's
// path, longest first where one ends another (chat/completions, completions).
var endpoints = []endpoint{
	{method: http.MethodPost, segs: []string{"chat", "completions"}},
	{method: http.MethodPost, segs: []string{"completions"}},
	{method: http.MethodPost, segs: []string{"responses"}},
	{method: http.MethodPost, segs: []string{"messages", "count_tokens"}},
	{method: http.MethodPost, segs: []string{"messages"}},
	{method: http.MethodPost, segs: []string{"embeddings"}},
	{method: http.MethodGet, segs: []string{"models"}},
	{method: http.MethodGet, segs: []string{"models"}, id: true},
}

// storedObjects name collections of objects kept under the key. An endpoint
// below one of them is another API (POST /threads/{id}/messages is the
// Assistants API, not Anthropic's /messages) and is refused.
var storedObjects = map[string]bool{
	"assistants": true, "batches": true, "containers": true, "conversations": true,
	"evals": true, "files": true, "fine_tuning": true, "responses": true,
	"threads": true, "uploads": true, "vector_stores": true,
}

// offered reports whether the gateway relays method on escRel, the escaped
// path below the upstream's path ("" or starting with "/"). A segment that
// does not decode, or decodes to something holding '/', '\', '?', '#', '%'
// or a control character, is never offered: the upstream might decode it
// into a path of its own.
func offered(method, escRel string) bool {
	segs := strings.Split(strings.TrimPrefix(escRel, "/"), "/")
	for i, s := range segs {
		d, err := url.PathUnescape(s)
		if err != nil || strings.ContainsAny(d, "/\\?#%\x7f") || strings.ContainsFunc(d, func(r rune) bool { return r < ' ' }) {
			return false
		}
		segs[i] = d
	}
	for _, e := range endpoints {
		n := len(e.segs)
		if e.id {
			n++
		}
		if method != e.method || len(segs) < n {
			continue
		}
		tail := segs[len(segs)-n:]
		if e.id && tail[n-1] == "" {
			continue
		}
		if !equalSegs(tail[:len(e.segs)], e.segs) {
			continue
		}
		for _, s := range segs[:len(segs)-n] {
			if storedObjects[s] {
				return false
			}
		}
		return true
	}
	return false
}

func equalSegs(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkedFields are the top-level request fields checkBody looks at
// (compared ignoring case). All but "tools" and "prompt" are refused
// whatever their value: they make the provider reach out on the agent's
// behalf, or read what is stored under the key.
var checkedFields = []string{
	"tools",
	"prompt",             // an object is a stored prompt (OpenAI Responses); a string or array, Completions' text
	"mcp_servers",        // Anthropic: the provider connects to MCP servers
	"container",          // Anthropic: a code-execution container (and its skills)
	"web_search_options", // OpenAI Chat Completions: web search
	"conversation",       // OpenAI Responses: a stored conversation
}

// clientTools are the tool types the gateway lets through: tools the agent's
// own program runs, so the provider only names a call and the agent does it
// inside the sandbox. Anthropic's versioned client tools are matched by
// versionedClientTools.
var clientTools = map[string]bool{
	"function":             true, // OpenAI (and compatible) function tools
	"custom":               true, // OpenAI free-form tools; Anthropic's explicit custom type
	"computer_use_preview": true, // OpenAI: the agent takes the screenshots and clicks
	"local_shell":          true, // OpenAI: the agent runs the commands
	"apply_patch":          true, // OpenAI: the agent applies the patches
}

// versionedClientTools are the Anthropic client tools, whose type is one of
// these followed by an eight-digit date (bash_20250124).
var versionedClientTools = []string{"bash_", "text_editor_", "computer_"}

func clientTool(typ string) bool {
	if clientTools[typ] {
		return true
	}
	for _, p := range versionedClientTools {
		if date, ok := strings.CutPrefix(typ, p); ok && len(date) == 8 && strings.Trim(date, "0123456789") == "" {
			return true
		}
	}
	return false
}

// checkBody checks the body of a request to a POST endpoint. It returns the
// status and reason to refuse it with, or 0.
//
// The body must be one JSON object, in UTF-8, sent without Content-Encoding:
// anything else could be read by the provider as JSON the gateway did not see
// (Python's json takes NaN and UTF-16; a gzip body is opaque here). The whole
// body is checked, however large. Fields are matched ignoring case, and a
// checked field given twice is refused: parsers differ on which copy wins.
func checkBody(h http.Header, body []byte) (status int, reason string) {
	if enc := strings.TrimSpace(h.Get("Content-Encoding")); enc != "" && !strings.EqualFold(enc, "identity") {
		return http.StatusUnsupportedMediaType, fmt.Sprintf("request content encoding %q is not relayed: the gateway must read the body", clip(enc))
	}
	if !utf8.Valid(body) || !json.Valid(body) {
		return http.StatusBadRequest, "the request body is not JSON in UTF-8"
	}
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return http.StatusBadRequest, "the request body is not a JSON object"
	}
	obj := body[i:]
	if tooDeep(obj) {
		return http.StatusBadRequest, fmt.Sprintf("the request body is nested more than %d levels deep", maxDepth)
	}
	var tools []byte
	seen := make(map[string]bool)
	for key, val := range members(obj) {
		name := ""
		for _, f := range checkedFields {
			if strings.EqualFold(key, f) {
				name = f
			}
		}
		switch {
		case name == "":
			continue
		case seen[name]:
			return http.StatusForbidden, fmt.Sprintf("the request body gives %q twice", name)
		case name == "tools":
			tools = val
		case name == "prompt" && val[0] != '{':
		default:
			return http.StatusForbidden, fmt.Sprintf("field %q not offered by the gateway", name)
		}
		seen[name] = true
	}
	if reason := checkTools(tools, "", 0); reason != "" {
		return http.StatusForbidden, reason
	}
	if _, reason := scanContent(obj, 0, false); reason != "" {
		return http.StatusForbidden, reason
	}
	return 0, ""
}

// maxNamespaceDepth bounds how deep namespace tools nest: a namespace
// holding tools inside more namespaces than this is refused.
const maxNamespaceDepth = 4

// checkTools says why the gateway refuses the tools declared by the JSON
// value tools (nil if none), or "". in says where they are declared, for
// the reason ("" for the body's own tools, else " in namespace ..." or the
// like); depth is how many namespaces hold them.
func checkTools(tools []byte, in string, depth int) string {
	if tools == nil || string(tools) == "null" {
		return ""
	}
	if tools[0] != '[' {
		return fmt.Sprintf(`"tools"%s is not an array`, in)
	}
	for tool := range elements(tools) {
		if reason := checkTool(tool, in, depth); reason != "" {
			return reason
		}
	}
	return ""
}

// checkTool says why the gateway refuses the tool declared by the JSON value
// tool, or "". in and depth are checkTools'.
//
// A namespace tool groups tools under a name (Codex declares its
// multi-agent tools in one): it is judged by the tools in it, each as it
// would be on its own, so a server-side tool is refused inside one as it is
// outside. A tool_search tool is the provider's, but for one whose
// "execution" is given once, as "client": Codex runs that search itself.
func checkTool(tool []byte, in string, depth int) string {
	if tool[0] != '{' {
		return fmt.Sprintf("a tool%s is not a JSON object", in)
	}
	var typ, name, tools, execution []byte
	schema := false
	nTools, nExecution := 0, 0
	for key, val := range members(tool) {
		switch {
		case strings.EqualFold(key, "type"):
			if typ != nil {
				return fmt.Sprintf(`a tool%s gives "type" twice`, in)
			}
			typ = val
		case key == "input_schema":
			schema = true
		case key == "name":
			name = val
		case strings.EqualFold(key, "tools"):
			tools = val
			nTools++
		case strings.EqualFold(key, "execution"):
			execution = val
			nExecution++
		}
	}
	if typ == nil {
		if !schema {
			return fmt.Sprintf(`a tool%s has neither "type" nor "input_schema"`, in)
		}
		return "" // an Anthropic custom tool
	}
	s, ok := jsonString(typ)
	if !ok {
		return fmt.Sprintf(`a tool's "type"%s is not a string`, in)
	}
	switch {
	case s == "namespace":
		return checkNamespace(name, tools, nTools, in, depth)
	case s == "tool_search" && nExecution == 1 && clientExecution(execution):
		return "" // the agent runs the search: a tool_search_call is a call of its own
	case clientTool(s):
		return ""
	}
	return fmt.Sprintf("server-side tool %q%s not offered by the gateway", clip(s), in)
}

// checkNamespace says why the gateway refuses a namespace tool whose "name"
// and "tools" are the JSON values name and tools (nil if not given; tools
// given n times), or "". in and depth are where the namespace stands.
func checkNamespace(name, tools []byte, n int, in string, depth int) string {
	what := "a namespace"
	if s, ok := jsonString(name); ok {
		what = fmt.Sprintf("namespace %q", clip(s))
	}
	switch {
	case depth >= maxNamespaceDepth:
		return fmt.Sprintf("namespace tools%s nest more than %d deep", in, maxNamespaceDepth)
	case n == 0:
		return fmt.Sprintf(`%s%s has no "tools"`, what, in)
	case n > 1:
		return fmt.Sprintf(`%s%s gives "tools" twice`, what, in)
	case tools[0] != '[':
		return fmt.Sprintf(`the "tools" of %s%s is not an array`, what, in)
	}
	return checkTools(tools, " in "+what, depth+1)
}

// clientExecution reports whether the JSON value v is the string "client".
func clientExecution(v []byte) bool {
	s, ok := jsonString(v)
	return ok && s == "client"
}

// jsonString decodes the JSON value v if it is a string.
func jsonString(v []byte) (string, bool) {
	var s string
	if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// clip shortens s, from the agent, for a reason.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "") + "..."
}

// accountHeader reports whether the header named name picks the OpenAI
// organisation or project the key is used for, or is another OpenAI-*
// header but OpenAI-Beta: none is relayed. Names are compared ignoring case,
// and '_' as '-' (servers behind CGI-style gateways read them alike).
func accountHeader(name string) bool {
	n := strings.ReplaceAll(strings.ToLower(name), "_", "-")
	return strings.HasPrefix(n, "openai-") && n != "openai-beta"
}

// The functions below walk JSON already checked by json.Valid: they find the
// extent of values without checking them again.

// members yields the key and raw value of each member of the object obj. A
// key too long to be a field the gateway checks, or that does not decode, is
// yielded as "".
func members(obj []byte) func(yield func(string, []byte) bool) {
	return func(yield func(string, []byte) bool) {
		i := skipSpace(obj, 1)
		for i < len(obj) && obj[i] == '"' {
			end := stringEnd(obj, i)
			key := decodeKey(obj[i:end])
			i = skipSpace(obj, end)
			i = skipSpace(obj, i+1) // past ':'
			vend := valueEnd(obj, i)
			if !yield(key, obj[i:vend]) {
				return
			}
			i = skipSpace(obj, vend)
			if i < len(obj) && obj[i] == ',' {
				i = skipSpace(obj, i+1)
			}
		}
	}
}

// elements yields the raw value of each element of the array arr.
func elements(arr []byte) func(yield func([]byte) bool) {
	return func(yield func([]byte) bool) {
		i := skipSpace(arr, 1)
		for i < len(arr) && arr[i] != ']' {
			end := valueEnd(arr, i)
			if !yield(arr[i:end]) {
				return
			}
			i = skipSpace(arr, end)
			if i < len(arr) && arr[i] == ',' {
				i = skipSpace(arr, i+1)
			}
		}
	}
}

// maxKeyLen bounds the keys decoded: a field name of n ASCII letters takes
// at most 6n+2 bytes in JSON (each letter as \u00XX), and no name checked
// here is over 40 letters.
const maxKeyLen = 6*40 + 2

func decodeKey(raw []byte) string {
	if len(raw) > maxKeyLen {
		return ""
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string starting at b[i]: past
// the first '"' after it that no odd run of backslashes escapes.
func stringEnd(b []byte, i int) int {
	start := i
	for i++; ; i++ {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return len(b)
		}
		i += j
		n := 0
		for k := i - 1; k > start && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return i + 1
		}
	}
}

// valueEnd returns the index just past the value starting at b[i].
func valueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return len(b)
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
	}
	return i
}

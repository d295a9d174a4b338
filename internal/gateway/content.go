package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// What the agent may put in a body: content the provider fetches from a URL
// or reads from storage is refused; doc.go says why. Unlike the tools, this
// is a list of what is refused, each entry a form some provider documents.

// fetchers are the content types that make the provider fetch what a URL
// names, or read a file stored under the key, and the members that say
// what. Content is any object in the body whose "type" (ignoring case) is
// one of these; a member (ignoring case) holding anything but null or
// inline data is refused (see fetched).
var fetchers = []struct {
	typ     string
	members []string
}{
	{"image_url", []string{"image_url"}},                         // OpenAI Chat: {"url": ...}
	{"file", []string{"file", "file_id"}},                        // OpenAI Chat: {"file": {...}}; Anthropic source {"type":"file"}
	{"input_image", []string{"image_url", "file_id"}},            // OpenAI Responses
	{"input_file", []string{"file_url", "file_id", "file_data"}}, // OpenAI Responses
	{"image", []string{"source"}},                                // Anthropic: source {"type":"url"} or {"type":"file"}
	{"document", []string{"source"}},                             // Anthropic
	{"audio_url", []string{"audio_url"}},                         // vLLM
	{"video_url", []string{"video_url"}},                         // vLLM
	{"document_url", []string{"document_url"}},                   // Mistral
}

// partFetchers are the members of a content part (an object in a "content"
// array) checked whatever its "type": vLLM reads a part without one, or
// with a "uuid", by these members.
var partFetchers = []string{"image_url", "audio_url", "video_url"}

// refusedContent are content types refused whatever they hold.
var refusedContent = []string{
	"container_upload", // Anthropic: a stored file put into a code-execution container
}

// holders are the members whose value may be an object holding the URL,
// id or data (in its holdsURL members, none of them a holder) rather than
// a string.
var holders = []string{"image_url", "audio_url", "video_url", "file", "source"}

// holdsURL are the members of a holder's object checked like its own.
var holdsURL = []string{"url", "file_url", "file_id", "file_data"}

// toolHolders are the types of the objects, other than namespace tools,
// whose "tools" declare tools the model may call: Codex declares its tools
// in an additional_tools input item (for its models of the "responses
// lite" kind, instead of the body's "tools"), and returns the tools its own
// tool search loaded in a tool_search_output item. An object of one of
// these types (ignoring case), at any depth, has its tools judged as the
// body's are.
var toolHolders = []string{"additional_tools", "tool_search_output"}

// contentFields are the members scanContent keeps for contentReason: "type"
// and every member a rule above names.
var contentFields = []string{
	"type", "image_url", "audio_url", "video_url", "document_url",
	"file", "file_id", "file_url", "file_data", "source", "tools",
}

// maxDepth bounds how deep objects and arrays nest in a request body, the
// body's own object being the first level.
const maxDepth = 128

// tooDeep reports whether the JSON value v nests objects and arrays more
// than maxDepth deep.
func tooDeep(v []byte) bool {
	depth := 0
	for i := 0; i < len(v); i++ {
		switch v[i] {
		case '"':
			i = stringEnd(v, i) - 1
		case '{', '[':
			if depth++; depth > maxDepth {
				return true
			}
		case '}', ']':
			depth--
		}
	}
	return false
}

// member is a member of a JSON object: its key (as decodeKey gives it) and
// raw value.
type member struct {
	key string
	val []byte
}

// scanContent walks the JSON value starting at b[i], which must not be
// tooDeep (the walk recurses once a level), and returns the index just
// past it. It stops at the first object (innermost first, then in order)
// that contentReason refuses, and returns why (and an index within the
// value). part says the value is an element of a "content" array.
//
// It reads each byte once: members and elements would read a value once
// for each object or array around it.
func scanContent(b []byte, i int, part bool) (end int, reason string) {
	switch b[i] {
	case '[':
		i = skipSpace(b, i+1)
		for i < len(b) && b[i] != ']' {
			if i, reason = scanContent(b, i, part); reason != "" {
				return i, reason
			}
			if i = skipSpace(b, i); i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
			}
		}
		return i + 1, ""
	case '{':
	default:
		return valueEnd(b, i), ""
	}
	var kept [4]member
	ms := kept[:0]
	i = skipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		kend := stringEnd(b, i)
		key := decodeKey(b[i:kend])
		i = skipSpace(b, skipSpace(b, kend)+1) // past ':'
		start := i
		if i, reason = scanContent(b, i, b[i] == '[' && strings.EqualFold(key, "content")); reason != "" {
			return i, reason
		}
		if anyFold(key, contentFields) {
			ms = append(ms, member{key, b[start:i]})
		}
		if i = skipSpace(b, i); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return i + 1, contentReason(ms, part)
}

// contentReason says why the gateway refuses an object with the members
// ms, or "". Only the members named in contentFields count: others may be
// left out of ms. part says the object is an element of a "content" array.
func contentReason(ms []member, part bool) string {
	for _, m := range ms {
		if !strings.EqualFold(m.key, "type") || m.val[0] != '"' {
			continue
		}
		typ := decodeKey(m.val)
		if anyFold(typ, toolHolders) {
			if reason := heldTools(ms, typ); reason != "" {
				return reason
			}
		}
		for _, t := range refusedContent {
			if strings.EqualFold(typ, t) {
				return fmt.Sprintf("content of type %q not offered by the gateway", t)
			}
		}
		for _, f := range fetchers {
			if strings.EqualFold(typ, f.typ) {
				if reason := fetchReason(ms, f.members); reason != "" {
					return reason
				}
			}
		}
	}
	if part {
		return fetchReason(ms, partFetchers)
	}
	return ""
}

// heldTools says why the gateway refuses the tools of an object of type
// typ, one of toolHolders, with the members ms, or "".
func heldTools(ms []member, typ string) string {
	in := fmt.Sprintf(" in an object of type %q", clip(typ))
	var tools []byte
	for _, m := range ms {
		if strings.EqualFold(m.key, "tools") {
			if tools != nil {
				return fmt.Sprintf(`an object of type %q gives "tools" twice`, clip(typ))
			}
			tools = m.val
		}
	}
	return checkTools(tools, in, 0)
}

// fetchReason says why the gateway refuses an object with the members ms,
// whose members named names say what the provider would fetch or read, or
// "". A name given twice is checked in each copy: parsers differ on which
// copy wins.
func fetchReason(ms []member, names []string) string {
	for _, m := range ms {
		for _, name := range names {
			if !strings.EqualFold(m.key, name) {
				continue
			}
			at := fetched(name, m.val)
			switch {
			case at == "":
			case at == "file_id" || strings.HasSuffix(at, ".file_id"):
				return "files stored under the key are not offered by the gateway: " + at
			default:
				return "content fetched by the provider from a URL is not offered by the gateway: " + at
			}
		}
	}
	return ""
}

// fetched says whether the JSON value val of the member name makes the
// provider fetch something or read a stored file: it returns the member at
// fault ("image_url", "source.url"), or "" when val is null or inline.
//
// Inline is a string holding a data: URL (compared ignoring case), and for
// file_data also one without ':' (base64; OpenRouter fetches a URL given
// there). A file_id is never inline. A holder's object is inline when each
// of its holdsURL members is. Any other value (a number, an array, an
// object elsewhere) is not a form the gateway knows to be inline, and is
// refused.
func fetched(name string, val []byte) string {
	switch {
	case string(val) == "null":
		return ""
	case name == "file_id":
		return name
	case val[0] == '"' && name == "file_data":
		if dataURL(val) || !hasColon(val) {
			return ""
		}
		return name
	case val[0] == '"':
		if dataURL(val) {
			return ""
		}
		return name
	case val[0] == '{' && slices.Contains(holders, name):
		for key, v := range members(val) {
			for _, h := range holdsURL {
				if strings.EqualFold(key, h) {
					if at := fetched(h, v); at != "" {
						return name + "." + at
					}
				}
			}
		}
		return ""
	}
	return name
}

// dataURL reports whether the JSON string s holds a data: URL.
func dataURL(s []byte) bool {
	const prefix = "data:"
	if len(s) < 2+len(prefix) {
		return false
	}
	if bytes.IndexByte(s[1:1+len(prefix)], '\\') >= 0 {
		var d string
		if json.Unmarshal(s, &d) != nil {
			return false
		}
		return len(d) >= len(prefix) && strings.EqualFold(d[:len(prefix)], prefix)
	}
	return strings.EqualFold(string(s[1:1+len(prefix)]), prefix)
}

// hasColon reports whether the JSON string s holds a ':', escaped or not.
func hasColon(s []byte) bool {
	if bytes.IndexByte(s, ':') >= 0 {
		return true
	}
	for i := 0; ; i++ {
		j := bytes.Index(s[i:], []byte(`\u003`))
		if j < 0 {
			return false
		}
		i += j
		if i+5 < len(s) && s[i+5]|0x20 == 'a' {
			return true
		}
	}
}

// anyFold reports whether s is one of names, ignoring case.
func anyFold(s string, names []string) bool {
	for _, n := range names {
		if strings.EqualFold(s, n) {
			return true
		}
	}
	return false
}

package answerscan

import (
	"bytes"
	"encoding/json"
)

// modelText is what the model said in a response body. A JSON body is
// searched as it is (its strings unescaped by views). A stream of
// server-sent events says its text in pieces, one a few tokens long, each
// in an event of its own: the pieces are joined back, in order, from the
// members that carry them in the providers' streams (OpenAI's chat
// completions and responses, Anthropic's messages, Gemini's): text,
// content, delta, arguments, partial_json, thinking, refusal, reasoning.
func modelText(body []byte) []byte {
	if !bytes.HasPrefix(body, []byte("data:")) && !bytes.HasPrefix(body, []byte("event:")) &&
		!bytes.Contains(body, []byte("\ndata:")) {
		return body
	}
	var out []byte
	for len(body) > 0 {
		line, rest, _ := bytes.Cut(body, []byte("\n"))
		body = rest
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
		if !ok {
			continue
		}
		out = appendPieces(out, bytes.TrimSpace(data))
	}
	return out
}

// pieceKeys are the members whose string values are what the model said.
var pieceKeys = map[string]bool{
	"text": true, "content": true, "delta": true, "arguments": true, "partial_json": true,
	"thinking": true, "refusal": true, "reasoning": true, "reasoning_content": true,
}

// appendPieces appends to out, in document order, the string values of
// pieceKeys members anywhere in the JSON event data (nothing when it is
// not JSON: "[DONE]").
func appendPieces(out, data []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(data))
	// stack holds, for each open container, whether it is an object and,
	// in an object, whether the next string is a key.
	type frame struct{ object, key bool }
	var stack []frame
	member := ""
	for {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		inObject := len(stack) > 0 && stack[len(stack)-1].object
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if inObject {
					stack[len(stack)-1].key = true // the value is this container
				}
				stack = append(stack, frame{object: v == '{', key: v == '{'})
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if inObject && stack[len(stack)-1].key {
				member = v
				stack[len(stack)-1].key = false
				continue
			}
			if pieceKeys[member] {
				out = append(out, v...)
			}
		}
		if inObject {
			stack[len(stack)-1].key = true
		}
	}
}

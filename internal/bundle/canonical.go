package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// Canonicalize returns the RFC 8785 (JCS) canonical form of the JSON text
// data: members sorted by the UTF-16 code units of their names, no
// insignificant whitespace, strings with the minimal escapes, numbers as
// ECMAScript prints IEEE 754 doubles. It rejects what RFC 8785 and I-JSON
// (RFC 7493) reject: invalid UTF-8, lone surrogates, duplicate member names,
// numbers out of the range of a double, and anything that is not one JSON
// value. The result is a new slice; data is not modified.
func Canonicalize(data []byte) ([]byte, error) {
	if data == nil {
		data = []byte{}
	}
	if !utf8.Valid(data) {
		return nil, errors.New("not valid UTF-8")
	}
	out, err := jcs.Transform(data)
	if err != nil {
		return nil, fmt.Errorf("not canonicalizable JSON: %s", oneLine(lowerFirst(err.Error())))
	}
	return out, nil
}

// canonicalJSON encodes v with encoding/json and canonicalizes the result.
func canonicalJSON(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Canonicalize(data)
}

// lowerFirst lower-cases an ASCII first letter, for the jcs package's
// capitalised messages.
func lowerFirst(s string) string {
	if s != "" && s[0] >= 'A' && s[0] <= 'Z' {
		return string(s[0]+'a'-'A') + s[1:]
	}
	return s
}

// isObject reports whether the canonical JSON value raw is an object.
func isObject(raw []byte) bool { return len(raw) > 0 && raw[0] == '{' }

// canonicalObject canonicalizes a JSON value and checks that it is an
// object.
func canonicalObject(raw []byte) (json.RawMessage, error) {
	c, err := Canonicalize(bytes.TrimSpace(raw))
	if err != nil {
		return nil, err
	}
	if !isObject(c) {
		return nil, fmt.Errorf("want a JSON object, got %s", kindOf(c))
	}
	return c, nil
}

// kindOf names the type of a JSON value from its first byte.
func kindOf(raw []byte) string {
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

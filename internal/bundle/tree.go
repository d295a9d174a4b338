package bundle

import (
	"errors"
	"strings"
)

// node is one value of a canonical JSON document, read in one pass by
// readTree. raw is the value's bytes, still canonical, capped so that an
// append to it cannot write over the rest of the document; a string's decoded
// text is in str, an object's members (in canonical order, unique) in
// members, an array's elements in elems.
type node struct {
	raw     []byte
	str     string
	members []member
	elems   []node
}

type member struct {
	key string
	val node
}

// maxDepth bounds nesting, as encoding/json and the jcs package do.
const maxDepth = 10000

var errNotCanonical = errors.New("not in canonical form")

// readTree reads the output of Canonicalize. It relies on the canonical
// form (no whitespace, only the minimal escapes) and fails on anything
// else rather than guess; it never panics.
func readTree(b []byte) (node, error) {
	r := treeReader{b: b}
	n, err := r.value()
	if err == nil && r.i != len(b) {
		err = errNotCanonical
	}
	return n, err
}

type treeReader struct {
	b     []byte
	i     int
	depth int
}

func (r *treeReader) value() (node, error) {
	if r.i >= len(r.b) {
		return node{}, errNotCanonical
	}
	start := r.i
	switch r.b[r.i] {
	case '{':
		return r.object(start)
	case '[':
		return r.array(start)
	case '"':
		s, err := r.string()
		return node{raw: r.b[start:r.i:r.i], str: s}, err
	}
	for r.i < len(r.b) && r.b[r.i] != ',' && r.b[r.i] != ']' && r.b[r.i] != '}' {
		r.i++
	}
	if r.i == start {
		return node{}, errNotCanonical
	}
	return node{raw: r.b[start:r.i:r.i]}, nil
}

func (r *treeReader) enter() error {
	r.depth++
	if r.depth > maxDepth {
		return errors.New("nested too deeply")
	}
	r.i++
	return nil
}

func (r *treeReader) object(start int) (node, error) {
	if err := r.enter(); err != nil {
		return node{}, err
	}
	n := node{members: []member{}}
	for first := true; ; first = false {
		if r.i >= len(r.b) {
			return node{}, errNotCanonical
		}
		if r.b[r.i] == '}' && first {
			r.i++
			break
		}
		if r.b[r.i] != '"' {
			return node{}, errNotCanonical
		}
		key, err := r.string()
		if err != nil {
			return node{}, err
		}
		if r.i >= len(r.b) || r.b[r.i] != ':' {
			return node{}, errNotCanonical
		}
		r.i++
		v, err := r.value()
		if err != nil {
			return node{}, err
		}
		n.members = append(n.members, member{key: key, val: v})
		if r.i >= len(r.b) {
			return node{}, errNotCanonical
		}
		if r.b[r.i] == '}' {
			r.i++
			break
		}
		if r.b[r.i] != ',' {
			return node{}, errNotCanonical
		}
		r.i++
	}
	r.depth--
	n.raw = r.b[start:r.i:r.i]
	return n, nil
}

func (r *treeReader) array(start int) (node, error) {
	if err := r.enter(); err != nil {
		return node{}, err
	}
	n := node{elems: []node{}}
	for first := true; ; first = false {
		if r.i >= len(r.b) {
			return node{}, errNotCanonical
		}
		if r.b[r.i] == ']' && first {
			r.i++
			break
		}
		v, err := r.value()
		if err != nil {
			return node{}, err
		}
		n.elems = append(n.elems, v)
		if r.i >= len(r.b) {
			return node{}, errNotCanonical
		}
		if r.b[r.i] == ']' {
			r.i++
			break
		}
		if r.b[r.i] != ',' {
			return node{}, errNotCanonical
		}
		r.i++
	}
	r.depth--
	n.raw = r.b[start:r.i:r.i]
	return n, nil
}

// string reads a canonical string at r.i (at its opening quote). The only
// escapes of the canonical form are \" \\ \b \f \n \r \t and \u00XX for the
// other control characters.
func (r *treeReader) string() (string, error) {
	r.i++ // the opening quote
	start, escaped := r.i, false
	for {
		if r.i >= len(r.b) {
			return "", errNotCanonical
		}
		c := r.b[r.i]
		if c == '"' {
			break
		}
		if c == '\\' {
			escaped = true
			r.i++
		}
		r.i++
	}
	body := r.b[start:r.i]
	r.i++ // the closing quote
	if !escaped {
		return string(body), nil
	}
	var s strings.Builder
	s.Grow(len(body))
	for j := 0; j < len(body); j++ {
		c := body[j]
		if c != '\\' {
			s.WriteByte(c)
			continue
		}
		if j+1 >= len(body) {
			return "", errNotCanonical
		}
		j++
		switch body[j] {
		case '"', '\\':
			s.WriteByte(body[j])
		case 'b':
			s.WriteByte('\b')
		case 'f':
			s.WriteByte('\f')
		case 'n':
			s.WriteByte('\n')
		case 'r':
			s.WriteByte('\r')
		case 't':
			s.WriteByte('\t')
		case 'u':
			if j+4 >= len(body) || body[j+1] != '0' || body[j+2] != '0' || body[j+3] > '1' || body[j+3] < '0' {
				return "", errNotCanonical
			}
			lo := hexVal(body[j+4])
			if lo < 0 {
				return "", errNotCanonical
			}
			s.WriteByte(byte(int(body[j+3]-'0')<<4 | lo))
			j += 4
		default:
			return "", errNotCanonical
		}
	}
	return s.String(), nil
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

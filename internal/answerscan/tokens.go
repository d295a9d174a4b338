package answerscan

import (
	"sync"
	"unicode/utf8"
)

// Text is compared as a stream of tokens: a word is a maximal run of ASCII
// letters, digits, '_' and any byte of a multi-byte UTF-8 sequence; every
// other printable byte is a token of its own; white space and control bytes
// only separate. So indentation, line breaks (CRLF too), and spacing around
// punctuation never matter: "return a+b" and "return  a + b" are the same
// four tokens.

const (
	classSpace = iota
	classWord
	classPunct
)

var class [256]uint8

// punctHash is the hash of each one-byte punctuation token.
var punctHash [256]uint64

func init() {
	for c := 0; c < 256; c++ {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c >= 0x80:
			class[c] = classWord
		case c > ' ' && c < 0x7f:
			class[c] = classPunct
			punctHash[c] = mix(fnvOffset ^ uint64(c)*fnvPrime)
		default:
			class[c] = classSpace
		}
	}
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// mix spreads a hash's bits (the finaliser of SplitMix64), so that the
// rolling sum over token hashes is well spread too.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// tokenizer holds the tokens of one text: their hashes, where each starts,
// and how many bytes each has; and the unescaped views of a text. Reused
// between texts to spare allocation (tokenizers), by one goroutine.
type tokenizer struct {
	hash  []uint64
	start []int32
	size  []int32
	views [maxViews - 1][]byte
}

// tokenizers keeps tokenizers for reuse; one that grew past keepBytes is
// let go.
var tokenizers = sync.Pool{New: func() any { return new(tokenizer) }}

const keepBytes = 8 << 20

func getTokenizer() *tokenizer { return tokenizers.Get().(*tokenizer) }

func putTokenizer(t *tokenizer) {
	if cap(t.hash) <= keepBytes/8 && cap(t.views[0]) <= keepBytes && cap(t.views[1]) <= keepBytes {
		tokenizers.Put(t)
	}
}

// reset tokenizes data (at most 2 GiB).
func (t *tokenizer) reset(data []byte) {
	if want := len(data)/4 + 16; cap(t.hash) < want {
		// Code has about a token for every four bytes: grown once or twice.
		t.hash, t.start, t.size = make([]uint64, 0, want), make([]int32, 0, want), make([]int32, 0, want)
	}
	t.hash, t.start, t.size = t.hash[:0], t.start[:0], t.size[:0]
	n := len(data)
	for i := 0; i < n; {
		switch class[data[i]] {
		case classSpace:
			i++
		case classPunct:
			t.hash = append(t.hash, punctHash[data[i]])
			t.start = append(t.start, int32(i))
			t.size = append(t.size, 1)
			i++
		default:
			j := i
			h := uint64(fnvOffset)
			for j < n && class[data[j]] == classWord {
				h = (h ^ uint64(data[j])) * fnvPrime
				j++
			}
			t.hash = append(t.hash, mix(h))
			t.start = append(t.start, int32(i))
			t.size = append(t.size, int32(j-i))
			i = j
		}
	}
}

// isWord reports whether the token at data[start] is a word.
func isWord(data []byte, start int32) bool { return class[data[start]] == classWord }

// maxViews bounds how many times a text is unescaped: a JSON string inside
// a JSON string (a tool call's arguments in a request body) needs two.
const maxViews = 3

// eachView calls fn with data and then with each unescaping of it, while
// one changes something, up to maxViews in all: so a fragment written into
// a JSON string (\n, \", \\, \u0022) or a string literal is found as well as
// one written plainly. The texts fn gets are valid only during the call,
// and t's tokens are fn's to set.
func (t *tokenizer) eachView(data []byte, fn func(view []byte, raw bool)) {
	fn(data, true)
	for v := range t.views {
		out, changed := unescape(t.views[v][:0], data)
		t.views[v] = out
		if !changed {
			return
		}
		fn(out, false)
		data = out
	}
}

// unescape appends src to dst with the escapes of JSON (and of most
// languages' string literals) decoded: \n \t \r \b \f \" \' \/ \\ \uXXXX
// (surrogate pairs joined) and \xHH. Any other backslash is kept as it
// is. It reports whether anything was decoded.
func unescape(dst, src []byte) ([]byte, bool) {
	changed := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c != '\\' || i+1 >= len(src) {
			dst = append(dst, c)
			continue
		}
		d := src[i+1]
		var r byte
		switch d {
		case 'n':
			r = '\n'
		case 't':
			r = '\t'
		case 'r':
			r = '\r'
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case '"', '\'', '/', '\\':
			r = d
		case 'u':
			if v, ok := hexValue(src, i+2, 4); ok {
				n := 6
				if v >= 0xd800 && v < 0xdc00 && i+7 < len(src) && src[i+6] == '\\' && src[i+7] == 'u' {
					if lo, ok := hexValue(src, i+8, 4); ok && lo >= 0xdc00 && lo < 0xe000 {
						v, n = 0x10000+(v-0xd800)<<10+(lo-0xdc00), 12
					}
				}
				dst = utf8.AppendRune(dst, rune(v))
				i += n - 1
				changed = true
				continue
			}
		case 'x':
			if v, ok := hexValue(src, i+2, 2); ok {
				dst = append(dst, byte(v))
				i += 3
				changed = true
				continue
			}
		}
		if r == 0 {
			dst = append(dst, c)
			continue
		}
		dst = append(dst, r)
		i++
		changed = true
	}
	return dst, changed
}

// hexValue reads n hex digits at src[at:].
func hexValue(src []byte, at, n int) (uint32, bool) {
	if at+n > len(src) {
		return 0, false
	}
	var v uint32
	for _, c := range src[at : at+n] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint32(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint32(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | uint32(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}

package answerscan

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// unescapeSeeds are texts as request bodies carry them: code with quotes,
// line breaks and backslashes, non-ASCII, characters JSON escapes as \u.
var unescapeSeeds = []string{
	"",
	`print("hello, proctor")`,
	"def f():\n\treturn '\\n'.join(xs)\r\n",
	`C:\path\to\file and \\server\share`,
	"naïve café — ünïcödé 🙂 <tag> & 'q'",
	"\x00\x01\x1f\u2028\u2029",
	`already \"escaped\" \\n text`,
}

// Decoding what a JSON encoder wrote gives back the text: a fragment in a
// request body is searched for as it was written.
func FuzzUnescape(f *testing.F) {
	if len(unescapeSeeds) == 0 {
		f.Fatal("no seeds")
	}
	for _, s := range unescapeSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			t.Skip("a JSON encoder replaces invalid UTF-8")
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := unescape(nil, b[1:len(b)-1])
		if string(got) != s {
			t.Errorf("unescape(%s) = %q, want %q", b, got, s)
		}
	})
}

// Tokens ignore white space: the same text spaced otherwise has the same
// tokens.
func FuzzTokensIgnoreSpace(f *testing.F) {
	for _, s := range unescapeSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var a, b tokenizer
		a.reset([]byte(s))
		spaced := make([]byte, 0, 2*len(s))
		for i := 0; i < len(s); i++ {
			if class[s[i]] != classWord {
				spaced = append(spaced, ' ', s[i], '\n')
			} else {
				spaced = append(spaced, s[i])
			}
		}
		b.reset(spaced)
		if len(a.hash) != len(b.hash) {
			t.Fatalf("%d tokens, %d once spaced", len(a.hash), len(b.hash))
		}
		for i := range a.hash {
			if a.hash[i] != b.hash[i] {
				t.Fatalf("token %d differs once spaced", i)
			}
		}
	})
}

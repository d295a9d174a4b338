package answerscan

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The hidden material of a small task: a solution that writes a fix, a test
// with a distinctive assertion, and a test line that quotes the
// instruction.
const (
	fixLine    = `    return sum(xs) / len(xs) if xs else float("nan")  # never divide by zero`
	assertLine = `        self.assertAlmostEqual(mean([0.1, 0.2, 0.3]), 0.2, places=9)`
	quotedLine = `    assert run("hello.py") == "hello, proctor"`
)

var (
	solveSh   = "#!/bin/bash\nset -euo pipefail\ncat > /app/stats.py <<'PY'\ndef mean(xs):\n" + fixLine + "\nPY\n"
	testPy    = "import unittest\nfrom stats import mean\n\n\nclass T(unittest.TestCase):\n    def test_floats(self):\n" + assertLine + "\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n"
	quotingPy = "def test_hello():\n" + quotedLine + "\n"
	instr     = "Fix `mean` in /app/stats.py. The grader checks, among others:\n\n    assert run(\"hello.py\") == \"hello, proctor\"\n"
)

func taskIndex(t testing.TB, more ...Doc) *Index {
	t.Helper()
	x, err := Build(Material{
		Hidden: append([]Doc{{"solution/solve.sh", []byte(solveSh)}, {"tests/test_stats.py", []byte(testPy)}, {"tests/test_hello.py", []byte(quotingPy)}}, more...),
		Quoted: []Doc{{"instruction.md", []byte(instr)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A fragment is found however it was carried: re-indented, rewrapped,
// with CRLF line ends, inside a JSON string once or twice over, with its
// quotes \u-escaped, inside a string literal.
func TestFindsVariants(t *testing.T) {
	x := taskIndex(t)
	twice := jsonString(`{"command": ` + jsonString("cat > /app/stats.py <<'PY'\n"+fixLine+"\nPY") + `}`)
	cases := map[string]string{
		"as written":       fixLine,
		"re-indented":      "\t\t" + strings.TrimSpace(fixLine),
		"respaced":         `return sum( xs )/len( xs ) if xs else float( "nan" )`,
		"rewrapped":        "return sum(xs) / len(xs)\n    if xs\n    else float(\"nan\")",
		"CRLF":             "notes\r\n" + strings.ReplaceAll(assertLine, " ", "\r\n ") + "\r\n",
		"JSON string":      `{"messages":[{"role":"system","content":` + jsonString("Use this:\n"+fixLine+"\n") + `}]}`,
		"JSON twice":       `{"tool_calls":[{"function":{"arguments":` + twice + `}}]}`,
		"unicode escapes":  strings.ReplaceAll(jsonString(fixLine), `\"`, `\u0022`),
		"string literal":   `PROMPT = "Hint:\n` + strings.ReplaceAll(assertLine, `"`, `\"`) + `\n"`,
		"mid-line":         "# answer: " + strings.TrimSpace(fixLine) + " // ok",
		"upper half of 2x": strings.Repeat(strings.TrimSpace(assertLine)+" ", 2),
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			s := x.NewScan()
			s.Text("the agent command", []byte(text))
			if h := s.Hits(); len(h) != 1 {
				t.Fatalf("hits %+v, want one", h)
			}
		})
	}
}

// Boilerplate, short lines, comments and what the instruction quotes are
// never fragments, however they are carried.
func TestNotDistinctive(t *testing.T) {
	lines := []string{
		"import os, sys, subprocess, json",
		"from collections import defaultdict, OrderedDict",
		"#!/usr/bin/env python3 -u -X dev",
		"set -euo pipefail",
		"assert True",
		"}}}}}}}}",
		"------------------------------------------",
		`if __name__ == "__main__":`,
		"echo 1 > /logs/verifier/reward.txt 2>/dev/null || true",
		"pip install pytest==8.4.1 pytest-json-ctrf==0.3.5",
		"curl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh",
		"# Check that the average is computed over every element given",
		"// a comment long enough to be distinctive if it were code",
		"x = f(a, b)",
		"aaaaaaaa bbbbbbbb aaaaaaaa bbbbbbbb aaaaaaaa",
		strings.TrimSpace(quotedLine), // the instruction quotes it
		`assert out == "hello, proctor", "hello, proctor"`,
	}
	hidden := strings.Join(lines, "\n") + "\n"
	x, err := Build(Material{Hidden: []Doc{{"tests/test_x.py", []byte(hidden)}}, Quoted: []Doc{{"instruction.md", []byte(instr)}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range x.frags {
		t.Errorf("line %d (%q) is a fragment", f.line, lines[f.line-1])
	}
	s := x.NewScan()
	s.Text("the agent command", []byte(hidden))
	if h := s.Hits(); len(h) != 0 {
		t.Errorf("hits %+v in boilerplate", h)
	}
}

// A line the instruction quotes, or the workspace holds, is the agent's to
// see: an honest agent that sends its instruction and workspace to its
// model is not flagged.
func TestGivenIsNotAnAnswer(t *testing.T) {
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "stats.py"), []byte("def mean(xs):\n"+assertLine+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	x, err := Build(Material{
		Hidden:     []Doc{{"tests/test_stats.py", []byte(testPy)}, {"tests/test_hello.py", []byte(quotingPy)}},
		Quoted:     []Doc{{"instruction.md", []byte(instr)}},
		GivenTrees: []string{ws},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range x.frags {
		if l := strings.Split(testPy, "\n")[f.line-1]; f.doc == 0 && l == assertLine || f.doc == 1 {
			t.Errorf("%s:%d is a fragment", x.docs[f.doc].name, f.line)
		}
	}
	if st := x.Stats(); st.Given != 1 || st.Quoted != 1 || st.GivenFiles != 1 {
		t.Errorf("stats %+v: want the assertion dropped as given, the quoted line as quoted", st)
	}
	s := x.NewScan()
	s.Request([]byte(`{"messages":[{"role":"user","content":`+jsonString(instr+"\n"+testPy)+`}]}`), "")
	if h := s.Hits(); len(h) != 0 {
		t.Errorf("hits %+v", h)
	}
}

// A gold patch is searched for by its added lines, each named with its
// hunk; its context and removed lines are the workspace's.
func TestGoldPatch(t *testing.T) {
	patch := `diff --git a/calc.py b/calc.py
index 1111111..2222222 100644
--- a/calc.py
+++ b/calc.py
@@ -1,5 +1,5 @@ def add(a, b):
 def add(a, b):
-    return a - b  # the bug: it subtracts its operands
+    return operator.add(a, b)  # THE-FIX: add() must add its operands
 
 
 def sub(a, b):
`
	x, err := Build(Material{Hidden: []Doc{{"solution/gold.patch", []byte(patch)}}})
	if err != nil {
		t.Fatal(err)
	}
	if x.Len() != 1 {
		t.Fatalf("%d fragments, want the added line only", x.Len())
	}
	s := x.NewScan()
	s.Text("/agent/AGENTS.md", []byte("The fix is `return operator.add(a, b)  # THE-FIX: add() must add its operands`.\n"))
	s.Text("/agent/notes.md", []byte("return a - b  # the bug: it subtracts its operands\n"))
	h := s.Hits()
	want := "solution/gold.patch:8 (gold patch hunk @@ -1,5 +1,5 @@ of calc.py) (1 line, 55 characters)"
	if len(h) != 1 || h[0].Where != "/agent/AGENTS.md" || h[0].Detail() != want {
		t.Fatalf("hits %+v, want one in AGENTS.md: %s", h, want)
	}
}

// One short fragment alone is not evidence; two from the same file are.
func TestEvidence(t *testing.T) {
	a, b := `total = compute(items, rate)`, `assert total == 1234.5`+`, total`
	x, err := Build(Material{Hidden: []Doc{{"tests/test_t.py", []byte(a + "\n" + b + "\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	if x.Len() != 2 {
		t.Fatalf("%d fragments, want 2", x.Len())
	}
	s := x.NewScan()
	s.Text("one", []byte(a))
	if h := s.Hits(); len(h) != 0 {
		t.Fatalf("one line of %d characters is a hit: %+v", x.frags[0].chars, h)
	}
	s.Text("both", []byte(a+"\n"+b))
	if h := s.Hits(); len(h) != 1 || h[0].Where != "both" || len(h[0].Lines) != 2 {
		t.Fatalf("hits %+v, want both lines at one place", h)
	}
}

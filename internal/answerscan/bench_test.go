package answerscan

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
)

// synthetic returns n lines of code-like text, distinct by seed.
func synthetic(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 1))
	words := []string{"total", "items", "rate", "compute", "value", "result", "index", "parse", "config", "row", "self", "append", "len", "range", "return", "if", "else", "for", "in"}
	var b strings.Builder
	for range n {
		fmt.Fprintf(&b, "    %s = %s(%s, %s[%d]) + %s.%s(%d)\n", words[r.IntN(len(words))], words[r.IntN(len(words))],
			words[r.IntN(len(words))], words[r.IntN(len(words))], r.IntN(1000), words[r.IntN(len(words))], words[r.IntN(len(words))], r.IntN(1000))
	}
	return b.String()
}

// benchIndex is a task with 1,000 lines of tests and solution, a 2 MiB
// workspace to leave out, and an instruction.
func benchIndex(b *testing.B) (*Index, Material) {
	ws := b.TempDir()
	for i := range 20 {
		write(b, filepath.Join(ws, fmt.Sprintf("src/m%d.py", i)), synthetic(uint64(100+i), 1500))
	}
	m := Material{
		Hidden: []Doc{{"tests/test_outputs.py", []byte(synthetic(1, 700))}, {"solution/solve.sh", []byte(synthetic(2, 300))}},
		Quoted: []Doc{{"instruction.md", []byte(synthetic(3, 40))}}, GivenTrees: []string{ws},
	}
	x, err := Build(m)
	if err != nil {
		b.Fatal(err)
	}
	return x, m
}

func BenchmarkBuild(b *testing.B) {
	_, m := benchIndex(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Build(m); err != nil {
			b.Fatal(err)
		}
	}
}

// A scaffold: 200 files, 4 MiB, none of the answer.
func BenchmarkScanTree(b *testing.B) {
	x, _ := benchIndex(b)
	dir := b.TempDir()
	var n int64
	for i := range 200 {
		s := synthetic(uint64(1000+i), 400)
		n += int64(len(s))
		write(b, filepath.Join(dir, fmt.Sprintf("pkg/f%d.py", i)), s)
	}
	b.SetBytes(n)
	b.ResetTimer()
	for b.Loop() {
		if _, err := x.NewScan().Tree(dir, "/agent", Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

// A 1 MiB chat request body: code in JSON strings.
func BenchmarkRequest(b *testing.B) {
	x, _ := benchIndex(b)
	var msgs []string
	for i := 0; len(strings.Join(msgs, "")) < 1<<20; i++ {
		msgs = append(msgs, "user", synthetic(uint64(5000+i), 200))
	}
	body := chat(msgs...)
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for b.Loop() {
		x.NewScan().Request(body, "")
	}
}

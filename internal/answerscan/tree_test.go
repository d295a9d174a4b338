package answerscan

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func write(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A scaffold that carries the answer is found, file and line named; a
// link is never followed (not out of the tree, not within it), a fifo
// never blocks, a binary's strings are searched.
func TestTree(t *testing.T) {
	invoice := `    check(render_invoice(order_id=42), expected_total="1,234.50 EUR")`
	x := taskIndex(t, Doc{"tests/test_invoice.py", []byte("def test_invoice():\n" + invoice + "\n")})
	dir, outside := t.TempDir(), t.TempDir()
	write(t, filepath.Join(dir, "AGENTS.md"), "# Agent notes\n\nBe careful.\nWhen asked about mean, write:\n\n"+fixLine+"\n")
	write(t, filepath.Join(dir, "prompts", "system.json"), `{"system":`+jsonString("You are a coder.\nKnown checks:\n"+invoice+"\n")+`}`)
	write(t, filepath.Join(dir, "bin", "agent"), "\x7fELF\x02\x01\x01\x00\x00\x00"+strings.Repeat("\x00\x01", 40)+"usage: agent"+
		"\x00\x00"+"hint="+testPy+"\x00\x03\x04")
	write(t, filepath.Join(outside, "answer.txt"), fixLine+"\n"+assertLine+"\n")
	for _, l := range []struct{ target, name string }{
		{filepath.Join(outside, "answer.txt"), "link-out.txt"},
		{outside, "link-dir"},
		{"AGENTS.md", "link-in.md"},
	} {
		if err := os.Symlink(l.target, filepath.Join(dir, l.name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := x.NewScan()
	done := make(chan struct{})
	var st TreeStats
	var err error
	go func() { st, err = s.Tree(dir, "/agent", Limits{}); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the scan blocked (on the fifo?)")
	}
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/agent/AGENTS.md:6 solution/solve.sh:5 (1 line, 41 characters)",
		"/agent/bin/agent tests/test_stats.py:5, 7 (2 lines, 82 characters)",
		"/agent/prompts/system.json tests/test_invoice.py:2 (1 line, 63 characters)",
	}
	var got []string
	for _, h := range s.Hits() {
		got = append(got, h.Where+" "+h.Detail())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("hits:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st.Files != 3 || st.Binary != 1 || st.Skipped != 4 {
		t.Errorf("stats %+v: want 3 files read (1 binary), 3 links and a fifo skipped", st)
	}
}

// A fragment already reported is not reported again, however often the
// answer is carried: the first place names it.
func TestReportedOnce(t *testing.T) {
	x := taskIndex(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.md"), fixLine)
	write(t, filepath.Join(dir, "b.md"), fixLine)
	s := x.NewScan()
	if _, err := s.Tree(dir, "/agent", Limits{}); err != nil {
		t.Fatal(err)
	}
	s.Request([]byte(`{"content":`+jsonString(fixLine)+`}`), "")
	if h := s.Hits(); len(h) != 1 || h[0].Where != "/agent/a.md:1" {
		t.Fatalf("hits %+v, want a.md only", h)
	}
}

// Past the limits, files are left out or read in part, and counted so.
func TestTreeLimits(t *testing.T) {
	x := taskIndex(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a-big.txt"), strings.Repeat("filler line\n", 1000)+fixLine+"\n")
	write(t, filepath.Join(dir, "b.txt"), fixLine+"\n")
	write(t, filepath.Join(dir, "c.txt"), fixLine+"\n")
	s := x.NewScan()
	st, err := s.Tree(dir, "/agent", Limits{Files: 2, FileBytes: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 2 || st.Partial != 1 || st.LeftOut != 1 || st.Bytes != 4096+int64(len(fixLine)+1) {
		t.Errorf("stats %+v: want a.txt read in part, b.txt whole, c.txt left out", st)
	}
	if h := s.Hits(); len(h) != 1 || h[0].Where != "/agent/b.txt:1" {
		t.Errorf("hits %+v, want b.txt's", h)
	}
}

// A file larger than a chunk is searched whole: a fragment across the cut
// is found, with its line; a binary's answer past the first chunk too.
func TestTreeChunks(t *testing.T) {
	x := taskIndex(t)
	dir := t.TempDir()
	filler := strings.Repeat("x = 1\n", (chunkBytes-len(fixLine)/2)/6)
	lines := strings.Count(filler, "\n")
	write(t, filepath.Join(dir, "big.md"), filler+fixLine+"\n")
	write(t, filepath.Join(dir, "big.bin"), "\x00"+strings.Repeat("\x01\x02", chunkBytes/2+1000)+"\x00"+assertLine+"\x00")
	s := x.NewScan()
	st, err := s.Tree(dir, "/agent", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"/agent/big.bin tests/test_stats.py:7 (1 line, 56 characters)",
		fmt.Sprintf("/agent/big.md:%d solution/solve.sh:5 (1 line, 41 characters)", lines+1),
	}
	var got []string
	for _, h := range s.Hits() {
		got = append(got, h.Where+" "+h.Detail())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("hits:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if st.Files != 2 || st.Partial != 0 || st.Bytes != int64(len(filler)+len(fixLine)+1+chunkBytes+2000+len(assertLine)+3) {
		t.Errorf("stats %+v", st)
	}
	docs, _, err := ReadTree(dir, "tests", Limits{})
	if err != nil || len(docs) != 1 || string(docs[0].Data) != filler+fixLine+"\n" {
		t.Errorf("ReadTree: %d docs, %v: want big.md whole", len(docs), err)
	}
}

// A tree's search, kept and restored into another Scan of the same Index,
// is as if made there: the same hits, its fragments reported; another
// Index refuses it.
func TestTreeResultRestored(t *testing.T) {
	x := taskIndex(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "lib", "hints.txt"), fixLine+"\n")
	r, err := x.NewScan().TreeResult(dir, "/proctor/agent", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var kept TreeResult
	if err := json.Unmarshal(data, &kept); err != nil {
		t.Fatal(err)
	}
	s := x.NewScan()
	if err := s.Restore(kept); err != nil {
		t.Fatal(err)
	}
	s.Text("the agent command", []byte(fixLine))
	if h := s.Hits(); len(h) != 1 || h[0].Where != "/proctor/agent/lib/hints.txt:1" || kept.Stats.Files != 1 {
		t.Errorf("restored: hits %+v, stats %+v", h, kept.Stats)
	}
	other := taskIndex(t, Doc{"tests/more.py", []byte(`    check(render_invoice(order_id=42), expected_total="1,234.50 EUR")` + "\n")})
	if err := other.NewScan().Restore(kept); err == nil {
		t.Error("another index took the kept search")
	}
}

package answerscan

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// A Hit is hidden material found where the agent brought it.
type Hit struct {
	// Where is the place: "/agent/AGENTS.md:12" (the line where the first
	// fragment begins, when it was found as written), "the agent command",
	// "model request #3".
	Where string `json:"where"`
	// Note says more of the place: for a model request, the caller's
	// words (its gateway, target and digest).
	Note string `json:"note,omitempty"`
	// Source is the hidden file the fragments come from, as Material named
	// it; Lines are their places in it ("12", or "7 (gold patch hunk
	// @@ -1,6 +1,6 @@ of calc.py)"), and Chars their characters besides
	// white space. The fragments themselves are never quoted: a verdict is
	// published, the hidden tests are not.
	Source string   `json:"source"`
	Lines  []string `json:"lines"`
	Chars  int      `json:"chars"`
}

// Detail words the hit's source for a verdict: "solution/solve.sh:5, 9 (2
// lines, 71 characters)".
func (h Hit) Detail() string {
	const most = 8
	lines := h.Lines
	more := ""
	if len(lines) > most {
		more = fmt.Sprintf(" and %d more", len(lines)-most)
		lines = lines[:most]
	}
	noun := "lines"
	if len(h.Lines) == 1 {
		noun = "line"
	}
	d := fmt.Sprintf("%s:%s%s (%d %s, %d characters)", h.Source, strings.Join(lines, ", "), more, len(h.Lines), noun, h.Chars)
	if h.Note != "" {
		d += "; " + h.Note
	}
	return d
}

// A Scan searches what an agent brought for an Index's fragments and keeps
// the hits, each fragment reported once, at the first place it is found.
// Its methods are safe for concurrent use.
type Scan struct {
	x *Index

	mu       sync.Mutex
	reported []bool
	said     map[uint64]struct{} // the fragments' runs of CoverTokens tokens the model has said
	requests int
	hits     []Hit
}

// NewScan starts a Scan with x.
func (x *Index) NewScan() *Scan {
	return &Scan{x: x, reported: make([]bool, len(x.frags)), said: map[uint64]struct{}{}}
}

// Index is the Index s searches for.
func (s *Scan) Index() *Index { return s.x }

// Hits returns the hits so far, in the order they were found.
func (s *Scan) Hits() []Hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.hits)
}

// Requests is how many model requests were scanned.
func (s *Scan) Requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

// found is one fragment found in one text: the line it starts on, 0 when
// it was found only unescaped.
type found struct {
	frag int32
	line int
}

// search returns the fragments found in data, as written or unescaped,
// each once, in order of fragment.
func (s *Scan) search(tk *tokenizer, data []byte) []found {
	at := map[int32]int32{} // fragment → byte offset in data, or -1 when found only unescaped
	tk.eachView(data, func(v []byte, raw bool) {
		tk.reset(v)
		s.x.find(tk, func(f int32, i int) {
			if o, ok := at[f]; !ok || o < 0 && raw {
				at[f] = -1
				if raw {
					at[f] = tk.start[i]
				}
			}
		})
	})
	out := make([]found, 0, len(at))
	for f, o := range at {
		line := 0
		if o >= 0 {
			line = 1 + bytes.Count(data[:o], []byte("\n"))
		}
		out = append(out, found{f, line})
	}
	slices.SortFunc(out, func(a, b found) int { return int(a.frag - b.frag) })
	return out
}

// record turns what was found at one place into hits, one per hidden file
// with MinEvidence characters there of fragments keep accepts, when at
// least one of them was not reported before; lined adds to where the line
// the first fragment starts on. Called with s.mu held.
func (s *Scan) record(where string, lined bool, note string, fs []found, keep func(int32) bool) {
	type group struct {
		frags []found
		chars int
		fresh bool
	}
	groups := map[int32]*group{}
	var order []int32
	for _, f := range fs {
		if !keep(f.frag) {
			continue
		}
		fr := &s.x.frags[f.frag]
		g := groups[fr.doc]
		if g == nil {
			g = &group{}
			groups[fr.doc] = g
			order = append(order, fr.doc)
		}
		g.frags = append(g.frags, f)
		g.chars += fr.chars
		g.fresh = g.fresh || !s.reported[f.frag]
	}
	slices.Sort(order)
	for _, doc := range order {
		g := groups[doc]
		if g.chars < MinEvidence || !g.fresh {
			continue
		}
		h := Hit{Where: where, Note: note, Source: s.x.docs[doc].name, Chars: g.chars}
		first := 0
		for _, f := range g.frags {
			s.reported[f.frag] = true
			fr := &s.x.frags[f.frag]
			l := strconv.Itoa(int(fr.line))
			if fr.note != "" {
				l += " (" + fr.note + ")"
			}
			h.Lines = append(h.Lines, l)
			if f.line > 0 && (first == 0 || f.line < first) {
				first = f.line
			}
		}
		if lined && first > 0 {
			h.Where = fmt.Sprintf("%s:%d", where, first)
		}
		s.hits = append(s.hits, h)
	}
}

func all(int32) bool { return true }

// Text searches data, found at where (the agent's command, a file of
// its).
func (s *Scan) Text(where string, data []byte) {
	tk := getTokenizer()
	defer putTokenizer(tk)
	fs := s.search(tk, data)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.record(where, false, "", fs, all)
}

// Tree searches every file beneath root, within lim (zero fields: the
// defaults), naming each hit shown/relative-path:line (shown is where the
// agent sees root, e.g. /agent; a binary file's hits name no line).
func (s *Scan) Tree(root, shown string, lim Limits) (TreeStats, error) {
	tk := getTokenizer()
	defer putTokenizer(tk)
	var file map[int32]int // what the file's chunks so far hold: fragment → line, 0 if unknown
	return walkTree(root, lim.orDefault(), false, func(rel string, c chunk) {
		if c.first {
			file = map[int32]int{}
		}
		for _, f := range s.search(tk, c.data) {
			line := 0
			if f.line > 0 && !c.binary {
				line = c.line + f.line - 1
			}
			if l, ok := file[f.frag]; !ok || l == 0 {
				file[f.frag] = line
			}
		}
		if !c.last || len(file) == 0 {
			return
		}
		fs := make([]found, 0, len(file))
		for f, l := range file {
			fs = append(fs, found{f, l})
		}
		slices.SortFunc(fs, func(a, b found) int { return int(a.frag - b.frag) })
		s.mu.Lock()
		defer s.mu.Unlock()
		s.record(path.Join(shown, rel), !c.binary, "", fs, all)
	})
}

// A TreeResult is what one search of a tree found. Kept, it stands for
// the same search by a Scan of an Index with the same Digest (Restore): an
// agent's installed layer is immutable, and large.
type TreeResult struct {
	Index    string    `json:"index"` // the Index's Digest
	Stats    TreeStats `json:"stats"`
	Hits     []Hit     `json:"hits"`
	Reported []int32   `json:"reported"` // the fragments the hits report
}

// TreeResult is Tree, returning what it found to be kept. Made first,
// before the Scan found anything, it depends only on the tree, lim and
// the Index.
func (s *Scan) TreeResult(root, shown string, lim Limits) (TreeResult, error) {
	s.mu.Lock()
	hits, before := len(s.hits), slices.Clone(s.reported)
	s.mu.Unlock()
	st, err := s.Tree(root, shown, lim)
	if err != nil {
		return TreeResult{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := TreeResult{Index: s.x.Digest(), Stats: st, Hits: slices.Clone(s.hits[hits:]), Reported: []int32{}}
	for i, was := range before {
		if s.reported[i] && !was {
			r.Reported = append(r.Reported, int32(i))
		}
	}
	return r, nil
}

// Restore records a kept TreeResult as if its search had been made now.
func (s *Scan) Restore(r TreeResult) error {
	if r.Index != s.x.Digest() {
		return fmt.Errorf("a search kept for index %s, not this one (%s)", r.Index, s.x.Digest())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, f := range r.Reported {
		if f < 0 || int(f) >= len(s.reported) {
			return fmt.Errorf("a search kept names fragment %d of %d", f, len(s.reported))
		}
		s.reported[f] = true
	}
	s.hits = append(s.hits, r.Hits...)
	return nil
}

// Request searches the body of a model request the agent made, reporting
// a hit as "model request #N" (N counts the calls to Request) with note.
// Only code fragments count here (a program the agent wrote may print what
// an expected-output file holds), and only those the model has not said
// itself first: an honest agent sends its model's earlier answers back,
// and they may hold the solution it found. What the model said is what
// the writers from Response were given.
func (s *Scan) Request(body []byte, note string) {
	tk := getTokenizer()
	defer putTokenizer(tk)
	fs := s.search(tk, body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	where := fmt.Sprintf("model request #%d", s.requests)
	s.record(where, false, note, fs, func(f int32) bool {
		fr := &s.x.frags[f]
		return fr.code && !s.saidMostOf(fr)
	})
}

// saidMostOf reports whether the model's answers so far hold at least half
// of f's tokens, in runs of CoverTokens: a line the model wrote itself, or
// all but reworded (an edit made with sed shows the model's new text with
// a little of the old around it). Called with s.mu held.
func (s *Scan) saidMostOf(f *fragment) bool {
	if len(s.said) == 0 {
		return false
	}
	covered := make([]bool, len(f.toks))
	for i := 0; i+CoverTokens <= len(f.toks); i++ {
		if _, ok := s.said[gramHash(f.toks[i:])]; ok {
			for j := i; j < i+CoverTokens; j++ {
				covered[j] = true
			}
		}
	}
	n := 0
	for _, c := range covered {
		if c {
			n++
		}
	}
	return 2*n >= len(f.toks)
}

// maxResponse bounds what is kept of one response to learn what the model
// said; the rest is not read.
const maxResponse = 16 << 20

// Response returns a writer for the body of the model's response to a
// request, as the agent got it (JSON, or server-sent events): once closed,
// what the model said in it no longer counts against the agent when its
// requests send it back.
func (s *Scan) Response() io.WriteCloser { return &response{s: s} }

type response struct {
	s   *Scan
	buf []byte
}

func (r *response) Write(p []byte) (int, error) {
	if room := maxResponse - len(r.buf); room > 0 {
		r.buf = append(r.buf, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (r *response) Close() error {
	text := modelText(r.buf)
	r.buf = nil
	tk := getTokenizer()
	defer putTokenizer(tk)
	var grams []uint64
	tk.eachView(text, func(v []byte, _ bool) {
		tk.reset(v)
		for i := 0; i+CoverTokens <= len(tk.hash); i++ {
			g := gramHash(tk.hash[i:])
			if _, ok := r.s.x.grams[g]; ok {
				grams = append(grams, g)
			}
		}
	})
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	for _, g := range grams {
		r.s.said[g] = struct{}{}
	}
	return nil
}

package answerscan

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
)

// Doc is a named text: a file of the hidden material, or of what the agent
// is given.
type Doc struct {
	Name string // how a hit names it: "tests/test_outputs.py", "solution/gold.patch"
	Data []byte
}

// Material is what an Index is built from.
type Material struct {
	// Hidden are the files the agent must never see: the tests, the
	// solution. A file named *.patch or *.diff, or beginning "diff --git",
	// is a patch: only its added lines are searched for, each named with
	// its hunk ("gold patch" under solution/, "test patch" under tests/).
	Hidden []Doc
	// Quoted are what the agent is told (the instruction): their lines,
	// and the runs of CoverTokens tokens they share with a hidden line, are
	// not distinctive.
	Quoted []Doc
	// Given are more texts the agent is given, and GivenTrees directories
	// of them (the workspace, the environment's files; .git directories
	// are skipped): a hidden line that occurs in one is not distinctive.
	Given      []Doc
	GivenTrees []string
	// Limits bound what is read of GivenTrees; zero fields take
	// DefaultLimits'.
	Limits Limits
}

// An Index holds the distinctive fragments of a task's hidden material. It
// is immutable once built and safe for concurrent use.
type Index struct {
	docs    []hiddenDoc
	frags   []fragment
	anchors map[uint64][]int32 // anchor hash of a fragment's first AnchorTokens tokens → fragments
	filter  []uint64           // a bit per anchor hash's top filterBits bits: most positions stop here
	grams   map[uint64]struct{}
	stats   IndexStats

	digestOnce sync.Once
	digest     string
}

// IndexStats says what went into an Index.
type IndexStats struct {
	Lines      int // lines of the hidden material read (added lines, for a patch)
	Fragments  int // distinctive ones kept (identical lines once)
	Quoted     int // dropped for what they share with the instruction
	Given      int // dropped for occurring in what the agent is given
	GivenFiles int
	GivenBytes int64
}

type hiddenDoc struct {
	name string
	code bool // its lines are code (codeFile)
}

// fragment is one distinctive line.
type fragment struct {
	toks  []uint64
	chars int   // non-space bytes
	doc   int32 // the hidden file it was first found in
	line  int32 // 1-based, in that file
	note  string
	code  bool // searched for in model requests too (codeFile and codeShaped)
}

const filterBits = 20

// rollBase is the multiplier of the anchor's polynomial hash; rollTop is
// rollBase^(AnchorTokens-1), what the token leaving the window weighs.
const rollBase = 0x100000001b3 | 1

var rollTop = func() uint64 {
	p := uint64(1)
	for range AnchorTokens - 1 {
		p *= rollBase
	}
	return p
}()

// Build makes the Index of m's hidden material.
func Build(m Material) (*Index, error) {
	x := &Index{anchors: map[uint64][]int32{}, filter: make([]uint64, 1<<filterBits/64)}
	var tk tokenizer
	quoted := quotedGrams(&tk, m.Quoted)
	seen := map[uint64]bool{} // hash of a fragment's whole token sequence
	for _, d := range m.Hidden {
		doc := int32(len(x.docs))
		x.docs = append(x.docs, hiddenDoc{name: d.Name, code: codeFile(d.Name, d.Data)})
		eachLine(d, func(line []byte, n int, note string) {
			x.stats.Lines++
			line, ok := pick(&tk, bytes.TrimSpace(line), quoted)
			if !ok {
				if line != nil {
					x.stats.Quoted++
				}
				return
			}
			toks := slices.Clone(tk.hash[:min(len(tk.hash), maxFragmentTokens)])
			if sum := seqHash(toks); seen[sum] {
				return
			} else {
				seen[sum] = true
			}
			x.frags = append(x.frags, fragment{toks: toks, chars: nonSpace(tk.size[:len(toks)]), doc: doc, line: int32(n),
				note: note, code: x.docs[doc].code && codeShaped(line)})
		})
	}
	x.reindex()
	if err := x.dropGiven(m); err != nil {
		return nil, err
	}
	x.stats.Fragments = len(x.frags)
	return x, nil
}

// Digest names x's fragments, their order and their sources.
func (x *Index) Digest() string {
	x.digestOnce.Do(func() {
		h := sha256.New()
		var b [8]byte
		for _, f := range x.frags {
			d := x.docs[f.doc]
			fmt.Fprintf(h, "%q %d %q %t %t %d %d\n", d.name, f.line, f.note, d.code, f.code, f.chars, len(f.toks))
			for _, t := range f.toks {
				binary.LittleEndian.PutUint64(b[:], t)
				h.Write(b[:])
			}
		}
		x.digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	})
	return x.digest
}

// Stats says what went into x.
func (x *Index) Stats() IndexStats { return x.stats }

// Len is how many fragments x holds.
func (x *Index) Len() int { return len(x.frags) }

// pick applies the rule's first three steps to a trimmed line, without its
// trailing comment if that passes, else whole, leaving the one it kept in
// tk. A line dropped only for what it shares with the instruction is
// returned, not ok.
func pick(tk *tokenizer, line []byte, quoted map[uint64]struct{}) ([]byte, bool) {
	var shared []byte
	if code := stripComment(line); len(code) < len(line) && candidate(tk, code) {
		if ownEnough(tk, code, quoted) {
			return code, true
		}
		shared = code
	}
	if candidate(tk, line) {
		if ownEnough(tk, line, quoted) {
			return line, true
		}
		shared = line
	}
	return shared, false
}

// candidate tokenizes a trimmed line into tk and applies the rule's first
// two steps.
func candidate(tk *tokenizer, line []byte) bool {
	if len(line) < MinChars || boilerplate(line) {
		return false
	}
	tk.reset(line)
	if len(tk.hash) < AnchorTokens {
		return false
	}
	words := map[uint64]bool{}
	for i, h := range tk.hash {
		if isWord(line, tk.start[i]) {
			words[h] = true
		}
	}
	return nonSpace(tk.size) >= MinChars && len(words) >= MinWords && entropy(line) >= MinEntropy
}

func nonSpace(sizes []int32) int {
	n := 0
	for _, s := range sizes {
		n += int(s)
	}
	return n
}

// seqHash hashes a whole token sequence.
func seqHash(toks []uint64) uint64 {
	h := uint64(fnvOffset)
	for _, t := range toks {
		h = mix(h ^ t)
	}
	return h ^ uint64(len(toks))
}

// gramHash hashes CoverTokens tokens.
func gramHash(toks []uint64) uint64 {
	h := uint64(fnvOffset)
	for _, t := range toks[:CoverTokens] {
		h = (h ^ t) * fnvPrime
	}
	return mix(h)
}

// eachLine calls fn with each line of d to consider, numbered from 1: for
// a patch, only the added lines, with the hunk that adds them.
func eachLine(d Doc, fn func(line []byte, n int, note string)) {
	data := d.Data
	if !isPatch(d) {
		for n := 1; len(data) > 0; n++ {
			line, rest, _ := bytes.Cut(data, []byte("\n"))
			fn(line, n, "")
			data = rest
		}
		return
	}
	kind := "patch"
	switch {
	case strings.HasPrefix(d.Name, "solution/"):
		kind = "gold patch"
	case strings.HasPrefix(d.Name, "tests/"):
		kind = "test patch"
	}
	var file, hunk string
	for n := 1; len(data) > 0; n++ {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		data = rest
		s := strings.TrimSuffix(string(line), "\r")
		switch {
		case strings.HasPrefix(s, "diff --git "):
			file, hunk = "", ""
			if i := strings.LastIndex(s, " b/"); i >= 0 {
				file = s[i+3:]
			}
		case strings.HasPrefix(s, "+++ "):
			file = strings.TrimPrefix(strings.TrimPrefix(s, "+++ "), "b/")
		case strings.HasPrefix(s, "--- "):
		case strings.HasPrefix(s, "@@"):
			hunk = s
			if i := strings.Index(s[2:], "@@"); i >= 0 {
				hunk = s[:i+4]
			}
		case strings.HasPrefix(s, "+"):
			fn(line[1:], n, fmt.Sprintf("%s hunk %s of %s", kind, hunk, file))
		}
	}
}

func isPatch(d Doc) bool {
	switch path.Ext(d.Name) {
	case ".patch", ".diff":
		return true
	}
	return bytes.HasPrefix(d.Data, []byte("diff --git "))
}

// quotedGrams are the hashes of every run of CoverTokens tokens in the
// quoted texts.
func quotedGrams(tk *tokenizer, quoted []Doc) map[uint64]struct{} {
	grams := map[uint64]struct{}{}
	for _, d := range quoted {
		tk.eachView(d.Data, func(v []byte, _ bool) {
			tk.reset(v)
			for i := 0; i+CoverTokens <= len(tk.hash); i++ {
				grams[gramHash(tk.hash[i:])] = struct{}{}
			}
		})
	}
	return grams
}

// ownEnough reports whether the line in tk keeps MinOwnChars characters
// and MinOwnWords distinct words outside the runs it shares with grams.
func ownEnough(tk *tokenizer, line []byte, grams map[uint64]struct{}) bool {
	covered := make([]bool, len(tk.hash))
	for i := 0; i+CoverTokens <= len(tk.hash); i++ {
		if _, ok := grams[gramHash(tk.hash[i:])]; ok {
			for j := i; j < i+CoverTokens; j++ {
				covered[j] = true
			}
		}
	}
	own, words := 0, map[uint64]bool{}
	for i, h := range tk.hash {
		if covered[i] {
			continue
		}
		own += int(tk.size[i])
		if isWord(line, tk.start[i]) {
			words[h] = true
		}
	}
	return own >= MinOwnChars && len(words) >= MinOwnWords
}

// reindex rebuilds the anchors and filter over x.frags.
func (x *Index) reindex() {
	clear(x.anchors)
	clear(x.filter)
	x.grams = map[uint64]struct{}{}
	for i, f := range x.frags {
		a := anchorHash(f.toks)
		x.anchors[a] = append(x.anchors[a], int32(i))
		b := a >> (64 - filterBits)
		x.filter[b/64] |= 1 << (b % 64)
		for j := 0; j+CoverTokens <= len(f.toks); j++ {
			x.grams[gramHash(f.toks[j:])] = struct{}{}
		}
	}
}

func anchorHash(toks []uint64) uint64 {
	var h uint64
	for _, t := range toks[:AnchorTokens] {
		h = h*rollBase + t
	}
	return h
}

// find calls hit with each fragment whose whole token sequence occurs in
// tk's tokens, and the index of the token it starts at; a fragment may be
// reported more than once.
func (x *Index) find(tk *tokenizer, hit func(frag int32, at int)) {
	h := tk.hash
	if len(h) < AnchorTokens || len(x.frags) == 0 {
		return
	}
	a := anchorHash(h)
	for i := 0; ; i++ {
		b := a >> (64 - filterBits)
		if x.filter[b/64]&(1<<(b%64)) != 0 {
			for _, f := range x.anchors[a] {
				toks := x.frags[f].toks
				if len(toks) <= len(h)-i && slices.Equal(toks, h[i:i+len(toks)]) {
					hit(f, i)
				}
			}
		}
		if i+AnchorTokens >= len(h) {
			return
		}
		a = (a-h[i]*rollTop)*rollBase + h[i+AnchorTokens]
	}
}

// dropGiven drops the fragments that occur in what the agent is given.
func (x *Index) dropGiven(m Material) error {
	found := make([]bool, len(x.frags))
	var tk tokenizer
	mark := func(data []byte) {
		tk.eachView(data, func(v []byte, _ bool) {
			tk.reset(v)
			x.find(&tk, func(f int32, _ int) { found[f] = true })
		})
	}
	for _, d := range m.Quoted {
		mark(d.Data)
	}
	for _, d := range m.Given {
		mark(d.Data)
	}
	for _, root := range m.GivenTrees {
		st, err := walkTree(root, m.Limits.orDefault(), true, func(_ string, c chunk) { mark(c.data) })
		if err != nil {
			return fmt.Errorf("reading %s: %w", root, err)
		}
		x.stats.GivenFiles += st.Files
		x.stats.GivenBytes += st.Bytes
	}
	kept := x.frags[:0]
	for i, f := range x.frags {
		if found[i] {
			x.stats.Given++
		} else {
			kept = append(kept, f)
		}
	}
	x.frags = kept
	x.reindex()
	return nil
}

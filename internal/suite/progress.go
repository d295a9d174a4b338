package suite

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/proctor-sandbox/proctor/internal/store"
)

// progress reports finished trials: a log line each, or on a terminal one
// status line redrawn (trials done, pass rate so far per agent, ETA).
type progress struct {
	w        io.Writer
	terminal bool
	start    time.Time
	total    int

	mu     sync.Mutex
	done   int // finished by this runner
	before int // finished before it started
	passed map[string]int
	ran    map[string]int
	agents []string
}

func newProgress(s *store.Store, su *store.Suite, w io.Writer, terminal bool) *progress {
	p := &progress{w: w, terminal: terminal, start: time.Now(), passed: map[string]int{}, ran: map[string]int{}}
	for _, a := range su.Agents {
		p.agents = append(p.agents, a.Name)
	}
	counts, err := s.Counts()
	tallies, terr := s.Tallies()
	if err == nil && terr == nil {
		for _, n := range counts {
			p.total += n
		}
		for a, t := range tallies {
			p.before += t.Finished
			p.ran[a], p.passed[a] = t.Ran, t.Passed
		}
	}
	return p
}

func (p *progress) count(t *store.Trial) {
	if t.Result == nil || t.Result.Status == "" {
		return
	}
	p.ran[t.Agent]++
	if t.Result.Passed {
		p.passed[t.Agent]++
	}
}

func (p *progress) finished(t *store.Trial, r *store.Result) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	tt := *t
	tt.Result = r
	p.count(&tt)
	n := p.before + p.done
	if !p.terminal {
		word := "FAIL"
		switch {
		case r.Error != "" && r.Status == "":
			word = "ERROR"
		case r.Passed:
			word = "PASS"
		}
		detail := r.Status
		if r.Error != "" {
			detail += " " + r.Error
		}
		fmt.Fprintf(p.w, "proctor: [%d/%d] %s %s × %s #%d: %s (%s)%s\n", n, p.total, word, t.Agent, t.Task, t.Index,
			strings.TrimSpace(detail), time.Duration(r.WallMS)*time.Millisecond, p.eta(n))
		return
	}
	var parts []string
	for _, a := range p.agents {
		if p.ran[a] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d/%d", a, p.passed[a], p.ran[a]))
		}
	}
	line := fmt.Sprintf("[%d/%d] pass %s%s", n, p.total, strings.Join(parts, ", "), p.eta(n))
	fmt.Fprintf(p.w, "\r\033[K%s", line)
}

// eta estimates the time left from this runner's pace.
func (p *progress) eta(n int) string {
	if p.done == 0 || n >= p.total {
		return ""
	}
	per := time.Since(p.start) / time.Duration(p.done)
	left := per * time.Duration(p.total-n)
	return ", ETA " + left.Round(time.Second).String()
}

func (p *progress) close() {
	if p.terminal && p.w != nil && p.done > 0 {
		fmt.Fprintln(p.w)
	}
}

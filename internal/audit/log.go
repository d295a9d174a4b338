package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"sync"
	"time"

	"github.com/proctor-sandbox/proctor/internal/bundle"
)

// SuppressedKind is the kind of the event Seal appends when observed events
// were left out: its detail maps each kind to the number left out.
const SuppressedKind = "audit.suppressed"

// Limits bound the observed events kept. Zero fields take the defaults.
type Limits struct {
	PerKind int // observed events kept per kind; default 1000
	Total   int // observed events kept in all; default 20000
}

// DefaultLimits are the limits of a zero Limits.
var DefaultLimits = Limits{PerKind: 1000, Total: 20000}

// Log is one trial's audit log. It is safe for concurrent use. Events are
// numbered in the order they are appended. After Seal it takes no more
// observations, after Close nothing.
type Log struct {
	limits Limits
	now    func() time.Time

	mu     sync.Mutex
	tl     bundle.Timeline
	w      *bufio.Writer // nil without a file
	f      *os.File
	werr   error          // the first write error: the file is then abandoned, the log goes on
	seen   map[string]int // observed events per kind, kept or not
	kept   int            // observed events kept
	left   map[string]int // observed events left out per kind
	sealed bool           // no more observations
	closed bool           // nothing more
}

// New starts a log. When path is not empty, every event is also written to
// that file (created; it must not exist) as one JSON object a line.
func New(path string, lim Limits) (*Log, error) {
	if lim.PerKind <= 0 {
		lim.PerKind = DefaultLimits.PerKind
	}
	if lim.Total <= 0 {
		lim.Total = DefaultLimits.Total
	}
	l := &Log{limits: lim, now: func() time.Time { return time.Now().UTC() }, seen: map[string]int{}, left: map[string]int{}}
	if path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, fmt.Errorf("creating the audit log: %w", err)
		}
		l.f, l.w = f, bufio.NewWriter(f)
	}
	return l, nil
}

// Append records an event of the harness: it is always kept.
func (l *Log) Append(kind string, detail any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	l.appendLocked(kind, detail, l.now())
}

// Observe records an event the agent caused, at time at (zero: now). It is
// kept while its kind and the log are under their limits, and otherwise
// only counted; Observe reports whether it was kept.
func (l *Log) Observe(kind string, detail any, at time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sealed {
		return false
	}
	l.seen[kind]++
	if l.seen[kind] > l.limits.PerKind || l.kept >= l.limits.Total {
		l.left[kind]++
		return false
	}
	l.kept++
	if at.IsZero() {
		at = l.now()
	}
	l.appendLocked(kind, detail, at)
	return true
}

// Lost counts n events of kind that were never delivered to the log (a
// recorder's queue overflowed): they are counted as left out, so Seal's
// audit.suppressed event names them.
func (l *Log) Lost(kind string, n int) {
	if n <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sealed {
		return
	}
	l.seen[kind] += n
	l.left[kind] += n
}

func (l *Log) appendLocked(kind string, detail any, at time.Time) {
	e := l.tl.Append(kind, detail, at)
	if l.w == nil || l.werr != nil {
		return
	}
	// Without HTML escaping: the line must hold the detail's canonical
	// bytes, the ones its hash covers ("<" stays "<", not "\u003c").
	enc := json.NewEncoder(l.w)
	enc.SetEscapeHTML(false)
	err := enc.Encode(e)
	if err == nil {
		err = l.w.Flush()
	}
	if err != nil {
		l.werr = fmt.Errorf("writing the audit log: %w", err)
	}
}

// Counts returns how many events of each observed kind the agent caused,
// kept or left out.
func (l *Log) Counts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.seen)
}

// LeftOut returns how many observed events of each kind were not kept.
func (l *Log) LeftOut() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.left)
}

// Events returns a copy of the events so far.
func (l *Log) Events() []bundle.Event { return l.tl.Events() }

// Len is the number of events so far.
func (l *Log) Len() int { return l.tl.Len() }

// Seal ends the observations: later Observes are ignored, and if any were
// left out, an event of SuppressedKind says how many of each kind. The
// harness may still Append (its last events, the verdict) until Close.
func (l *Log) Seal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sealed {
		return
	}
	l.sealed = true
	if len(l.left) == 0 {
		return
	}
	l.appendLocked(SuppressedKind, maps.Clone(l.left), l.now())
}

// Close seals the log if it is not, closes the file and returns the first
// error writing it. Later Appends are ignored.
func (l *Log) Close() error {
	l.Seal()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return l.werr
	}
	l.closed = true
	if l.f != nil {
		if err := l.f.Close(); err != nil && l.werr == nil {
			l.werr = fmt.Errorf("closing the audit log: %w", err)
		}
	}
	return l.werr
}

// ErrTruncated marks an audit file whose last line is incomplete: a trial
// that died while writing. The events before it are returned.
var ErrTruncated = errors.New("audit log ends in the middle of an event")

// ReadFile reads an audit log file and checks its chain. It returns the
// events; on a broken chain or a malformed line, an error naming the line.
func ReadFile(path string, maxBytes int64) ([]bundle.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(io.LimitReader(f, maxBytes), path)
}

// Read reads audit events, one JSON object a line, from r (named name in
// errors) and checks their chain.
func Read(r io.Reader, name string) ([]bundle.Event, error) {
	br := bufio.NewReader(r)
	var events []bundle.Event
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 && b[len(b)-1] != '\n' {
			return events, fmt.Errorf("%s: line %d: %w", name, line, ErrTruncated)
		}
		if len(b) > 0 {
			var e bundle.Event
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if derr := dec.Decode(&e); derr != nil {
				return events, fmt.Errorf("%s: line %d: %v", name, line, derr)
			}
			events = append(events, e)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return events, fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := bundle.CheckTimeline(events); err != nil {
		return events, fmt.Errorf("%s: %w", name, err)
	}
	return events, nil
}

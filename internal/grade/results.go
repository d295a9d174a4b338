package grade

import (
	"errors"
	"fmt"
	"io"
	"slices"
)

// Outcome is what a test report says happened to one test.
type Outcome string

// The outcomes, from best to worst. When a report names a test more than
// once, the worst outcome it gives wins (see [Results]).
const (
	Passed  Outcome = "passed"
	Skipped Outcome = "skipped"
	Failed  Outcome = "failed"
	Error   Outcome = "error"
)

// severity orders outcomes: error > failed > skipped > passed.
func (o Outcome) severity() int {
	switch o {
	case Passed:
		return 0
	case Skipped:
		return 1
	case Failed:
		return 2
	default: // Error, and anything unknown, which is never better
		return 3
	}
}

// The Source of a [Results].
const (
	SourceJUnit      = "junit"         // ParseJUnit
	SourceGoTestJSON = "go test -json" // ParseGoTestJSON
	SourceCTRF       = "ctrf"          // ParseCTRF
)

// Limits on a test report. A report is written by code running inside the
// grader, so it is hostile input: it is read up to a size cap and parsed with
// bounded memory.
const (
	// DefaultReportLimit is the size cap used when a parser is given a
	// limit <= 0.
	DefaultReportLimit = 64 << 20
	// MaxTests caps the test results one report may hold (JUnit
	// testcases, or terminal events for a test in go test -json).
	MaxTests = 100_000
)

var (
	// ErrReportTooLarge means the report is larger than the limit the
	// parser was given.
	ErrReportTooLarge = errors.New("the test report is too large")
	// ErrTooManyTests means the report holds more than MaxTests results.
	ErrTooManyTests = fmt.Errorf("the test report holds more than %d test results", MaxTests)
	// ErrMalformedReport means the report does not parse as its format,
	// or breaks a rule of it (the error wraps it with the details).
	ErrMalformedReport = errors.New("malformed test report")
)

// Results is a parsed test report: each test's outcome, keyed by test id.
//
// A parser records each test under more than one id (its primary id and an
// alias; see ParseJUnit and ParseGoTestJSON for the forms), all in Tests, so
// that a caller can match either by exact string lookup. When an id is
// reported more than once, Tests holds the worst outcome reported for it
// (error > failed > skipped > passed): a report cannot turn a failure into a
// pass by repeating the test. Repeated primary ids are listed in Duplicates.
//
// A Results is not safe for concurrent mutation; the parsers hand the caller
// a new one it owns.
type Results struct {
	Tests  map[string]Outcome // test id → outcome
	Source string             // SourceJUnit, SourceGoTestJSON or SourceCTRF
	// Reported holds each test under its primary id alone (no alias), with
	// the worst outcome reported for it: what the report said of each test
	// it named, once.
	Reported   map[string]Outcome
	Tool       string   // the tool that wrote the report, where it says (CTRF's results.tool)
	Duplicates []string // primary ids reported more than once, sorted
	// Packages, for go test -json, are the packages that reported at least
	// one test, sorted; a tripwire must be reported in each (see Decide).
	// Empty for JUnit.
	Packages  []string
	primaries int             // results recorded, for MaxTests
	seen      map[string]bool // primary ids recorded once
	packages  map[string]bool // Packages while parsing
}

func newResults(source string) *Results {
	return &Results{Tests: make(map[string]Outcome), Reported: make(map[string]Outcome), Source: source, seen: make(map[string]bool)}
}

// record notes that the test with the given primary id and aliases had
// outcome o, keeping the worst outcome for every id.
func (r *Results) record(primary string, o Outcome, aliases ...string) error {
	r.primaries++
	if r.primaries > MaxTests {
		return ErrTooManyTests
	}
	if r.seen[primary] {
		if !slices.Contains(r.Duplicates, primary) {
			r.Duplicates = append(r.Duplicates, primary)
		}
	}
	r.seen[primary] = true
	if old, ok := r.Reported[primary]; !ok || o.severity() > old.severity() {
		r.Reported[primary] = o
	}
	for _, id := range append([]string{primary}, aliases...) {
		if id == "" {
			continue
		}
		if old, ok := r.Tests[id]; !ok || o.severity() > old.severity() {
			r.Tests[id] = o
		}
	}
	return nil
}

// notePackage records that pkg reported a test.
func (r *Results) notePackage(pkg string) {
	if r.packages == nil {
		r.packages = make(map[string]bool)
	}
	r.packages[pkg] = true
}

func (r *Results) finish() *Results {
	slices.Sort(r.Duplicates)
	for p := range r.packages {
		r.Packages = append(r.Packages, p)
	}
	slices.Sort(r.Packages)
	r.seen, r.packages = nil, nil
	return r
}

// limitReader reads from r, failing with ErrReportTooLarge once more than n
// bytes have been read.
type limitReader struct {
	r     io.Reader
	limit int64
	n     int64 // bytes still allowed
}

func newLimitReader(r io.Reader, limit int64) *limitReader {
	if limit <= 0 {
		limit = DefaultReportLimit
	}
	return &limitReader{r: r, limit: limit, n: limit}
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.n < 0 {
		return 0, fmt.Errorf("%w: over %d bytes", ErrReportTooLarge, l.limit)
	}
	if int64(len(p)) > l.n+1 {
		p = p[:l.n+1]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	if l.n < 0 {
		return 0, fmt.Errorf("%w: over %d bytes", ErrReportTooLarge, l.limit)
	}
	return n, err
}

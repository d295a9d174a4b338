package task

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Formats of a grader's structured results ([proctor] results).
const (
	// ResultsJUnit: tests/test.sh writes JUnit XML (pytest --junitxml)
	// to $PROCTOR_RESULTS, and runs the tripwire test $PROCTOR_TRIPWIRE.
	ResultsJUnit = "junit"
	// ResultsGoTestJSON: tests/test.sh writes `go test -json` output to
	// $PROCTOR_RESULTS; $PROCTOR_TRIPWIRE holds a test function (no
	// package clause) to add to the package under test.
	ResultsGoTestJSON = "go-test-json"
	// ResultsCTRF: tests/test.sh writes a CTRF JSON report (pytest
	// --ctrf, pytest-json-ctrf) to $PROCTOR_RESULTS, and runs the tripwire
	// test $PROCTOR_TRIPWIRE, as for ResultsJUnit.
	ResultsCTRF = "ctrf"
)

// DefaultExpected is where a task with results lists the tests it expects,
// when [proctor] expected is not set.
const DefaultExpected = "tests/expected.json"

// maxExpected bounds the ids of an expectation.
const maxExpected = 100_000

// Expected is what a task with structured results expects of the grader's
// report, SWE-bench's way: every FAIL_TO_PASS and PASS_TO_PASS test id
// reported passed.
type Expected struct {
	FailToPass []string `json:"fail_to_pass"`
	PassToPass []string `json:"pass_to_pass"`
}

// results reads [proctor] results and expected into c.
func (l *loader) results(tb table, c *ProctorConfig) error {
	v, ok, err := tb.str("results")
	if err != nil || !ok {
		if err == nil {
			if _, eok, _ := tb.str("expected"); eok {
				return tb.errorf("expected", ErrValue, "given, but results is not set")
			}
		}
		return err
	}
	if v != ResultsJUnit && v != ResultsGoTestJSON && v != ResultsCTRF {
		return tb.errorf("results", ErrUnknownValue, "unknown value %q (want %q, %q or %q)", v, ResultsJUnit, ResultsGoTestJSON, ResultsCTRF)
	}
	c.Results = v
	rel := DefaultExpected
	if e, eok, err := tb.str("expected"); err != nil {
		return err
	} else if eok {
		rel = e
	}
	if !strings.HasPrefix(filepath.ToSlash(filepath.Clean(rel)), "tests/") {
		return tb.errorf("expected", ErrValue, "%q must lie under tests/, which the agent never sees", rel)
	}
	p, err := l.requireFile(rel)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return &Error{File: p, Err: err}
	}
	var e Expected
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return &Error{File: p, Err: fmt.Errorf("%w: %v (want {\"fail_to_pass\": [...], \"pass_to_pass\": [...]})", ErrValue, err)}
	}
	n := len(e.FailToPass) + len(e.PassToPass)
	if n == 0 {
		return &Error{File: p, Err: fmt.Errorf("%w: no test ids: a report could never resolve it", ErrValue)}
	}
	if n > maxExpected {
		return &Error{File: p, Err: fmt.Errorf("%w: %d test ids, more than %d", ErrValue, n, maxExpected)}
	}
	for i, id := range append(append([]string(nil), e.FailToPass...), e.PassToPass...) {
		if strings.TrimSpace(id) == "" || strings.IndexByte(id, 0) >= 0 {
			return &Error{File: p, Err: fmt.Errorf("%w: test id %d is empty or holds a NUL byte", ErrValue, i)}
		}
	}
	c.Expected = &e
	return nil
}

package grade

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ParseGoTestJSON parses the event stream `go test -json` writes (one JSON
// object a line, as cmd/test2json documents). Only terminal events for a
// test count: Action "pass", "fail" or "skip" with a non-empty Test give
// passed, failed or skipped. Each is recorded under two ids:
//
//   - "Package/Test" (primary), e.g. "example.com/m/pkg/TestX/sub" for the
//     subtest "sub" of TestX; just Test when the event has no Package;
//   - Test alone (alias), e.g. "TestX/sub". The same name in two packages
//     shares this id, which then holds the worse outcome.
//
// Results.Packages lists every package that reported a test.
//
// An Action "fail" with no Test (the package failed: a build failure, a
// panic, an os.Exit, a timeout) records the Package itself as error. Output,
// run, pause, cont, start, build-output and build-fail events, package-level
// pass and skip, and actions this parser does not know (newer Go versions add
// some) are ignored. A test that started but has no terminal event (its
// binary died) is not recorded, so an expectation naming it finds it missing.
//
// The stream is hostile: ParseGoTestJSON reads at most limit bytes (limit
// <= 0 means DefaultReportLimit) and fails with ErrReportTooLarge beyond,
// refuses more than MaxTests terminal test events, and fails with an error
// naming the line on a line that is not a JSON object with a string Action.
// Blank lines are skipped. An empty stream is an error.
func ParseGoTestJSON(r io.Reader, limit int64) (*Results, error) {
	res, err := parseGoTestJSON(newLimitReader(r, limit))
	if err != nil {
		if errors.Is(err, ErrReportTooLarge) || errors.Is(err, ErrTooManyTests) {
			return nil, fmt.Errorf("parsing go test -json output: %w", err)
		}
		return nil, fmt.Errorf("parsing go test -json output: %w: %w", ErrMalformedReport, err)
	}
	return res, nil
}

// testEvent is the part of cmd/test2json's TestEvent this parser reads.
type testEvent struct {
	Action  *string
	Package string
	Test    string
}

func parseGoTestJSON(r io.Reader) (*Results, error) {
	br := bufio.NewReader(r)
	res := newResults(SourceGoTestJSON)
	events := 0
	for n := 1; ; n++ {
		// The limit reader bounds the line; ReadBytes grows as needed.
		lineBytes, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, err
		}
		if len(bytes.TrimSpace(lineBytes)) > 0 {
			events++
			if perr := parseEvent(res, lineBytes); perr != nil {
				return nil, fmt.Errorf("line %d: %w", n, perr)
			}
		}
		if err == io.EOF {
			break
		}
	}
	if events == 0 {
		return nil, errors.New("no events (empty report)")
	}
	return res.finish(), nil
}

func parseEvent(res *Results, line []byte) error {
	var ev testEvent
	if err := json.Unmarshal(line, &ev); err != nil {
		return fmt.Errorf("not a test2json event: %w", err)
	}
	if ev.Action == nil {
		return errors.New(`not a test2json event: no "Action"`)
	}
	var o Outcome
	switch *ev.Action {
	case "pass":
		o = Passed
	case "fail":
		o = Failed
	case "skip":
		o = Skipped
	default:
		return nil
	}
	if ev.Test == "" {
		if o == Failed && ev.Package != "" {
			return res.record(ev.Package, Error)
		}
		return nil
	}
	if ev.Package == "" {
		return res.record(ev.Test, o)
	}
	res.notePackage(ev.Package)
	return res.record(ev.Package+"/"+ev.Test, o, ev.Test)
}

package grade

import (
	"fmt"
	"strings"
)

// Expectation is what a SWE-bench-style task expects of the test report.
type Expectation struct {
	FailToPass []string // tests the fix must make pass (FAIL_TO_PASS)
	PassToPass []string // tests that must keep passing (PASS_TO_PASS)
	// Tripwire, when not empty, is the id of a test that always fails
	// (the grader plants it); it MUST be reported failed or error.
	Tripwire string
}

// Decision is Decide's verdict. It is a plain value the caller owns.
type Decision struct {
	Resolved   bool
	Missing    []string // expected ids not in the report, in expectation order
	Failed     []string // expected ids reported but not passed, in expectation order
	TripwireOK bool     // the tripwire was reported failed or error; true when there is no tripwire
	Tampered   bool     // the tripwire was reported passed or skipped, or not at all
	Reason     string   // one line for a person
}

// Decide applies SWE-bench's resolution rule, hardened, to a parsed report.
//
// Resolved is true if and only if all of these hold:
//
//   - the expectation names at least one test (FAIL_TO_PASS or PASS_TO_PASS);
//   - every FAIL_TO_PASS and every PASS_TO_PASS id is reported "passed"
//     (SWE-bench's rule); an id reported anything else is listed in Failed;
//   - every expected id is present in the report: a missing id is a failure,
//     listed in Missing (and not in Failed);
//   - when Tripwire != "", the tripwire is reported and NOT passed: it is
//     "failed" or "error" (TripwireOK).
//
// A tripwire reported anything but failed or error (passed, skipped), or not
// reported at all, means the result channel was tampered with (a conftest
// hook forcing outcomes or skips, a patched reporter, an early exit that
// skipped the rest of the run): the tripwire is a plain failing test with no
// marker, so nothing honest skips it. Tampered is true, Resolved is false
// and Reason says so.
//
// Ids match by exact string comparison against the ids the parser recorded,
// which hold both forms (see ParseJUnit and ParseGoTestJSON). A nil res is an
// empty report.
func Decide(res *Results, e Expectation) Decision {
	var tests map[string]Outcome
	if res != nil {
		tests = res.Tests
	}
	var d Decision
	seen := make(map[string]bool)
	for _, id := range append(append([]string(nil), e.FailToPass...), e.PassToPass...) {
		if seen[id] {
			continue
		}
		seen[id] = true
		o, ok := tests[id]
		switch {
		case !ok:
			d.Missing = append(d.Missing, id)
		case o != Passed:
			d.Failed = append(d.Failed, id)
		}
	}
	d.TripwireOK = true
	var tripReason string
	if e.Tripwire != "" {
		o, ok := tests[e.Tripwire]
		d.TripwireOK = ok && (o == Failed || o == Error)
		switch {
		case !ok:
			d.Tampered = true
			tripReason = fmt.Sprintf("the result channel was tampered with: the tripwire %q, which always fails, is missing from the report", e.Tripwire)
		case o == Passed:
			d.Tampered = true
			tripReason = fmt.Sprintf("the result channel was tampered with: the tripwire %q, which always fails, was reported passed", e.Tripwire)
		case !d.TripwireOK:
			d.Tampered = true
			tripReason = fmt.Sprintf("the result channel was tampered with: the tripwire %q, which always fails, was reported %s", e.Tripwire, o)
		}
	}
	var why []string
	if tripReason != "" {
		why = append(why, tripReason)
	}
	if len(seen) == 0 {
		why = append(why, "the expectation names no tests")
	}
	if len(d.Missing) > 0 {
		why = append(why, fmt.Sprintf("%d expected test(s) missing from the report (first %q)", len(d.Missing), d.Missing[0]))
	}
	if len(d.Failed) > 0 {
		why = append(why, fmt.Sprintf("%d expected test(s) not passed (first %q: %s)", len(d.Failed), d.Failed[0], tests[d.Failed[0]]))
	}
	d.Resolved = len(why) == 0
	if d.Resolved {
		d.Reason = fmt.Sprintf("resolved: all %d expected tests passed", len(seen))
		if e.Tripwire != "" {
			d.Reason += " and the tripwire failed"
		}
	} else {
		d.Reason = "not resolved: " + strings.Join(why, "; ")
	}
	return d
}

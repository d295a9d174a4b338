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
	// (the grader plants it); it MUST be reported failed or error. For a
	// report with Packages (go test -json), Tripwire is the test's name and
	// it MUST be reported so in every one of them, as "PACKAGE/Tripwire".
	Tripwire string
}

// Decision is Decide's verdict. It is a plain value the caller owns.
type Decision struct {
	Resolved   bool
	Missing    []string // expected ids not in the report, in expectation order
	Failed     []string // expected ids reported but not passed, in expectation order
	TripwireOK bool     // the tripwire was reported failed or error; true when there is no tripwire
	// TripwireReported: the tripwire is in the report (in every package
	// of one with Packages); true when there is no tripwire. A caller can
	// tell a run that died before it reached the tripwire from one whose
	// report was forced.
	TripwireReported bool
	Tampered         bool   // the tripwire was reported passed or skipped, or not at all
	Reason           string // one line for a person
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
//     "failed" or "error" (TripwireOK). When the report has Packages, this
//     must hold in each package: a package that reported any test and not
//     its tripwire, or reported it passed, is tampered with even when the
//     others failed theirs (the alias id, which keeps the worst outcome,
//     would hide it).
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
	d.TripwireOK, d.TripwireReported = true, true
	var tripReason string
	if e.Tripwire != "" {
		o, ok, where := tripwireOutcome(res, e.Tripwire)
		d.TripwireReported = ok
		d.TripwireOK = ok && (o == Failed || o == Error)
		switch {
		case !ok:
			d.Tampered = true
			tripReason = fmt.Sprintf("the result channel was tampered with: the tripwire %q, which always fails, is missing from the report%s", e.Tripwire, where)
		case o == Passed:
			d.Tampered = true
			tripReason = fmt.Sprintf("the result channel was tampered with: the tripwire %q, which always fails, was reported passed%s", e.Tripwire, where)
		case !d.TripwireOK:
			d.Tampered = true
			tripReason = fmt.Sprintf("the result channel was tampered with: the tripwire %q, which always fails, was reported %s%s", e.Tripwire, o, where)
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

// tripwireOutcome is what the report says of the tripwire: its outcome
// under id, or, for a report with Packages, the least failing of its
// outcomes in each package (ok false when one lacks it), with where naming
// the package that decided it.
func tripwireOutcome(res *Results, id string) (o Outcome, ok bool, where string) {
	if res == nil {
		return "", false, ""
	}
	if len(res.Packages) == 0 {
		o, ok = res.Tests[id]
		return o, ok, ""
	}
	o, ok = Error, true
	for _, p := range res.Packages {
		po, pok := res.Tests[p+"/"+id]
		if !pok {
			return "", false, fmt.Sprintf(" of package %q", p)
		}
		if po.severity() < o.severity() {
			o, where = po, fmt.Sprintf(" in package %q", p)
		}
	}
	if o == Failed || o == Error {
		where = ""
	}
	return o, true, where
}

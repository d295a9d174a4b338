package trial

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/grade"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/task"
)

// Where a grader with structured results finds the harness's tripwire, and
// writes its report (under VerifierLogs): results.xml (JUnit),
// results.json (go test -json) or ctrf.json (CTRF).
const TripwirePath = "/proctor/tripwire"

// resultsFile is the report's name for a format.
func resultsFile(format string) string {
	switch format {
	case task.ResultsGoTestJSON:
		return "results.json"
	case task.ResultsCTRF:
		return grade.CTRFFile
	}
	return "results.xml"
}

// ViolationTamperedResults: the grader's report said the harness's
// tripwire, a test that always fails, did not fail (or said nothing of it):
// something the agent left forced the outcomes.
const ViolationTamperedResults = "tampered_results"

// maxReport bounds the report read.
const maxReport = 64 << 20

// ResultsRef is what the structured report decided (tasks with [proctor]
// results).
type ResultsRef struct {
	Format     string   `json:"format"`
	Resolved   bool     `json:"resolved"`
	Missing    []string `json:"missing"` // expected test ids the report does not hold
	Failed     []string `json:"failed"`  // expected test ids not reported passed
	TripwireOK bool     `json:"tripwire_ok"`
	Tampered   bool     `json:"tampered"`
	Reason     string   `json:"reason,omitempty"`
	// Outcomes is what the report said of each expected test id (passed,
	// skipped, failed, error, or missing): what a repeated grading compares.
	Outcomes map[string]string `json:"outcomes"`
}

// tripwire is a test the harness adds to a grader run: it always fails, so a
// report that says otherwise was forced.
type tripwire struct {
	hostDir string // bound read-only at TripwirePath
	name    string // the test function, random per run
	file    string // its path inside the grader sandbox
}

// plantTripwire writes the tripwire for format into dir: for JUnit
// (pytest) a test file with one always-failing test under a random name;
// for go test -json an always-failing test function, without its package
// clause, for the test script to add to the package under test.
func plantTripwire(dir, format string) (*tripwire, error) {
	// Random names with no fixed part but what the test runner needs
	// ("test_", "Test"), so code that forces outcomes cannot spare the
	// tripwire by its name alone.
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	hostDir := filepath.Join(dir, "tripwire")
	if err := os.Mkdir(hostDir, 0o755); err != nil {
		return nil, fmt.Errorf("planting the tripwire: %w", err)
	}
	var name, file, src string
	switch format {
	case task.ResultsGoTestJSON:
		name = "Test" + strings.ToUpper(hex.EncodeToString(b[:8]))
		file = "z" + hex.EncodeToString(b[8:]) + "_test.go.part"
		src = "\n// Planted by the harness: this test always fails. A report that says\n" +
			"// otherwise was forced.\n\nimport \"testing\"\n\nfunc " + name + "(t *testing.T) {\n\tt.Fatal(\"proctor tripwire: always fails\")\n}\n"
	default:
		name = "test_" + hex.EncodeToString(b[:8])
		file = "test_" + hex.EncodeToString(b[8:]) + ".py"
		src = "# Planted by the harness: this test always fails. A report that says\n" +
			"# otherwise was forced.\n\n\ndef " + name + "():\n    assert False, \"proctor tripwire: always fails\"\n"
	}
	if err := os.WriteFile(filepath.Join(hostDir, file), []byte(src), 0o444); err != nil {
		return nil, fmt.Errorf("planting the tripwire: %w", err)
	}
	return &tripwire{hostDir: hostDir, name: name, file: TripwirePath + "/" + file}, nil
}

// graderResultsSetup returns the binds and environment a grader with
// structured results gets.
func (r *runner) graderResultsSetup(s *scratch) (*tripwire, []sandbox.Bind, []string, error) {
	if r.o.Task.Proctor.Results == "" {
		return nil, nil, nil, nil
	}
	tw, err := plantTripwire(s.dir, r.o.Task.Proctor.Results)
	if err != nil {
		return nil, nil, nil, err
	}
	return tw, []sandbox.Bind{{Src: tw.hostDir, Dst: TripwirePath}},
		[]string{"PROCTOR_RESULTS=" + VerifierLogs + "/" + resultsFile(r.o.Task.Proctor.Results), "PROCTOR_TRIPWIRE=" + tw.file}, nil
}

// judgeResults reads the grader's report from the results directory and
// decides the reward, SWE-bench's way: 1 when resolved, else 0. The test
// script exits with the test runner's status (exit), which must agree with
// the tripwire: it always fails, so a run that reports it passed or
// skipped, or exits 0 (with the tripwire failed, or never reached), was
// forced, and that is a violation. A run that ended in error before it
// reached the tripwire is only not resolved.
func (r *runner) judgeResults(resultsDir string, tw *tripwire, exit int) error {
	t := r.o.Task
	dirfd, err := unix.Open(resultsDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("grader: %w", err)
	}
	defer unix.Close(dirfd)
	ref := &ResultsRef{Format: t.Proctor.Results, Missing: []string{}, Failed: []string{}, Outcomes: map[string]string{}}
	r.v.Results = ref
	var res *grade.Results
	name := resultsFile(t.Proctor.Results)
	f, err := openRegularAt(dirfd, name)
	switch {
	case errors.Is(err, unix.ENOENT):
		res = &grade.Results{Tests: map[string]grade.Outcome{}} // no report: everything missing
	case err != nil:
		return fmt.Errorf("grader: %s/%s: %w", VerifierLogs, name, err)
	default:
		switch t.Proctor.Results {
		case task.ResultsGoTestJSON:
			res, err = grade.ParseGoTestJSON(f, maxReport)
		case task.ResultsCTRF:
			res, err = grade.ParseCTRF(f, maxReport)
		default:
			res, err = grade.ParseJUnit(f, maxReport)
		}
		f.Close()
		if err != nil {
			// A report the grader cannot read is no pass; keep the reason.
			ref.Reason = err.Error()
			r.v.Tests = &TestsRef{Format: t.Proctor.Results, File: VerifierLogs + "/" + name,
				Outcomes: map[string]string{}, Error: fmt.Sprintf("%s/%s: %v", VerifierLogs, name, err)}
			res = &grade.Results{Tests: map[string]grade.Outcome{}}
		} else {
			r.v.Tests = newTestsRef(t.Proctor.Results, VerifierLogs+"/"+name, res, tw)
		}
	}
	e := grade.Expectation{FailToPass: t.Proctor.Expected.FailToPass, PassToPass: t.Proctor.Expected.PassToPass, Tripwire: tripwireID(res, tw.name)}
	d := grade.Decide(res, e)
	switch {
	case !d.TripwireReported && exit != 0:
		// The run ended before it reached the tripwire (a crash, a
		// collection error): no pass, and no sign of forcing.
		d.Tampered = false
		d.Reason = fmt.Sprintf("not resolved: the test run exited %d before it reported the tripwire", exit)
	case d.TripwireOK && exit == 0:
		// A failing test and an exit status of 0: the status was forced.
		d.Tampered, d.Resolved = true, false
		d.Reason = "not resolved: the result channel was tampered with: the test run exited 0 with the tripwire failed"
	}
	ref.Resolved, ref.TripwireOK, ref.Tampered = d.Resolved, d.TripwireOK, d.Tampered
	for _, id := range append(append([]string(nil), e.FailToPass...), e.PassToPass...) {
		o, ok := res.Tests[id]
		if !ok {
			o = "missing"
		}
		ref.Outcomes[id] = string(o)
	}
	ref.Missing = append(ref.Missing, d.Missing...)
	ref.Failed = append(ref.Failed, d.Failed...)
	if ref.Reason == "" {
		ref.Reason = strings.ReplaceAll(d.Reason, tw.name, "<tripwire>")
	}
	r.v.Reward = 0
	if d.Resolved {
		r.v.Reward = 1
	}
	if d.Tampered {
		vi := Violation{Kind: ViolationTamperedResults, Path: VerifierLogs + "/" + name,
			Detail: "the harness's tripwire, a test that always fails, was not reported failed: the result channel was forced"}
		r.v.Violations = append(r.v.Violations, vi)
		r.event("violation", detail("kind", vi.Kind, "path", vi.Path, "detail", vi.Detail))
		r.say("violation: %s %q: %q", vi.Kind, vi.Path, vi.Detail)
	}
	r.event("results", detail("resolved", d.Resolved, "missing", len(d.Missing), "failed", len(d.Failed),
		"tripwire_ok", d.TripwireOK, "tampered", d.Tampered))
	r.event("reward", detail("value", r.v.Reward, "file", name))
	r.say("results: resolved=%t (%d missing, %d not passed), reward %g", d.Resolved, len(d.Missing), len(d.Failed), r.v.Reward)
	return nil
}

// tripwireID is the id under which the report holds the tripwire test (its
// name is random, so any id ending in it is it), or the bare name.
func tripwireID(res *grade.Results, name string) string {
	if len(res.Packages) > 0 {
		return name // go test -json: Decide checks PACKAGE/name in each package
	}
	for id := range res.Tests {
		if id == name || strings.HasSuffix(id, "::"+name) || strings.HasSuffix(id, "."+name) {
			return id
		}
	}
	return name
}

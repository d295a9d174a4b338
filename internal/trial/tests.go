package trial

import (
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/grade"
	"github.com/proctor-sandbox/proctor/internal/task"
)

// MaxVerdictTests caps the tests a verdict lists by name (TestsRef.Outcomes);
// the rest are counted, in Counts and LeftOut.
const MaxVerdictTests = 10_000

// informationalNote is what a verdict says of per-test results read from a
// CTRF report the task did not make its results channel.
const informationalNote = "informational: read from " + VerifierLogs + "/" + grade.CTRFFile +
	", which the verifier and any code it ran (the agent's too) could write; the reward came from the reward file," +
	" not from these results; set [proctor] results = \"ctrf\" for per-test results that decide, checked by a tripwire"

// TestsRef is what the grader's test report said of each test it named.
//
// With [proctor] results, the report is the structured results channel:
// Results holds its decision (the expected tests, the tripwire) and
// Informational is false. Without it, a CTRF report the verifier left in
// /logs/verifier (ctrf.json, as Terminal-Bench 2 verifiers write with
// pytest --ctrf) is read as well, Informational is true and Note says why:
// the reward came from the reward file as Harbor reads it, and the
// outcomes, which the agent's code run by the verifier could have written,
// decide nothing.
type TestsRef struct {
	Format        string `json:"format"` // "junit", "go-test-json" or "ctrf"
	File          string `json:"file"`   // where the grader wrote it, inside its sandbox
	Informational bool   `json:"informational"`
	Note          string `json:"note,omitempty"`
	Tool          string `json:"tool,omitempty"` // what wrote the report, where it says (CTRF's results.tool)
	// Outcomes maps each test the report named (by its primary id; see
	// internal/grade) to passed, skipped, failed or error, sorted by id up
	// to MaxVerdictTests. The harness's tripwire is listed as
	// "<tripwire>", since its name is random.
	Outcomes map[string]string `json:"outcomes"`
	Counts   TestCounts        `json:"counts"`
	LeftOut  int               `json:"left_out,omitempty"` // tests counted but not listed
	// Error says why a report that was there could not be read (it is then
	// no report: Outcomes is empty).
	Error string `json:"error,omitempty"`
}

// TestCounts counts a report's tests by outcome.
type TestCounts struct {
	Passed  int `json:"passed"`
	Skipped int `json:"skipped"`
	Failed  int `json:"failed"`
	Error   int `json:"error"`
}

// newTestsRef summarises res, renaming the tripwire tw (nil for none).
func newTestsRef(format, file string, res *grade.Results, tw *tripwire) *TestsRef {
	ref := &TestsRef{Format: format, File: file, Tool: res.Tool, Outcomes: map[string]string{}}
	ids := slices.Sorted(maps.Keys(res.Reported))
	for _, id := range ids {
		o := res.Reported[id]
		switch o {
		case grade.Passed:
			ref.Counts.Passed++
		case grade.Skipped:
			ref.Counts.Skipped++
		case grade.Failed:
			ref.Counts.Failed++
		default:
			ref.Counts.Error++
		}
		if len(ref.Outcomes) >= MaxVerdictTests {
			ref.LeftOut++
			continue
		}
		ref.Outcomes[tw.rename(id)] = string(o)
	}
	return ref
}

// rename replaces the tripwire's random names in a test id.
func (tw *tripwire) rename(id string) string {
	if tw == nil {
		return id
	}
	id = strings.ReplaceAll(id, tw.name, "<tripwire>")
	if base := strings.TrimSuffix(path.Base(tw.file), ".part"); base != "" {
		id = strings.ReplaceAll(id, base, "<tripwire>"+path.Ext(base))
	}
	return id
}

// readInformationalCTRF reads a CTRF report the verifier left in the
// results directory of a task without [proctor] results into the verdict's
// Tests. It decides nothing, and never fails the trial: a report that is
// absent is no Tests; one that cannot be read is a Tests with its Error.
func (r *runner) readInformationalCTRF(resultsDir string) {
	dirfd, err := unix.Open(resultsDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return // ReadReward, next, reports it
	}
	defer unix.Close(dirfd)
	f, err := openRegularAt(dirfd, grade.CTRFFile)
	if errors.Is(err, unix.ENOENT) {
		return
	}
	file := VerifierLogs + "/" + grade.CTRFFile
	var res *grade.Results
	if err == nil {
		res, err = grade.ParseCTRF(f, maxReport)
		f.Close()
	} else if errors.Is(err, unix.ELOOP) {
		err = errors.New("is a symlink: refused")
	}
	if err != nil {
		r.v.Tests = &TestsRef{Format: task.ResultsCTRF, File: file, Informational: true, Note: informationalNote,
			Outcomes: map[string]string{}, Error: fmt.Sprintf("%s: %v", file, err)}
		r.say("tests: %s could not be read (informational): %v", file, err)
		return
	}
	r.v.Tests = newTestsRef(task.ResultsCTRF, file, res, nil)
	r.v.Tests.Informational, r.v.Tests.Note = true, informationalNote
	c := r.v.Tests.Counts
	r.say("tests (informational, from %s): %d passed, %d failed, %d skipped, %d error", file, c.Passed, c.Failed, c.Skipped, c.Error)
}

// TestOutcomes is every per-test outcome the verdict holds: each test its
// report named (Tests) and each expected test of its structured results,
// "missing" where the report did not name it (Results); nil without a
// report.
func (v *Verdict) TestOutcomes() map[string]string {
	if v.Tests == nil && v.Results == nil {
		return nil
	}
	out := map[string]string{}
	if v.Tests != nil {
		maps.Copy(out, v.Tests.Outcomes)
	}
	if v.Results != nil {
		maps.Copy(out, v.Results.Outcomes)
	}
	return out
}

package trial

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/grade"
	"github.com/proctor-sandbox/proctor/internal/task"
)

// tb2CTRF is a ctrf.json as pytest-json-ctrf 0.3.5 writes it for a
// Terminal-Bench 2 task.
func tb2CTRF(outcomes ...string) string {
	var tests []string
	n := map[string]int{}
	for i, o := range outcomes {
		n[o]++
		tests = append(tests, fmt.Sprintf(`{"name": "test_outputs.py::test_%d", "status": %q, "duration": 0.0012, "start": 1784212044.48, "stop": 1784212044.49, "retries": 0, "file_path": "test_outputs.py"}`, i, o))
	}
	return fmt.Sprintf(`{"results": {"tool": {"name": "pytest", "version": "8.4.1"}, "summary": {"tests": %d, "passed": %d, "failed": %d, "skipped": %d, "pending": 0, "other": 0, "start": 1784212044.45, "stop": 1784212044.49}, "tests": [%s]}}`,
		len(outcomes), n["passed"], n["failed"], n["skipped"], strings.Join(tests, ", "))
}

// TestInformationalCTRF: a task without [proctor] results whose verifier
// left ctrf.json gets its per-test outcomes in the verdict, marked
// informational; a malformed or linked report is an error there, never a
// failed trial; no report is no Tests.
func TestInformationalCTRF(t *testing.T) {
	for _, tc := range []struct {
		name     string
		make     func(dir string) error
		outcomes map[string]string
		err      string
	}{
		{"none", func(string) error { return nil }, nil, ""},
		{"pytest-json-ctrf", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, grade.CTRFFile), []byte(tb2CTRF("passed", "failed", "skipped")), 0o644)
		}, map[string]string{"test_outputs.py::test_0": "passed", "test_outputs.py::test_1": "failed", "test_outputs.py::test_2": "skipped"}, ""},
		{"truncated", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, grade.CTRFFile), []byte(tb2CTRF("passed")[:80]), 0o644)
		}, map[string]string{}, "/logs/verifier/ctrf.json: parsing CTRF JSON: malformed test report: truncated"},
		{"symlink", func(dir string) error {
			return os.Symlink("/etc/passwd", filepath.Join(dir, grade.CTRFFile))
		}, map[string]string{}, "/logs/verifier/ctrf.json: is a symlink: refused"},
		{"directory", func(dir string) error {
			return os.Mkdir(filepath.Join(dir, grade.CTRFFile), 0o755)
		}, map[string]string{}, "/logs/verifier/ctrf.json: not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := tc.make(dir); err != nil {
				t.Fatal(err)
			}
			r := &runner{v: &Verdict{}}
			r.readInformationalCTRF(dir)
			got := r.v.Tests
			if tc.outcomes == nil {
				if got != nil {
					t.Fatalf("Tests = %+v, want none", got)
				}
				return
			}
			if got == nil {
				t.Fatal("no Tests")
			}
			if !got.Informational || !strings.Contains(got.Note, "informational") || got.Format != task.ResultsCTRF || got.File != "/logs/verifier/ctrf.json" {
				t.Errorf("Tests = %+v: want it informational, saying so", got)
			}
			if fmt.Sprint(got.Outcomes) != fmt.Sprint(tc.outcomes) {
				t.Errorf("Outcomes = %v, want %v", got.Outcomes, tc.outcomes)
			}
			if !strings.HasPrefix(got.Error, tc.err) || (tc.err == "") != (got.Error == "") {
				t.Errorf("Error = %q, want %q", got.Error, tc.err)
			}
			if r.v.Reward != 0 || len(r.v.Violations) != 0 || r.v.Error != "" {
				t.Errorf("an informational report changed the verdict: %+v", r.v)
			}
		})
	}
}

// TestTestsRef: the tripwire's random names are replaced, so that two runs
// list it alike; tests past MaxVerdictTests are counted, not listed.
func TestTestsRef(t *testing.T) {
	tw := &tripwire{name: "test_0a1b2c3d4e5f6071", file: TripwirePath + "/test_1f2e3d4c5b6a7988.py"}
	doc := `{"results": {"tool": {"name": "pytest", "version": "8.4.1"}, "summary": {"tests": 2, "passed": 1, "failed": 1, "skipped": 0, "pending": 0, "other": 0},
	  "tests": [{"name": "../proctor/tripwire/test_1f2e3d4c5b6a7988.py::test_0a1b2c3d4e5f6071", "status": "failed"}, {"name": "tests/t.py::test_a", "status": "passed"}]}}`
	res, err := grade.ParseCTRF(strings.NewReader(doc), 0)
	if err != nil {
		t.Fatal(err)
	}
	ref := newTestsRef(task.ResultsCTRF, "/logs/verifier/ctrf.json", res, tw)
	want := map[string]string{"../proctor/tripwire/<tripwire>.py::<tripwire>": "failed", "tests/t.py::test_a": "passed"}
	if fmt.Sprint(ref.Outcomes) != fmt.Sprint(want) || ref.Counts != (TestCounts{Passed: 1, Failed: 1}) || ref.Tool != "pytest 8.4.1" {
		t.Errorf("ref = %+v", ref)
	}

	var b strings.Builder
	n := MaxVerdictTests + 5
	fmt.Fprintf(&b, `{"results": {"tool": {"name": "x"}, "summary": {"tests": %d, "passed": %d, "failed": 0, "skipped": 0, "pending": 0, "other": 0}, "tests": [`, n, n)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name": "t%06d", "status": "passed"}`, i)
	}
	b.WriteString("]}}")
	res, err = grade.ParseCTRF(strings.NewReader(b.String()), 0)
	if err != nil {
		t.Fatal(err)
	}
	ref = newTestsRef(task.ResultsCTRF, "f", res, nil)
	if len(ref.Outcomes) != MaxVerdictTests || ref.LeftOut != 5 || ref.Counts.Passed != n {
		t.Errorf("%d listed, %d left out, %d passed", len(ref.Outcomes), ref.LeftOut, ref.Counts.Passed)
	}
	if _, ok := ref.Outcomes["t010004"]; ok {
		t.Error("the tests listed are not the first by id")
	}
}

// TestChangesPerTest: validate --repeat and regrade compare every test a
// report named, informational CTRF outcomes included.
func TestChangesPerTest(t *testing.T) {
	v := func(tests map[string]string) *Verdict {
		return &Verdict{Status: StatusClean, Tests: &TestsRef{Informational: true, Outcomes: tests}}
	}
	runs := []*Verdict{
		v(map[string]string{"t::a": "passed", "t::b": "passed"}),
		v(map[string]string{"t::a": "passed", "t::b": "failed"}),
		{Status: StatusClean},
	}
	want := []string{"test t::a: [passed passed no report]", "test t::b: [passed failed no report]"}
	if c := Changes(runs); !slices.Equal(c, want) {
		t.Errorf("Changes = %q, want %q", c, want)
	}
	if c := Changes(runs[:1]); c != nil {
		t.Errorf("one run: %q", c)
	}
	// A structured report's expected tests ("missing" where not named) and
	// the rest of its tests together, each once.
	s := func(tests, expected map[string]string) *Verdict {
		return &Verdict{Status: StatusClean, Tests: &TestsRef{Outcomes: tests}, Results: &ResultsRef{Outcomes: expected}}
	}
	runs = []*Verdict{
		s(map[string]string{"t::a": "passed", "t::c": "passed"}, map[string]string{"t::a": "passed", "t::x": "missing"}),
		s(map[string]string{"t::a": "passed", "t::c": "error"}, map[string]string{"t::a": "passed", "t::x": "missing"}),
	}
	want = []string{"test t::c: [passed error]"}
	if c := Changes(runs); !slices.Equal(c, want) {
		t.Errorf("Changes = %q, want %q", c, want)
	}
}

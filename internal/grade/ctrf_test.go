package grade

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The vectors in testdata/ctrf are shaped exactly as pytest-json-ctrf
// writes them (json.dump with indent=4, ASCII escapes): tb2-oracle.json and
// tb2-nop.json as pytest 8.4.1 with pytest-json-ctrf 0.3.5 wrote them for a
// Terminal-Bench 2 task's oracle and a do-nothing agent; pytest-shapes.json
// every outcome 0.3.5 writes (skip, xfail, xpass, a setup error, a
// parametrized test collapsed into one entry with retries, xdist workers,
// the harness's tripwire); ctrf-schema.json the schema's own spelling, as
// newer pytest-json-ctrf releases write it.

func readVector(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/ctrf/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseCTRFVectors(t *testing.T) {
	for _, tc := range []struct {
		file string
		tool string
		want map[string]Outcome
	}{
		{"tb2-oracle.json", "pytest 8.4.1", map[string]Outcome{
			"test_outputs.py::test_report_exists":            Passed,
			"test_outputs.py::test_report_valid_json":        Passed,
			"test_outputs.py::test_report_required_fields":   Passed,
			"test_outputs.py::test_report_field_types":       Passed,
			"test_outputs.py::test_report_reasonable_values": Passed,
		}},
		{"tb2-nop.json", "pytest 8.4.1", map[string]Outcome{
			"test_outputs.py::test_report_exists":            Failed,
			"test_outputs.py::test_report_valid_json":        Failed,
			"test_outputs.py::test_report_required_fields":   Failed,
			"test_outputs.py::test_report_field_types":       Failed,
			"test_outputs.py::test_report_reasonable_values": Failed,
		}},
		{"pytest-shapes.json", "pytest 8.4.1", map[string]Outcome{
			"tests/test_calc.py::test_add":                                        Passed,
			"tests/test_calc.py::TestDiv::test_by_zero":                           Failed,
			"tests/test_calc.py::test_windows_only":                               Skipped,
			"tests/test_calc.py::test_known_bug":                                  Skipped,
			"tests/test_calc.py::test_fixed_bug":                                  Passed,
			"tests/test_db.py::test_connect":                                      Failed,
			"tests/test_parse.py::test_split":                                     Passed,
			"tests/test_parse.py::test_ünïcode":                                   Passed,
			"../proctor/tripwire/test_1f2e3d4c5b6a7988.py::test_0a1b2c3d4e5f6071": Failed,
		}},
		{"ctrf-schema.json", "pytest 9.0.3", map[string]Outcome{
			"tests/test_io.py::TestReader::test_read[0]": Passed,
			"tests/test_io.py::TestReader::test_read[1]": Passed,
			"tests/test_io.py::test_write":               Failed,
		}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			res, err := ParseCTRF(bytes.NewReader(readVector(t, tc.file)), 0)
			if err != nil {
				t.Fatal(err)
			}
			if res.Source != SourceCTRF || res.Tool != tc.tool {
				t.Errorf("Source, Tool = %q, %q", res.Source, res.Tool)
			}
			if len(res.Tests) != len(tc.want) || len(res.Reported) != len(tc.want) {
				t.Errorf("%d ids, %d reported, want %d: %v", len(res.Tests), len(res.Reported), len(tc.want), res.Tests)
			}
			for id, o := range tc.want {
				if res.Tests[id] != o || res.Reported[id] != o {
					t.Errorf("%q: %q (reported %q), want %q", id, res.Tests[id], res.Reported[id], o)
				}
			}
		})
	}
}

// TestParseCTRFDecide runs the vectors through Decide, as the harness does
// for a task with [proctor] results = "ctrf": the oracle resolves, the
// do-nothing agent does not, and the tripwire is found by its name.
func TestParseCTRFDecide(t *testing.T) {
	all := []string{"test_outputs.py::test_report_exists", "test_outputs.py::test_report_valid_json"}
	for _, tc := range []struct {
		file     string
		e        Expectation
		resolved bool
		tampered bool
	}{
		{"tb2-oracle.json", Expectation{FailToPass: all}, true, false},
		{"tb2-nop.json", Expectation{FailToPass: all}, false, false},
		{"tb2-oracle.json", Expectation{FailToPass: all, Tripwire: "tests/tripwire.py::test_x"}, false, true},
		{"pytest-shapes.json", Expectation{PassToPass: []string{"tests/test_calc.py::test_add"},
			Tripwire: "../proctor/tripwire/test_1f2e3d4c5b6a7988.py::test_0a1b2c3d4e5f6071"}, true, false},
		{"pytest-shapes.json", Expectation{FailToPass: []string{"tests/test_calc.py::test_known_bug"}}, false, false},
	} {
		res, err := ParseCTRF(bytes.NewReader(readVector(t, tc.file)), 0)
		if err != nil {
			t.Fatal(err)
		}
		d := Decide(res, tc.e)
		if d.Resolved != tc.resolved || d.Tampered != tc.tampered {
			t.Errorf("%s %v: resolved %t, tampered %t (%s)", tc.file, tc.e, d.Resolved, d.Tampered, d.Reason)
		}
	}
}

// TestParseCTRFTruncated cuts each valid vector at every length short of
// its end: every cut is refused as malformed, and none is read as a report.
func TestParseCTRFTruncated(t *testing.T) {
	for _, file := range []string{"tb2-oracle.json", "tb2-nop.json", "pytest-shapes.json", "ctrf-schema.json"} {
		data := bytes.TrimSpace(readVector(t, file))
		for n := 0; n < len(data); n++ {
			res, err := ParseCTRF(bytes.NewReader(data[:n]), 0)
			if err == nil || res != nil || !errors.Is(err, ErrMalformedReport) {
				t.Fatalf("%s cut at %d: %v, %v", file, n, res, err)
			}
		}
	}
	_, err := ParseCTRF(strings.NewReader(`{"results": {"tool": {"name": "pytest"}`), 0)
	if err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("a cut report: %v, want it called truncated", err)
	}
}

// TestParseCTRFTampered: reports edited so that they could read two ways,
// or break the schema, are refused with an error naming the field.
func TestParseCTRFTampered(t *testing.T) {
	valid := string(readVector(t, "tb2-nop.json"))
	first := `"status": "failed"`
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"status twice", strings.Replace(valid, first, first+`, "status": "passed"`, 1), `the key "status" appears twice`},
		{"results twice", `{"results": {}, "results": {}}`, `the key "results" appears twice`},
		{"summary disagrees", strings.Replace(valid, `"passed": 0,`, `"passed": 5,`, 1), "results.summary.passed: 5, but results.tests holds 0"},
		{"a test dropped", strings.Replace(valid, `"tests": 5,`, `"tests": 6,`, 1), "results.summary.tests: 6, but results.tests holds 5"},
		{"status not in CTRF", strings.Replace(valid, first, `"status": "PASSED"`, 1), `results.tests[0].status: "PASSED" is not a CTRF status`},
		{"status a number", strings.Replace(valid, first, `"status": 1`, 1), "results.tests[0].status: want a string, got a number"},
		{"status missing", strings.Replace(valid, first+",", "", 1), "results.tests[0].status: missing"},
		{"name empty", strings.Replace(valid, `"name": "test_outputs.py::test_report_valid_json"`, `"name": " "`, 1), "results.tests[1].name: empty or holds a NUL byte"},
		{"name with NUL", strings.Replace(valid, `"name": "test_outputs.py::test_report_valid_json"`, `"name": "a\u0000b"`, 1), "results.tests[1].name: empty or holds a NUL byte"},
		{"duration negative", strings.Replace(valid, `"duration": 0.0011044209995816345`, `"duration": -1`, 1), "results.tests[0].duration: want a number of 0 or more, got -1"},
		{"retries a string", strings.Replace(valid, `"retries": 0`, `"retries": "0"`, 1), `results.tests[0].retries: want a whole number of 0 or more, got "0"`},
		{"raw_status a list", strings.Replace(valid, `"raw_status": "call_failed"`, `"raw_status": []`, 1), "results.tests[0].raw_status: want a string, got an array"},
		{"tests an object", `{"results": {"tool": {"name": "x"}, "summary": {"tests": 0, "passed": 0, "failed": 0, "skipped": 0, "pending": 0, "other": 0}, "tests": {}}}`, "results.tests: want an array, got an object"},
		{"tests null", `{"results": {"tool": {"name": "x"}, "summary": {"tests": 0, "passed": 0, "failed": 0, "skipped": 0, "pending": 0, "other": 0}, "tests": null}}`, "results.tests: want an array, got null"},
		{"a test not an object", `{"results": {"tool": {"name": "x"}, "summary": {"tests": 1, "passed": 0, "failed": 0, "skipped": 0, "pending": 0, "other": 0}, "tests": ["t"]}}`, "results.tests[0]: want an object, got a string"},
		{"no tool name", strings.Replace(valid, `"name": "pytest",`, "", 1), "results.tool.name: missing"},
		{"count fractional", strings.Replace(valid, `"failed": 5,`, `"failed": 5.5,`, 1), "results.summary.failed: want a whole number of 0 or more, got 5.5"},
		{"no summary", `{"results": {"tool": {"name": "x"}, "tests": []}}`, "results.summary: missing"},
		{"no results", `{"result": {}}`, "results: missing"},
		{"not an object", `[]`, "not a JSON object"},
		{"a second document", valid + `{}`, "more data after the JSON document"},
		{"wrong format", `{"reportFormat": "JUnit", "results": {}}`, `reportFormat: "JUnit", want "CTRF"`},
		{"not JSON", `<testsuites/>`, "not JSON"},
		{"empty", "  \n", "empty report"},
		{"nested too deep", `{"results": ` + strings.Repeat(`[`, 70) + strings.Repeat(`]`, 70) + `}`, "nested deeper than 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := ParseCTRF(strings.NewReader(tc.doc), 0)
			if err == nil || res != nil {
				t.Fatalf("accepted: %v", res)
			}
			if !errors.Is(err, ErrMalformedReport) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want ErrMalformedReport saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

// TestParseCTRFHuge: a report over the size limit and one with more tests
// than MaxTests are refused by their own errors; a long trace within the
// limit is not a problem.
func TestParseCTRFHuge(t *testing.T) {
	valid := readVector(t, "tb2-nop.json")
	_, err := ParseCTRF(bytes.NewReader(valid), int64(len(valid)-1))
	if !errors.Is(err, ErrReportTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := ParseCTRF(bytes.NewReader(valid), int64(len(valid))); err != nil {
		t.Errorf("at the limit: %v", err)
	}
	many := func(n int, trace string) []byte {
		var b bytes.Buffer
		fmt.Fprintf(&b, `{"results": {"tool": {"name": "pytest"}, "summary": {"tests": %d, "passed": %d, "failed": 0, "skipped": 0, "pending": 0, "other": 0}, "tests": [`, n, n)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"name": "t.py::test_%d", "status": "passed", "trace": %q}`, i, trace)
		}
		b.WriteString("]}}")
		return b.Bytes()
	}
	if _, err := ParseCTRF(bytes.NewReader(many(MaxTests+1, "")), 0); !errors.Is(err, ErrTooManyTests) {
		t.Errorf("%d tests: %v", MaxTests+1, err)
	}
	res, err := ParseCTRF(bytes.NewReader(many(3, strings.Repeat("x", 4<<20))), 0)
	if err != nil || len(res.Tests) != 3 {
		t.Errorf("three tests with 4 MiB traces: %v, %v", res, err)
	}
}

// TestParseCTRFDuplicates: a test named twice keeps its worst outcome, and
// is listed.
func TestParseCTRFDuplicates(t *testing.T) {
	doc := `{"results": {"tool": {"name": "x"}, "summary": {"tests": 2, "passed": 1, "failed": 1, "skipped": 0, "pending": 0, "other": 0},
	"tests": [{"name": "a::t", "status": "failed"}, {"name": "a::t", "status": "passed"}]}}`
	res, err := ParseCTRF(strings.NewReader(doc), 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Tests["a::t"] != Failed || res.Reported["a::t"] != Failed || len(res.Duplicates) != 1 {
		t.Errorf("%v %v %v", res.Tests, res.Reported, res.Duplicates)
	}
	// other: pytest-json-ctrf 0.3 writes summary.other as 0 whatever its tests say.
	doc = `{"results": {"tool": {"name": "x"}, "summary": {"tests": 1, "passed": 0, "failed": 0, "skipped": 0, "pending": 0, "other": 0},
	"tests": [{"name": "a::t", "status": "other"}]}}`
	if res, err := ParseCTRF(strings.NewReader(doc), 0); err != nil || res.Tests["a::t"] != Error {
		t.Errorf("other: %v, %v", res, err)
	}
}

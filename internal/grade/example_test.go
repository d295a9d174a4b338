package grade_test

import (
	"fmt"
	"strings"

	"github.com/proctor-sandbox/proctor/internal/grade"
)

func ExampleDecide() {
	report := `<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_calc.TestDiv" name="test_by_zero[1-0]"/>
<testcase classname="tests.test_calc" name="test_add"/>
<testcase classname="tests.test_tripwire" name="test_tripwire"><failure message="always fails"/></testcase>
</testsuite></testsuites>`
	res, err := grade.ParseJUnit(strings.NewReader(report), 1<<20)
	if err != nil {
		fmt.Println(err)
		return
	}
	d := grade.Decide(res, grade.Expectation{
		FailToPass: []string{"tests/test_calc.py::TestDiv::test_by_zero[1-0]"},
		PassToPass: []string{"tests.test_calc.test_add"}, // the raw form matches too
		Tripwire:   "tests/test_tripwire.py::test_tripwire",
	})
	fmt.Println(d.Reason)
	// Output: resolved: all 2 expected tests passed and the tripwire failed
}

func ExampleParseCTRF() {
	// ctrf.json as pytest 8.4.1 with pytest-json-ctrf 0.3.5 writes it
	// (pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py).
	report := `{"results": {
    "tool": {"name": "pytest", "version": "8.4.1"},
    "summary": {"tests": 2, "passed": 1, "failed": 1, "skipped": 0, "pending": 0, "other": 0,
                "start": 1784212054.96, "stop": 1784212055.07},
    "tests": [
        {"name": "test_outputs.py::test_report_exists", "status": "passed", "duration": 0.0012,
         "retries": 0, "file_path": "test_outputs.py"},
        {"name": "test_outputs.py::test_report_total", "status": "failed", "raw_status": "call_failed",
         "duration": 0.0009, "retries": 0, "file_path": "test_outputs.py",
         "message": "The test failed in the call phase due to an assertion error"}]}}`
	res, err := grade.ParseCTRF(strings.NewReader(report), 1<<20)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.Tool, res.Tests["test_outputs.py::test_report_exists"], res.Tests["test_outputs.py::test_report_total"])
	_, err = grade.ParseCTRF(strings.NewReader(strings.Replace(report, `"status": "failed"`, `"status": "failed", "status": "passed"`, 1)), 1<<20)
	fmt.Println(err)
	// Output:
	// pytest 8.4.1 passed failed
	// parsing CTRF JSON: malformed test report: the key "status" appears twice in one object (at byte 474)
}

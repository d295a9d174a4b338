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

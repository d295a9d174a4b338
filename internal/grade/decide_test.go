package grade

import (
	"os"
	"slices"
	"strings"
	"testing"
)

func TestDecide(t *testing.T) {
	report := func(kv ...string) *Results {
		r := &Results{Tests: map[string]Outcome{}}
		for i := 0; i < len(kv); i += 2 {
			r.Tests[kv[i]] = Outcome(kv[i+1])
		}
		return r
	}
	const tw = "tests/test_tripwire.py::test_tripwire"
	cases := []struct {
		name       string
		res        *Results
		e          Expectation
		resolved   bool
		tampered   bool
		tripwireOK bool
		missing    []string
		failed     []string
		reason     string
	}{
		{"all passed, no tripwire", report("a", "passed", "b", "passed"),
			Expectation{FailToPass: []string{"a"}, PassToPass: []string{"b"}}, true, false, true, nil, nil, "resolved"},
		{"all passed, tripwire failed", report("a", "passed", "b", "passed", tw, "failed"),
			Expectation{FailToPass: []string{"a"}, PassToPass: []string{"b"}, Tripwire: tw}, true, false, true, nil, nil, "tripwire failed"},
		{"tripwire error is ok", report("a", "passed", tw, "error"),
			Expectation{FailToPass: []string{"a"}, Tripwire: tw}, true, false, true, nil, nil, "resolved"},
		{"tripwire passed: tampered", report("a", "passed", tw, "passed"),
			Expectation{FailToPass: []string{"a"}, Tripwire: tw}, false, true, false, nil, nil, "tampered"},
		{"tripwire missing: tampered", report("a", "passed"),
			Expectation{FailToPass: []string{"a"}, Tripwire: tw}, false, true, false, nil, nil, "tampered"},
		{"tripwire skipped: tampered", report("a", "passed", tw, "skipped"),
			Expectation{FailToPass: []string{"a"}, Tripwire: tw}, false, true, false, nil, nil, "reported skipped"},
		{"fail-to-pass failed", report("a", "failed", "b", "passed"),
			Expectation{FailToPass: []string{"a"}, PassToPass: []string{"b"}}, false, false, true, nil, []string{"a"}, "not passed"},
		{"pass-to-pass broken", report("a", "passed", "b", "error"),
			Expectation{FailToPass: []string{"a"}, PassToPass: []string{"b"}}, false, false, true, nil, []string{"b"}, "not passed"},
		{"skipped is not passed", report("a", "skipped"),
			Expectation{FailToPass: []string{"a"}}, false, false, true, nil, []string{"a"}, "skipped"},
		{"missing expected id", report("a", "passed"),
			Expectation{FailToPass: []string{"a"}, PassToPass: []string{"b"}}, false, false, true, []string{"b"}, nil, "missing"},
		{"an id that differs by a byte is missing", report("tests/test_a.py::test_x", "passed"),
			Expectation{FailToPass: []string{"tests/test_a.py::test_x "}}, false, false, true, []string{"tests/test_a.py::test_x "}, nil, "missing"},
		{"empty report", report(),
			Expectation{FailToPass: []string{"a"}, Tripwire: tw}, false, true, false, []string{"a"}, nil, "tampered"},
		{"nil report", nil,
			Expectation{FailToPass: []string{"a"}}, false, false, true, []string{"a"}, nil, "missing"},
		{"no expected tests", report("a", "passed"),
			Expectation{}, false, false, true, nil, nil, "names no tests"},
		{"empty id is missing", report("a", "passed"),
			Expectation{FailToPass: []string{""}}, false, false, true, []string{""}, nil, "missing"},
		{"repeated id listed once", report("a", "failed"),
			Expectation{FailToPass: []string{"a", "a"}, PassToPass: []string{"a"}}, false, false, true, nil, []string{"a"}, "not passed"},
		{"tripwire also expected to pass cannot resolve", report("a", "passed", tw, "failed"),
			Expectation{FailToPass: []string{"a", tw}, Tripwire: tw}, false, false, true, nil, []string{tw}, "not passed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(c.res, c.e)
			if d.Resolved != c.resolved || d.Tampered != c.tampered || d.TripwireOK != c.tripwireOK {
				t.Errorf("Decide = %+v; want Resolved %v, Tampered %v, TripwireOK %v", d, c.resolved, c.tampered, c.tripwireOK)
			}
			if !slices.Equal(d.Missing, c.missing) || !slices.Equal(d.Failed, c.failed) {
				t.Errorf("Missing %q, Failed %q; want %q, %q", d.Missing, d.Failed, c.missing, c.failed)
			}
			if !strings.Contains(d.Reason, c.reason) {
				t.Errorf("Reason %q does not contain %q", d.Reason, c.reason)
			}
			if d.Resolved != strings.HasPrefix(d.Reason, "resolved") {
				t.Errorf("Reason %q disagrees with Resolved %v", d.Reason, d.Resolved)
			}
		})
	}
}

// Decide over the parsed samples: the ids a task would list, in either form.
func TestDecideOnParsedReports(t *testing.T) {
	open := func(name string) *os.File {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	junit, err := ParseJUnit(open("testdata/pytest-junit.xml"), 0)
	if err != nil {
		t.Fatal(err)
	}
	gotest, err := ParseGoTestJSON(open("testdata/gotest.json"), 0)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		res      *Results
		e        Expectation
		resolved bool
	}{
		{"pytest node ids", junit, Expectation{
			FailToPass: []string{"tests/test_parser.py::TestTokenize::test_split[a-b]", "tests/unit/test_io.py::TestReader::TestNested::test_deep[x-y-z]"},
			PassToPass: []string{"tests/test_parser.py::test_module_level"},
			Tripwire:   "tests/test_zz_tripwire.py::test_tripwire",
		}, true},
		{"pytest raw ids", junit, Expectation{
			FailToPass: []string{"tests.test_parser.TestTokenize.test_split[a-b]"},
			Tripwire:   "tests.test_zz_tripwire.test_tripwire",
		}, true},
		{"pytest teardown error", junit, Expectation{
			FailToPass: []string{"tests/test_parser.py::TestTokenize::test_teardown"},
			Tripwire:   "tests/test_zz_tripwire.py::test_tripwire",
		}, false},
		{"pytest xfail is not a pass", junit, Expectation{
			FailToPass: []string{"tests/test_parser.py::test_known_bug"},
		}, false},
		{"go subtest", gotest, Expectation{
			FailToPass: []string{"example.com/m/calc/TestDiv/normal", "TestReverse"},
		}, true},
		{"go tripwire reported in one package of several", gotest, Expectation{
			FailToPass: []string{"example.com/m/calc/TestDiv/normal", "TestReverse"},
			Tripwire:   "TestDiv/by_zero",
		}, false},
		{"go build failure leaves tests missing", gotest, Expectation{
			FailToPass: []string{"example.com/m/broken/TestB"},
		}, false},
		{"go crashed test is missing", gotest, Expectation{
			FailToPass: []string{"TestAdd"},
			Tripwire:   "example.com/m/crash/TestBoom",
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if d := Decide(c.res, c.e); d.Resolved != c.resolved {
				t.Errorf("Decide = %+v, want Resolved %v", d, c.resolved)
			}
		})
	}
}

// A go test -json report must hold the tripwire, failed, in every package
// that reported a test: a TestMain that rewrites one package's output
// cannot hide behind the others' failing tripwires.
func TestDecideTripwireEveryPackage(t *testing.T) {
	const tw = "TestProctorTripwire0123"
	ev := func(pkg, test, action string) string {
		return `{"Action":"` + action + `","Package":"` + pkg + `","Test":"` + test + `"}` + "\n"
	}
	honest := ev("m/a", "TestA", "pass") + ev("m/a", tw, "fail") + ev("m/b", "TestB", "pass") + ev("m/b", tw, "fail")
	cases := []struct {
		name               string
		report             string
		resolved, tampered bool
		reported           bool
		reason             string
	}{
		{"every package failed its tripwire", honest, true, false, true, "resolved"},
		{"one package reports its tripwire passed", ev("m/a", "TestA", "pass") + ev("m/a", tw, "fail") + ev("m/b", "TestB", "pass") + ev("m/b", tw, "pass"),
			false, true, true, `passed in package "m/b"`},
		{"one package never reports it", ev("m/a", "TestA", "pass") + ev("m/a", tw, "fail") + ev("m/b", "TestB", "pass"),
			false, true, false, `missing from the report of package "m/b"`},
		{"one package skips it", ev("m/a", "TestA", "pass") + ev("m/a", tw, "skip") + ev("m/b", "TestB", "pass") + ev("m/b", tw, "fail"),
			false, true, true, `skipped in package "m/a"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := ParseGoTestJSON(strings.NewReader(c.report), 0)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Packages, []string{"m/a", "m/b"}) {
				t.Fatalf("Packages = %q", res.Packages)
			}
			if res.Tests[tw] != Failed && c.tampered && c.reported {
				t.Fatalf("the alias should hold the worst outcome, failed: %q", res.Tests[tw])
			}
			d := Decide(res, Expectation{FailToPass: []string{"TestA", "m/b/TestB"}, Tripwire: tw})
			if d.Resolved != c.resolved || d.Tampered != c.tampered || d.TripwireReported != c.reported || !strings.Contains(d.Reason, c.reason) {
				t.Errorf("Decide = %+v; want resolved %v tampered %v reported %v, reason with %q", d, c.resolved, c.tampered, c.reported, c.reason)
			}
		})
	}
}

package trial

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/task"
)

// ctrfPlugin stands in for pytest-json-ctrf 0.3.5, which the tests cannot
// install (no PyPI here): the same --ctrf option and the same report, as
// its Report and TestObject build it: one entry per test, named by its
// node id without parameters (the parameter sets of one test collapsed
// into its first, the others counted in retries), the first failure's
// phase in raw_status, durations and times in seconds, empty fields left
// out, json.dump with indent=4.
const ctrfPlugin = `import json, time
import pytest


def pytest_addoption(parser):
    parser.getgroup("ctrf").addoption("--ctrf", action="store")


def pytest_configure(config):
    if config.option.ctrf:
        config.pluginmanager.register(_CTRF(config.option.ctrf), "ctrf_report")


class _CTRF:
    def __init__(self, path):
        self.path, self.items, self.start = path, {}, time.time()

    def pytest_runtest_logreport(self, report):
        t = self.items.setdefault(report.nodeid, {
            "name": report.nodeid.split("[")[0], "status": None, "raw_status": None,
            "duration": 0, "start": 0, "stop": 0, "retries": 0,
            "file_path": report.location[0], "trace": None, "message": None})
        if t["status"] not in ("skipped", "failed"):
            if report.skipped:
                t["status"] = "skipped"
            elif report.failed:
                t["status"], t["raw_status"] = "failed", report.when + "_" + report.outcome
                t["message"] = "The test failed in the %s phase" % report.when
                if "AssertionError" in report.longreprtext:
                    t["message"] += " due to an assertion error"
            elif report.passed:
                t["status"] = "passed"
            else:
                t["status"] = "other"
        t["duration"] += report.duration
        if report.when == "setup" and not t["start"]:
            t["start"] = getattr(report, "start", time.time())  # pytest < 7.4 has no start
        if report.when == "teardown" and not t["stop"]:
            t["stop"] = getattr(report, "stop", time.time())
        if report.longrepr and report.longreprtext:
            t["trace"] = report.longreprtext

    def pytest_sessionfinish(self, session):
        tests = {}
        for nodeid, t in self.items.items():
            if t["name"] in tests:
                tests[t["name"]]["retries"] += 1
            else:
                tests[t["name"]] = t
        n = lambda s: sum(1 for t in tests.values() if t["status"] == s)
        doc = {"results": {
            "tool": {"name": "pytest", "version": pytest.__version__},
            "summary": {"tests": len(tests), "passed": n("passed"), "failed": n("failed"),
                        "skipped": n("skipped"), "pending": n("pending"), "other": 0,
                        "start": self.start, "stop": time.time()},
            "tests": [{k: v for k, v in t.items() if v not in [None, "", []]} for t in tests.values()]}}
        with open(self.path, "w") as f:
            json.dump(doc, f, default=str, indent=4)
`

// tb2Tests are a Terminal-Bench 2 task's tests/test_outputs.py: they check
// what the agent left in /app, and call its code.
const tb2Tests = `import json
import sys
from pathlib import Path

sys.path.insert(0, "/app")


def test_total_function():
    import solution
    assert solution.total() == 3


def test_report_exists():
    assert Path("/app/report.json").exists(), "no report.json found"


def test_report_valid_json():
    with open("/app/report.json") as f:
        json.load(f)


def test_report_total():
    with open("/app/report.json") as f:
        assert json.load(f)["total"] == 3
`

// ctrfTask writes a task in the published Terminal-Bench 2 shape: the
// verifier runs pytest with --ctrf /logs/verifier/ctrf.json and writes
// reward.txt from its status. With results set, it is a task whose
// structured results are that CTRF report instead, with the tripwire.
func ctrfTask(t *testing.T, results bool) *task.Task {
	t.Helper()
	test := `cd /app
PYTHONPATH=/tests python3 -m pytest -p no:cacheprovider -p ctrf_plugin --rootdir=/tests --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi`
	if results {
		test = `cd /app
PYTHONPATH=/tests exec python3 -m pytest -p no:cacheprovider -p ctrf_plugin --rootdir=/tests --ctrf "$PROCTOR_RESULTS" /tests/test_outputs.py "$PROCTOR_TRIPWIRE" -rA`
	}
	tk := writeTask(t, taskSpec{files: map[string]string{"README": "write report.json\n"}, test: test})
	must(t, os.WriteFile(filepath.Join(tk.Dir, "tests", "test_outputs.py"), []byte(tb2Tests), 0o644))
	must(t, os.WriteFile(filepath.Join(tk.Dir, "tests", "ctrf_plugin.py"), []byte(ctrfPlugin), 0o644))
	if results {
		must(t, os.WriteFile(filepath.Join(tk.Dir, "tests", "expected.json"), []byte(
			`{"fail_to_pass": ["test_outputs.py::test_report_exists", "test_outputs.py::test_report_total", "test_outputs.py::test_total_function"], "pass_to_pass": []}`), 0o644))
		toml, err := os.ReadFile(filepath.Join(tk.Dir, "task.toml"))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(tk.Dir, "task.toml"), append(toml, []byte("results = \"ctrf\"\n")...), 0o644))
	}
	openUp(t, tk.Dir)
	tk, err := task.Load(tk.Dir)
	must(t, err)
	return tk
}

func requirePytest(t *testing.T) {
	t.Helper()
	requireRoot(t)
	requireTool(t, "python3")
	if err := havePytest(); err != nil {
		if os.Getenv("PROCTOR_NO_SKIP") != "" || os.Getenv("CI") == "true" {
			t.Fatalf("cannot run here: needs pytest (scripts/deps.sh installs python3-pytest): %v", err)
		}
		t.Skip("needs pytest")
	}
}

const (
	honestAgent = `printf '{"total": 3}' > /app/report.json; printf 'def total():\n    return 3\n' > /app/solution.py`
	wrongAgent  = `printf '{"total": 4}' > /app/report.json; printf 'def total():\n    return 4\n' > /app/solution.py`
	// forcingAgent gets it wrong, and has its code, which the tests
	// import, make pytest report every test passed.
	forcingAgent = `printf '{"total": 4}' > /app/report.json
cat > /app/solution.py <<'PY'
import _pytest.reports as _r
_orig = _r.TestReport.__init__
def _init(self, *a, **k):
    _orig(self, *a, **k)
    self.outcome, self.longrepr = "passed", None
_r.TestReport.__init__ = _init


def total():
    return 4
PY`
)

// TestCTRFInformational: a task in the published shape, with no [proctor]
// results, gets each test's outcome in its verdict from ctrf.json, marked
// informational, while its reward comes from reward.txt as Harbor reads it.
func TestCTRFInformational(t *testing.T) {
	requirePytest(t)
	tk := ctrfTask(t, false)
	for _, c := range []struct {
		name, agent string
		passed      bool
		outcomes    map[string]string
	}{
		{"honest", honestAgent, true, map[string]string{"test_outputs.py::test_total_function": "passed",
			"test_outputs.py::test_report_exists": "passed", "test_outputs.py::test_report_valid_json": "passed", "test_outputs.py::test_report_total": "passed"}},
		{"wrong total", wrongAgent, false, map[string]string{"test_outputs.py::test_total_function": "failed",
			"test_outputs.py::test_report_exists": "passed", "test_outputs.py::test_report_valid_json": "passed", "test_outputs.py::test_report_total": "failed"}},
		{"nop", "true", false, map[string]string{"test_outputs.py::test_total_function": "failed",
			"test_outputs.py::test_report_exists": "failed", "test_outputs.py::test_report_valid_json": "failed", "test_outputs.py::test_report_total": "failed"}},
		// What the verdict's note warns of: code the verifier runs can
		// force the report (and pytest's status, and so reward.txt), as
		// under Harbor. TestCTRFResults catches the same agent.
		{"forces every outcome", forcingAgent, true, map[string]string{"test_outputs.py::test_total_function": "passed",
			"test_outputs.py::test_report_exists": "passed", "test_outputs.py::test_report_valid_json": "passed", "test_outputs.py::test_report_total": "passed"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, out := runTrial(t, tk, c.agent, "")
			if v.Passed != c.passed || v.Status != StatusClean || v.Results != nil {
				t.Fatalf("passed %t status %s results %+v, want passed %t clean\n%s", v.Passed, v.Status, v.Results, c.passed, readFile(t, filepath.Join(out, GraderLog)))
			}
			ts := v.Tests
			if ts == nil || !ts.Informational || ts.Format != "ctrf" || ts.Error != "" || !strings.Contains(ts.Note, "informational") {
				t.Fatalf("tests %+v", ts)
			}
			for id, o := range c.outcomes {
				if ts.Outcomes[id] != o {
					t.Errorf("%s: %q, want %q (all: %v)", id, ts.Outcomes[id], o, ts.Outcomes)
				}
			}
			if !strings.HasPrefix(ts.Tool, "pytest ") {
				t.Errorf("tool %q", ts.Tool)
			}
			verifiedEvents(t, out)
		})
	}
}

// TestCTRFDecidesNothingUnasked: a ctrf.json that says every test passed,
// beside a reward file that says 0, leaves the reward at 0: without
// [proctor] results the report is information, whoever wrote it.
func TestCTRFDecidesNothingUnasked(t *testing.T) {
	requireRoot(t)
	forged := tb2CTRF("passed", "passed")
	tk := writeTask(t, taskSpec{test: "printf '%s' " + shellQuote(forged) + " > /logs/verifier/ctrf.json\necho 0 > /logs/verifier/reward.txt"})
	v, _ := runTrial(t, tk, "true", "")
	if v.Passed || v.Reward != 0 {
		t.Fatalf("passed %t reward %g: a CTRF report decided", v.Passed, v.Reward)
	}
	if v.Tests == nil || !v.Tests.Informational || v.Tests.Counts.Passed != 2 {
		t.Fatalf("tests %+v", v.Tests)
	}
}

// TestCTRFResults: with [proctor] results = "ctrf" the harness decides
// from the report, SWE-bench's way, and the tripwire catches a forced one.
func TestCTRFResults(t *testing.T) {
	requirePytest(t)
	tk := ctrfTask(t, true)
	for _, c := range []struct {
		name, agent        string
		resolved, tampered bool
	}{
		{"honest", honestAgent, true, false},
		{"wrong total", wrongAgent, false, false},
		{"nop", "true", false, false},
		{"forces every outcome", forcingAgent, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, out := runTrial(t, tk, c.agent, "")
			glog := readFile(t, filepath.Join(out, GraderLog))
			if v.Results == nil || v.Results.Format != "ctrf" || v.Results.Resolved != c.resolved || v.Results.Tampered != c.tampered {
				t.Fatalf("results %+v (violations %s)\n%s", v.Results, violations(v), glog)
			}
			if v.Passed != c.resolved || (c.tampered != hasViolation(v, ViolationTamperedResults)) {
				t.Errorf("passed %t, want %t; violations %s", v.Passed, c.resolved, violations(v))
			}
			if v.Tests == nil || v.Tests.Informational || v.Tests.Format != "ctrf" {
				t.Fatalf("tests %+v", v.Tests)
			}
			// pytest 8 names it "../proctor/tripwire/<tripwire>.py::<tripwire>",
			// pytest 7 "::<tripwire>" (a file outside the rootdir).
			trip := ""
			for id, o := range v.Tests.Outcomes {
				if strings.HasSuffix(id, "::<tripwire>") {
					trip = o
				}
			}
			if want := map[bool]string{false: "failed", true: "passed"}[c.tampered]; trip != want {
				t.Errorf("the tripwire is not listed %s by its fixed name: %v", want, v.Tests.Outcomes)
			}
			for id := range v.Tests.Outcomes {
				if regexp.MustCompile(`test_[0-9a-f]{16}`).MatchString(id) {
					t.Errorf("a test id names the random tripwire: %q", id)
				}
			}
			verifiedEvents(t, out)
		})
	}
}

package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// withTests is the fixture with test reports on t1: alpha's three trials
// and beta's first two, informational (CTRF beside a reward file); and a
// test named like markup.
func withTests() Input {
	in := fixture()
	outcomes := map[string][]string{ // per trial of t1, in fixture order
		"alpha/0": {"passed", "passed"},
		"alpha/1": {"passed", "failed"},
		"alpha/2": {"failed", "failed"},
		"beta/0":  {"passed", "failed"},
		"beta/1":  {"failed", "failed"},
	}
	for i := range in.Trials {
		tr := &in.Trials[i]
		o, ok := outcomes[fmt.Sprintf("%s/%d", tr.Agent, tr.Index)]
		if !ok || tr.Task != "t1" {
			continue
		}
		tr.Tests = &TrialTests{Informational: true, Outcomes: map[string]string{
			"test_outputs.py::test_exists": o[0], "test_outputs.py::test_<b>|total": o[1]}}
		if tr.Agent == "beta" && tr.Index == 0 {
			delete(tr.Tests.Outcomes, "test_outputs.py::test_<b>|total") // not named: not passed
		}
	}
	return in
}

func TestTestsTable(t *testing.T) {
	in := withTests()
	// The pending and unverified trials carry reports too: they count nowhere.
	for i := range in.Trials {
		if tr := &in.Trials[i]; tr.Status == "" || !tr.Verified {
			tr.Tests = &TrialTests{Outcomes: map[string]string{"test_outputs.py::test_exists": "passed", "test_outputs.py::test_ghost": "passed"}}
		}
	}
	r := Build(in)
	if len(r.Tests) != 1 || r.Tests[0].Task != "t1" || !r.Tests[0].Informational {
		t.Fatalf("Tests = %+v", r.Tests)
	}
	var got []string
	for _, row := range r.Tests[0].Rows {
		for _, c := range row.Cells {
			got = append(got, fmt.Sprintf("%s %s %d/%d", row.Test, c.Agent, c.Passed, c.Trials))
		}
	}
	want := []string{
		"test_outputs.py::test_<b>|total alpha 1/3", "test_outputs.py::test_<b>|total beta 0/2",
		"test_outputs.py::test_exists alpha 2/3", "test_outputs.py::test_exists beta 1/2",
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("cells:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	var buf bytes.Buffer
	if err := r.JSON(&buf); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Tests  []TaskTests `json:"tests"`
		Trials []TrialRow  `json:"trials"`
	}
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil || len(m.Tests) != 1 || m.Tests[0].Rows[1].Cells[0].PassRate != 2.0/3 {
		t.Fatalf("JSON tests %+v, %v", m.Tests, err)
	}
	for _, tr := range m.Trials {
		if tr.Agent == "alpha" && tr.Task == "t1" && tr.Index == 1 && (tr.TestsPassed != 1 || tr.TestsReported != 2) {
			t.Errorf("trial row %+v", tr)
		}
	}

	buf.Reset()
	if err := r.Markdown(&buf); err != nil {
		t.Fatal(err)
	}
	md := buf.String()
	for _, s := range []string{"## Tests (passed/trials with a report)", "### t1", "Informational: read from a CTRF report",
		`| test\_outputs.py::test\_exists | 2/3 | 1/2 |`, `| test\_outputs.py::test\_\<b\>\|total | 1/3 | 0/2 |`} {
		if !strings.Contains(md, s) {
			t.Errorf("Markdown lacks %q:\n%s", s, md)
		}
	}

	html := htmlOf(t, in)
	for _, s := range []string{`<h2 id="tests">`, `data-test="test_outputs.py::test_&lt;b&gt;|total"`, `data-agent="alpha" data-pass-rate="0.6667" data-trials="3" data-passed="2"`, "Informational: read from a CTRF report"} {
		if !strings.Contains(html, s) {
			t.Errorf("HTML lacks %q", s)
		}
	}
	if strings.Contains(html, "test_<b>") {
		t.Error("HTML holds a test name unescaped")
	}

	buf.Reset()
	if err := r.CSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	n := len(csvHeader)
	if recs[0][n-2] != "tests_passed" || recs[0][n-1] != "tests_reported" {
		t.Fatalf("header %v", recs[0])
	}
	for _, rec := range recs[1:] {
		if rec[0] == "alpha" && rec[1] == "t1" && rec[2] == "0" && (rec[n-2] != "2" || rec[n-1] != "2") {
			t.Errorf("alpha t1 0: %v", rec)
		}
	}
}

// TestTestsTableCapped: the Markdown and HTML forms show a task's first
// maxTestRows tests and say how many more the JSON has.
func TestTestsTableCapped(t *testing.T) {
	in := Input{Agents: []string{"a"}, Tasks: []string{"t"}}
	o := map[string]string{}
	for i := range maxTestRows + 7 {
		o[fmt.Sprintf("t.py::test_%04d", i)] = "passed"
	}
	in.Trials = []Trial{{Agent: "a", Task: "t", Status: "clean", Verified: true, Tests: &TrialTests{Outcomes: o}}}
	r := Build(in)
	if len(r.Tests[0].Rows) != maxTestRows+7 || r.Tests[0].Informational {
		t.Fatalf("%d rows", len(r.Tests[0].Rows))
	}
	var buf bytes.Buffer
	if err := r.Markdown(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "7 more tests in the JSON form.") || strings.Contains(buf.String(), "test\\_0100") {
		t.Error("Markdown is not capped")
	}
	if h := htmlOf(t, in); !strings.Contains(h, "7 more tests in the JSON form.") || strings.Count(h, "<tr data-test=") != maxTestRows {
		t.Error("HTML is not capped")
	}
	if Build(Input{}).Tests == nil {
		t.Error("Tests is nil, want an empty array")
	}
}

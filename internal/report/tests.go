package report

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// maxTestRows caps the tests of one task the Markdown and HTML forms show;
// the JSON has them all.
const maxTestRows = 100

// informationalTests is what the Markdown and HTML forms say of a task whose
// test outcomes are informational.
const informationalTests = "Informational: read from a CTRF report beside the reward file, which the agent's code run by the verifier could have written; the reward did not come from it."

// TrialTests is what a trial's test report said of each test (the
// verdict's tests, and its structured results' expected tests).
type TrialTests struct {
	// Outcomes maps a test id to passed, skipped, failed, error or
	// missing.
	Outcomes map[string]string
	// Informational: the report decided nothing (a CTRF report read beside
	// a reward file, which the agent's code could have written).
	Informational bool
}

// TaskTests is one task's tests, as its counted trials' reports named them:
// a row per test, a cell per agent.
type TaskTests struct {
	Task string `json:"task"`
	// Informational is set when any trial's report on the task was
	// informational: the outcomes did not decide the reward and could have
	// been written by the agent's code.
	Informational bool      `json:"informational"`
	Rows          []TestRow `json:"rows"` // by test id
}

// TestRow is one test of a TaskTests, one cell per agent in Matrix order.
type TestRow struct {
	Test  string     `json:"test"`
	Cells []TestCell `json:"cells"`
}

// TestCell is one agent's counted trials with a report on the task: Passed
// of them reported the test passed (a report that does not name it counts
// as not passed); Trials is 0 when the agent has none.
type TestCell struct {
	Agent    string  `json:"agent"`
	Trials   int     `json:"trials"`
	Passed   int     `json:"passed"`
	PassRate float64 `json:"pass_rate"`
}

// testsTable builds the per-test tables of the tasks whose counted trials
// carry test reports, in task order; agents in column order.
func testsTable(agents, tasks []string, trials []Trial) []TaskTests {
	agentIdx := map[string]int{}
	for i, a := range agents {
		agentIdx[a] = i
	}
	type acc struct {
		reports []int            // per agent: counted trials with a report
		passed  map[string][]int // test → per agent: trials it passed in
		info    bool
	}
	byTask := map[string]*acc{}
	for i := range trials {
		t := &trials[i]
		if !counted(t) || t.Tests == nil {
			continue
		}
		a := byTask[t.Task]
		if a == nil {
			a = &acc{reports: make([]int, len(agents)), passed: map[string][]int{}}
			byTask[t.Task] = a
		}
		ai := agentIdx[t.Agent]
		a.reports[ai]++
		a.info = a.info || t.Tests.Informational
		for id, o := range t.Tests.Outcomes {
			p := a.passed[id]
			if p == nil {
				p = make([]int, len(agents))
				a.passed[id] = p
			}
			if o == "passed" {
				p[ai]++
			}
		}
	}
	out := []TaskTests{}
	for _, task := range tasks {
		a := byTask[task]
		if a == nil {
			continue
		}
		tt := TaskTests{Task: task, Informational: a.info, Rows: []TestRow{}}
		for _, id := range slices.Sorted(maps.Keys(a.passed)) {
			row := TestRow{Test: id, Cells: make([]TestCell, len(agents))}
			for ai, ag := range agents {
				c := TestCell{Agent: ag, Trials: a.reports[ai], Passed: a.passed[id][ai]}
				if c.Trials > 0 {
					c.PassRate = float64(c.Passed) / float64(c.Trials)
				}
				row.Cells[ai] = c
			}
			tt.Rows = append(tt.Rows, row)
		}
		out = append(out, tt)
	}
	return out
}

// testCounts are the tests t's report said passed, and those it named.
func (t *Trial) testCounts() (passed, reported int) {
	if t.Tests == nil {
		return 0, 0
	}
	for _, o := range t.Tests.Outcomes {
		if o == "passed" {
			passed++
		}
	}
	return passed, len(t.Tests.Outcomes)
}

// testsMarkdown writes the per-test tables, one per task.
func (r *Report) testsMarkdown(p func(string, ...any)) {
	if len(r.Tests) == 0 {
		return
	}
	p("\n## Tests (passed/trials with a report)\n")
	for _, tt := range r.Tests {
		p("\n### %s\n\n", md(tt.Task))
		if tt.Informational {
			p("%s\n\n", informationalTests)
		}
		p("| Test |")
		for _, a := range r.Matrix.Agents {
			p(" %s |", md(a))
		}
		p("\n|---|%s\n", strings.Repeat("--:|", len(r.Matrix.Agents)))
		for i, row := range tt.Rows {
			if i == maxTestRows {
				p("\n%d more tests in the JSON form.\n", len(tt.Rows)-maxTestRows)
				break
			}
			p("| %s |", md(row.Test))
			for _, c := range row.Cells {
				if c.Trials == 0 {
					p(" – |")
					continue
				}
				p(" %s |", fmt.Sprintf("%d/%d", c.Passed, c.Trials))
			}
			p("\n")
		}
	}
}

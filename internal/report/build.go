package report

import (
	"cmp"
	"slices"
)

// counted reports whether a trial enters the numbers: its bundle verified
// and it has run.
func counted(t *Trial) bool { return t.Verified && t.Status != "" }

// passes reports whether a counted trial is a pass: only a clean trial the
// grader passed is.
func passes(t *Trial) bool { return t.Passed && t.Status == "clean" }

// reward is a counted trial's reward: as recorded, but 0 when compromised.
func reward(t *Trial) float64 {
	if t.Status == "compromised" {
		return 0
	}
	return t.Reward
}

// cellAcc accumulates one agent's counted trials on one task.
type cellAcc struct {
	n, passed int
	rewards   []float64
}

// Build computes the report of in. It does not modify in and never fails:
// an empty input gives a report of empty tables.
func Build(in Input) *Report {
	agents, agentIdx := order(in.Agents, in.Trials, func(t *Trial) string { return t.Agent })
	tasks, taskIdx := order(in.Tasks, in.Trials, func(t *Trial) string { return t.Task })

	// The trials in display order: agent, task, index.
	all := slices.Clone(in.Trials)
	slices.SortStableFunc(all, func(a, b Trial) int {
		return cmp.Or(
			cmp.Compare(agentIdx[a.Agent], agentIdx[b.Agent]),
			cmp.Compare(taskIdx[a.Task], taskIdx[b.Task]),
			cmp.Compare(a.Index, b.Index))
	})

	r := &Report{
		Schema:    Schema,
		Suite:     in.Suite,
		Generated: in.Generated,
		Trials:    make([]TrialRow, 0, len(all)),
		all:       all,
	}
	cells := make([][]cellAcc, len(agents))
	for i := range cells {
		cells[i] = make([]cellAcc, len(tasks))
	}
	sums := make([]AgentSummary, len(agents))
	walls := make([][]int64, len(agents))
	rewardSum := make([]float64, len(agents))
	viol := make([]AgentViolations, len(agents))
	for i, a := range agents {
		sums[i].Name = a
		viol[i] = AgentViolations{Agent: a, Kinds: map[string]int{}}
	}
	ig := &r.Integrity
	ig.CompromisedTrials = []CompromisedTrial{}
	ig.Unverified = []UnverifiedTrial{}

	for i := range all {
		t := &all[i]
		c := counted(t)
		row := TrialRow{
			Agent: t.Agent, Task: t.Task, Index: t.Index, Status: t.Status,
			Passed: t.Passed, Reward: t.Reward, Bundle: t.Bundle,
			Verified: t.Verified, Counted: c,
		}
		row.TestsPassed, row.TestsReported = t.testCounts()
		r.Trials = append(r.Trials, row)
		if !t.Verified {
			ig.Unverified = append(ig.Unverified, UnverifiedTrial{
				Agent: t.Agent, Task: t.Task, Index: t.Index,
				Bundle: t.Bundle, Error: t.VerifyError,
			})
		}
		if !c {
			continue
		}
		ai, ti := agentIdx[t.Agent], taskIdx[t.Task]
		s := &sums[ai]
		cell := &cells[ai][ti]
		cell.n++
		cell.rewards = append(cell.rewards, reward(t))
		s.Trials++
		if passes(t) {
			s.Passed++
			cell.passed++
		}
		rewardSum[ai] += reward(t)
		switch t.Status {
		case "compromised":
			s.Compromised++
			viol[ai].Compromised++
			ig.Compromised++
			seen := map[string]bool{}
			for _, k := range t.Violations {
				if !seen[k] {
					seen[k] = true
					viol[ai].Kinds[k]++
				}
			}
			ig.CompromisedTrials = append(ig.CompromisedTrials, CompromisedTrial{
				Agent: t.Agent, Task: t.Task, Index: t.Index,
				Violations: nonNil(slices.Clone(t.Violations)), Bundle: t.Bundle,
			})
		case "error":
			s.Errors++
		case "timeout":
			s.Timeouts++
		case "limit":
			s.Limits++
		}
		s.ModelCalls += int64(t.ModelCalls)
		s.InputTokens += t.InputTokens
		s.OutputTokens += t.OutputTokens
		walls[ai] = append(walls[ai], t.WallMS)
	}
	ig.ByAgent = viol

	for ai := range sums {
		s := &sums[ai]
		s.PassRate = ratio(s.Passed, s.Trials)
		s.CILow, s.CIHigh = wilson(s.Passed, s.Trials)
		if s.Trials > 0 {
			s.MeanReward = rewardSum[ai] / float64(s.Trials)
		}
		s.WallMSMedian = nearestRank(walls[ai], 0.5)
		s.WallMSP90 = nearestRank(walls[ai], 0.9)
		minN := 0
		for ti := range tasks {
			if n := cells[ai][ti].n; n > 0 {
				s.Tasks++
				if minN == 0 || n < minN {
					minN = n
				}
			}
		}
		s.PassAtK = make([]PassAtK, 0, minN)
		for k := 1; k <= minN; k++ {
			v := 0.0
			for ti := range tasks {
				if c := cells[ai][ti]; c.n > 0 {
					v += passAtK(c.n, c.passed, k)
				}
			}
			s.PassAtK = append(s.PassAtK, PassAtK{K: k, Value: v / float64(s.Tasks)})
		}
		s.spread(cells[ai])
	}
	r.Agents = sums
	r.Comparisons = compare(agents, tasks, cells)
	r.Matrix = matrix(agents, tasks, cells)
	r.Reproducibility = reproducibility(agents, tasks, cells, in.Regrades)
	r.Tests = testsTable(agents, tasks, all)
	for ai := range r.Agents {
		for ti, task := range tasks {
			if cells[ai][ti].n > 0 && slices.Contains(r.Reproducibility.FlakyTasks, task) {
				r.Agents[ai].FlakyTasks++
			}
		}
	}
	return r
}

// order returns the names in display order, extended by any name the trials
// use that is missing, in order of first appearance, and each name's place.
func order(given []string, trials []Trial, name func(*Trial) string) ([]string, map[string]int) {
	idx := make(map[string]int, len(given))
	names := make([]string, 0, len(given))
	add := func(n string) {
		if _, ok := idx[n]; !ok {
			idx[n] = len(names)
			names = append(names, n)
		}
	}
	for _, n := range given {
		add(n)
	}
	for i := range trials {
		add(name(&trials[i]))
	}
	return names, idx
}

func compare(agents, tasks []string, cells [][]cellAcc) []Comparison {
	out := []Comparison{}
	for a := range agents {
		for b := a + 1; b < len(agents); b++ {
			c := Comparison{A: agents[a], B: agents[b], Tasks: []PairedTask{}}
			diff := 0.0
			for ti, task := range tasks {
				ca, cb := cells[a][ti], cells[b][ti]
				if ca.n == 0 || cb.n == 0 {
					continue
				}
				ra, rb := ratio(ca.passed, ca.n), ratio(cb.passed, cb.n)
				c.Tasks = append(c.Tasks, PairedTask{Task: task, APassRate: ra, BPassRate: rb})
				diff += ra - rb
				switch {
				case ra > rb:
					c.Wins++
				case ra < rb:
					c.Losses++
				default:
					c.Ties++
				}
			}
			c.SharedTasks = len(c.Tasks)
			if c.SharedTasks > 0 {
				c.MeanDifference = diff / float64(c.SharedTasks)
			}
			c.PValue = signTest(c.Wins, c.Losses)
			out = append(out, c)
		}
	}
	return out
}

func matrix(agents, tasks []string, cells [][]cellAcc) Matrix {
	m := Matrix{
		Agents:      slices.Clone(agents),
		Rows:        make([]MatrixRow, 0, len(tasks)),
		Unsolved:    []string{},
		SolvedByAll: []string{},
	}
	for ti, task := range tasks {
		row := MatrixRow{Task: task, Cells: make([]Cell, len(agents))}
		ran, solved, all := false, false, len(agents) > 0
		for ai, a := range agents {
			c := cells[ai][ti]
			row.Cells[ai] = Cell{Agent: a, Trials: c.n, Passed: c.passed, PassRate: ratio(c.passed, c.n)}
			ran = ran || c.n > 0
			solved = solved || c.passed > 0
			all = all && c.passed > 0
		}
		if ran && !solved {
			m.Unsolved = append(m.Unsolved, task)
		}
		if all {
			m.SolvedByAll = append(m.SolvedByAll, task)
		}
		m.Rows = append(m.Rows, row)
	}
	return m
}

func reproducibility(agents, tasks []string, cells [][]cellAcc, regrades []Regrade) Reproducibility {
	rp := Reproducibility{
		Results:  []CellResult{},
		Regrades: RegradeSummary{Checked: len(regrades), Mismatches: []Regrade{}},
	}
	for ai, a := range agents {
		for ti, task := range tasks {
			c := &cells[ai][ti]
			if c.n == 0 {
				continue
			}
			d := c.disagrees()
			rp.Cells++
			if d {
				rp.Disagreeing++
			}
			rp.Results = append(rp.Results, CellResult{
				Agent: a, Task: task, Trials: c.n, Passed: c.passed,
				Disagree: d, RewardStddev: stddev(c.rewards),
			})
		}
	}
	rp.FlakyTasks = []string{}
	for _, g := range regrades {
		if !g.Same {
			rp.Regrades.Differing++
			rp.Regrades.Mismatches = append(rp.Regrades.Mismatches, g)
			if !slices.Contains(rp.FlakyTasks, g.Task) {
				rp.FlakyTasks = append(rp.FlakyTasks, g.Task)
			}
		}
	}
	slices.Sort(rp.FlakyTasks)
	return rp
}

// nonNil returns s, or an empty slice for nil, so JSON shows [] not null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// fixture is a small suite whose numbers are worked out by hand in the
// tests below.
//
//	         t1        t2        t3
//	alpha    P P F     P P       F F
//	beta     F F F     P F       F F
//
// plus, for alpha: a pending trial on t1, an unverified passing trial on t3
// (neither may count anywhere), and beta's second t2 trial is compromised
// with Passed set (it must count as a failure).
func fixture() Input {
	tr := func(agent, task string, idx int, status string, passed bool) Trial {
		reward := 0.0
		if passed {
			reward = 1
		}
		return Trial{Agent: agent, Task: task, Index: idx, Status: status, Passed: passed,
			Reward: reward, WallMS: int64(1000 * (idx + 1)), ModelCalls: 2, InputTokens: 100,
			OutputTokens: 10, Bundle: fmt.Sprintf("trials/%s/%s/%d", agent, task, idx), Verified: true}
	}
	trials := []Trial{
		tr("alpha", "t1", 0, "clean", true),
		tr("alpha", "t1", 1, "clean", true),
		tr("alpha", "t1", 2, "clean", false),
		tr("alpha", "t1", 3, "", false), // pending
		tr("alpha", "t2", 0, "clean", true),
		tr("alpha", "t2", 1, "clean", true),
		tr("alpha", "t3", 0, "error", false),
		tr("alpha", "t3", 1, "timeout", false),
		tr("beta", "t1", 0, "clean", false),
		tr("beta", "t1", 1, "clean", false),
		tr("beta", "t1", 2, "limit", false),
		tr("beta", "t2", 0, "clean", true),
		tr("beta", "t2", 1, "compromised", true),
		tr("beta", "t3", 0, "clean", false),
		tr("beta", "t3", 1, "clean", false),
	}
	bad := tr("alpha", "t3", 2, "clean", true)
	bad.Verified, bad.VerifyError = false, "bundle: digest mismatch"
	trials = append(trials, bad)
	trials[12].Violations = []string{"network", "network", "write-outside"}
	return Input{
		Suite:     "demo",
		Generated: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Agents:    []string{"alpha", "beta"},
		Tasks:     []string{"t1", "t2", "t3"},
		Trials:    trials,
		Regrades: []Regrade{
			{Agent: "alpha", Task: "t1", Index: 0, Same: true},
			{Agent: "beta", Task: "t2", Index: 0, Same: false, Detail: "test order"},
		},
	}
}

func TestBuildFixture(t *testing.T) {
	r := Build(fixture())
	if len(r.Agents) != 2 {
		t.Fatalf("agents = %d, want 2", len(r.Agents))
	}
	a, b := r.Agents[0], r.Agents[1]

	t.Run("leaderboard", func(t *testing.T) {
		if a.Trials != 7 || a.Passed != 4 || a.Tasks != 3 {
			t.Errorf("alpha trials/passed/tasks = %d/%d/%d, want 7/4/3 (pending and unverified excluded)", a.Trials, a.Passed, a.Tasks)
		}
		if !near(a.PassRate, 4.0/7, 1e-12) || !near(a.MeanReward, 4.0/7, 1e-12) {
			t.Errorf("alpha pass rate %v mean reward %v, want 4/7", a.PassRate, a.MeanReward)
		}
		lo, hi := wilson(4, 7)
		if a.CILow != lo || a.CIHigh != hi {
			t.Errorf("alpha CI = [%v, %v], want [%v, %v]", a.CILow, a.CIHigh, lo, hi)
		}
		if a.Errors != 1 || a.Timeouts != 1 || a.Limits != 0 || a.Compromised != 0 {
			t.Errorf("alpha errors/timeouts/limits/compromised = %d/%d/%d/%d", a.Errors, a.Timeouts, a.Limits, a.Compromised)
		}
		if b.Trials != 7 || b.Passed != 1 || b.Compromised != 1 || b.Limits != 1 {
			t.Errorf("beta trials/passed/compromised/limits = %d/%d/%d/%d, want 7/1/1/1 (compromised pass is a failure)", b.Trials, b.Passed, b.Compromised, b.Limits)
		}
		if a.ModelCalls != 14 || a.InputTokens != 700 || a.OutputTokens != 70 {
			t.Errorf("alpha usage = %d/%d/%d, want 14/700/70", a.ModelCalls, a.InputTokens, a.OutputTokens)
		}
		// alpha walls: 1000 2000 3000 1000 2000 1000 2000 → sorted 1000×3 2000×3 3000.
		if a.WallMSMedian != 2000 || a.WallMSP90 != 3000 {
			t.Errorf("alpha wall median/p90 = %d/%d, want 2000/3000", a.WallMSMedian, a.WallMSP90)
		}
	})

	t.Run("pass@k", func(t *testing.T) {
		// alpha: min trials per task is 2. pass@1 = (2/3 + 1 + 0)/3;
		// pass@2 = (1 - C(1,2)/C(3,2) + 1 + 0)/3 = 2/3.
		want := []PassAtK{{1, (2.0/3 + 1) / 3}, {2, 2.0 / 3}}
		if len(a.PassAtK) != len(want) {
			t.Fatalf("alpha pass@k = %v, want %v", a.PassAtK, want)
		}
		for i, w := range want {
			if a.PassAtK[i].K != w.K || !near(a.PassAtK[i].Value, w.Value, 1e-12) {
				t.Errorf("alpha pass@%d = %v, want %v", w.K, a.PassAtK[i].Value, w.Value)
			}
		}
	})

	t.Run("comparison", func(t *testing.T) {
		if len(r.Comparisons) != 1 {
			t.Fatalf("comparisons = %d, want 1", len(r.Comparisons))
		}
		c := r.Comparisons[0]
		// t1: 2/3 vs 0, t2: 1 vs 1/2, t3: 0 vs 0.
		if c.A != "alpha" || c.B != "beta" || c.SharedTasks != 3 || c.Wins != 2 || c.Losses != 0 || c.Ties != 1 {
			t.Errorf("comparison = %+v", c)
		}
		if !near(c.PValue, 0.5, 1e-12) {
			t.Errorf("p = %v, want 0.5 (2 wins, 0 losses)", c.PValue)
		}
		if !near(c.MeanDifference, (2.0/3+0.5)/3, 1e-12) {
			t.Errorf("mean difference = %v", c.MeanDifference)
		}
	})

	t.Run("matrix", func(t *testing.T) {
		m := r.Matrix
		if got := m.Rows[0].Cells[0]; got.Trials != 3 || got.Passed != 2 {
			t.Errorf("alpha × t1 = %+v, want 2/3", got)
		}
		if strings.Join(m.Unsolved, ",") != "t3" || strings.Join(m.SolvedByAll, ",") != "t2" {
			t.Errorf("unsolved %v solved by all %v, want [t3] [t2]", m.Unsolved, m.SolvedByAll)
		}
	})

	t.Run("reproducibility", func(t *testing.T) {
		rp := r.Reproducibility
		if rp.Cells != 6 || rp.Disagreeing != 2 {
			t.Errorf("cells/disagreeing = %d/%d, want 6/2", rp.Cells, rp.Disagreeing)
		}
		for _, c := range rp.Results {
			if c.Agent == "beta" && c.Task == "t2" && (!c.Disagree || !near(c.RewardStddev, 0.5, 1e-12)) {
				t.Errorf("beta × t2 = %+v, want disagree with stddev 0.5", c)
			}
		}
		if rp.Regrades.Checked != 2 || rp.Regrades.Differing != 1 || rp.Regrades.Mismatches[0].Detail != "test order" {
			t.Errorf("regrades = %+v", rp.Regrades)
		}
		// The regrade that differed makes t2 flaky, and both agents' scores
		// count it.
		if !slices.Equal(rp.FlakyTasks, []string{"t2"}) || r.Agents[0].FlakyTasks != 1 || r.Agents[1].FlakyTasks != 1 {
			t.Errorf("flaky tasks %q, agents' counts %d %d", rp.FlakyTasks, r.Agents[0].FlakyTasks, r.Agents[1].FlakyTasks)
		}
	})

	t.Run("integrity", func(t *testing.T) {
		ig := r.Integrity
		if ig.Compromised != 1 || len(ig.CompromisedTrials) != 1 {
			t.Errorf("compromised = %d %v", ig.Compromised, ig.CompromisedTrials)
		}
		if k := ig.ByAgent[1].Kinds; k["network"] != 1 || k["write-outside"] != 1 || len(k) != 2 {
			t.Errorf("beta kinds = %v, want network:1 write-outside:1", k)
		}
		if len(ig.Unverified) != 1 || ig.Unverified[0].Error != "bundle: digest mismatch" {
			t.Errorf("unverified = %+v", ig.Unverified)
		}
	})

	t.Run("trials", func(t *testing.T) {
		if len(r.Trials) != 16 {
			t.Errorf("trials = %d, want all 16", len(r.Trials))
		}
		n := 0
		for _, tr := range r.Trials {
			if tr.Counted {
				n++
			}
		}
		if n != 14 {
			t.Errorf("counted trials = %d, want 14", n)
		}
	})
}

// An unverified trial must change no number: the report with it equals
// the report without it, but for the lists that name it.
func TestUnverifiedChangesNothing(t *testing.T) {
	in := fixture()
	with := Build(in)
	in.Trials = in.Trials[:len(in.Trials)-1]
	without := Build(in)
	// DeepEqual, not fmt.Sprint: it compares what the summaries' pointers
	// point at (the bootstrap interval among them), not their addresses.
	if !reflect.DeepEqual(
		[]any{with.Agents, with.Matrix, with.Comparisons, with.Reproducibility.Results},
		[]any{without.Agents, without.Matrix, without.Comparisons, without.Reproducibility.Results}) {
		t.Error("an unverified trial changed the numbers")
	}
}

func TestBuildEmpty(t *testing.T) {
	for name, in := range map[string]Input{
		"nothing":      {},
		"no trials":    {Agents: []string{"a", "b"}, Tasks: []string{"t"}},
		"only pending": {Agents: []string{"a"}, Trials: []Trial{{Agent: "a", Task: "t", Verified: true}}},
	} {
		t.Run(name, func(t *testing.T) {
			r := Build(in)
			for _, a := range r.Agents {
				if a.Trials != 0 || a.PassRate != 0 || a.CILow != 0 || a.CIHigh != 1 || len(a.PassAtK) != 0 {
					t.Errorf("agent %+v", a)
				}
			}
			var buf bytes.Buffer
			for _, w := range []func(*bytes.Buffer) error{
				func(b *bytes.Buffer) error { return r.JSON(b) },
				func(b *bytes.Buffer) error { return r.Markdown(b) },
				func(b *bytes.Buffer) error { return r.CSV(b) },
				func(b *bytes.Buffer) error { return r.HTML(b) },
			} {
				buf.Reset()
				if err := w(&buf); err != nil {
					t.Fatal(err)
				}
				if strings.Contains(buf.String(), "NaN") || strings.Contains(buf.String(), "Inf") {
					t.Errorf("output holds NaN or Inf:\n%s", buf.String())
				}
			}
			var m map[string]any
			buf.Reset()
			if err := r.JSON(&buf); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"agents", "comparisons", "trials"} {
				if _, isArr := m[k].([]any); !isArr {
					t.Errorf("%s = %v, want an array, never null", k, m[k])
				}
			}
		})
	}
}

func TestJSON(t *testing.T) {
	r := Build(fixture())
	var buf bytes.Buffer
	if err := r.JSON(&buf); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	var again bytes.Buffer
	if err := back.JSON(&again); err != nil {
		t.Fatal(err)
	}
	if buf.String() != again.String() {
		t.Errorf("JSON does not round-trip:\n%s\n---\n%s", buf.String(), again.String())
	}

	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["schema"] != "proctor.report/v1" {
		t.Errorf("schema = %v", m["schema"])
	}
	for _, k := range []string{"suite", "generated", "agents", "comparisons", "matrix", "reproducibility", "integrity", "trials"} {
		if _, ok := m[k]; !ok {
			t.Errorf("missing top-level key %q", k)
		}
	}
	agent := m["agents"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "trials", "passed", "pass_rate", "ci_low", "ci_high", "mean_reward",
		"compromised", "errors", "pass_at_k", "model_calls", "input_tokens", "output_tokens",
		"wall_ms_median", "wall_ms_p90",
		"bootstrap_low", "bootstrap_high", "repeated_tasks", "disagreeing_tasks", "disagreement",
		"single_trial_tasks", "run_to_run_sd", "run_to_run_mean_abs"} {
		if _, ok := agent[k]; !ok {
			t.Errorf("agent lacks key %q", k)
		}
	}
	// alpha: t1 2/3, t2 2/2, t3 0/2 (see TestSpreadFixture).
	for k, want := range map[string]any{
		"bootstrap_low": 0.0, "bootstrap_high": 1.0, "repeated_tasks": 3.0, "disagreeing_tasks": 1.0,
		"disagreement": 1.0 / 3, "single_trial_tasks": 0.0, "run_to_run_sd": math.Sqrt2 / 7,
		"run_to_run_mean_abs": 2 / (7 * math.Sqrt(math.Pi)),
	} {
		if got, ok := agent[k].(float64); !ok || !near(got, want.(float64), 1e-12) {
			t.Errorf("alpha %s = %v, want %v", k, agent[k], want)
		}
	}
	trial := m["trials"].([]any)[0].(map[string]any)
	for _, k := range []string{"agent", "task", "index", "status", "passed", "reward", "bundle", "verified"} {
		if _, ok := trial[k]; !ok {
			t.Errorf("trial lacks key %q", k)
		}
	}
}

func TestCSV(t *testing.T) {
	in := fixture()
	in.Agents = append(in.Agents, "comma, \"quote\"\nnewline")
	in.Trials = append(in.Trials, Trial{Agent: in.Agents[2], Task: "t1", Status: "clean", Verified: true})
	r := Build(in)
	var buf bytes.Buffer
	if err := r.CSV(&buf); err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(in.Trials)+1 {
		t.Fatalf("rows = %d, want %d trials + header", len(recs), len(in.Trials))
	}
	if strings.Join(recs[0], ",") != strings.Join(csvHeader, ",") {
		t.Errorf("header = %v", recs[0])
	}
	if last := recs[len(recs)-1]; last[0] != in.Agents[2] {
		t.Errorf("agent = %q, want %q back", last[0], in.Agents[2])
	}
	for _, rec := range recs[1:] {
		if rec[0] == "beta" && rec[1] == "t2" && rec[2] == "1" && rec[13] != "network;network;write-outside" {
			t.Errorf("violations = %q", rec[13])
		}
	}
}

func TestMarkdown(t *testing.T) {
	in := fixture()
	in.Agents[1] = "be|ta <b>"
	for i := range in.Trials {
		if in.Trials[i].Agent == "beta" {
			in.Trials[i].Agent = in.Agents[1]
		}
	}
	r := Build(in)
	var buf bytes.Buffer
	if err := r.Markdown(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"## Leaderboard",
		"| alpha | 7 | 4 | 57.1% |",
		`| be\|ta \<b\> | 7 | 1 | 14.3% |`,
		"Unsolved by every agent: t3",
		"2 of 6 agent × task cells disagree",
		// Reproducibility per agent; see TestSpreadFixture for the numbers.
		"| alpha | 57.1% | 0.0% – 100.0% | 1/3 (33.3%) | ± 20.2 points | 16.1 points |",
		`| be\|ta \<b\> | 14.3% | `,
		"Run to run counts trial noise only",
		"Regrades: 2 checked, 1 differed.",
		`**Warning: flaky tasks.** A regrade changed a verdict of t2: their grader is not deterministic. These scores count them: alpha (1), be\|ta \<b\> (1).`,
		"1 trials failed verification",
		"bundle: digest mismatch",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "be|ta") || strings.Contains(out, "<b>") {
		t.Error("Markdown holds an unescaped name")
	}
}

func TestJSONNoNaN(t *testing.T) {
	// A lone trial gives an agent figures that are undefined: the JSON
	// must say null for them, not NaN (which encoding/json refuses).
	lone := fixture()
	lone.Trials = append(lone.Trials, Trial{Agent: "lone", Task: "t1", Status: "clean", Passed: true, Verified: true})
	for name, in := range map[string]Input{
		"fixture": fixture(), "hostile": hostile(), "lone": lone, "empty": {Agents: []string{"a"}},
	} {
		t.Run(name, func(t *testing.T) {
			r := Build(in)
			for _, a := range r.Agents {
				vs := []float64{a.PassRate, a.CILow, a.CIHigh, a.MeanReward}
				for _, p := range []*float64{a.BootLow, a.BootHigh, a.Disagreement, a.RunToRunSD, a.RunToRunMeanAbs} {
					if p != nil {
						vs = append(vs, *p)
					}
				}
				for _, k := range a.PassAtK {
					vs = append(vs, k.Value)
				}
				for _, v := range vs {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						t.Errorf("agent %s holds %v", a.Name, v)
					}
				}
			}
			var buf bytes.Buffer
			if err := r.JSON(&buf); err != nil {
				t.Fatal(err)
			}
			if s := buf.String(); strings.Contains(s, "NaN") || strings.Contains(s, "Inf") {
				t.Errorf("JSON holds NaN or Inf:\n%s", s)
			}
		})
	}
}

// The figures that need a counted trial, or a task with two, are null in
// the JSON where there is none; the counts stay numbers.
func TestJSONNull(t *testing.T) {
	in := Input{Agents: []string{"none", "lone", "pair"}, Trials: []Trial{
		{Agent: "lone", Task: "t", Status: "clean", Passed: true, Verified: true},
		{Agent: "pair", Task: "t", Status: "clean", Passed: true, Verified: true},
		{Agent: "pair", Task: "t", Index: 1, Status: "clean", Verified: true},
	}}
	var buf bytes.Buffer
	if err := Build(in).JSON(&buf); err != nil {
		t.Fatal(err)
	}
	var m struct {
		Agents []map[string]any `json:"agents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	null := func(keys ...string) map[string]bool {
		out := map[string]bool{}
		for _, k := range keys {
			out[k] = true
		}
		return out
	}
	for i, wantNull := range []map[string]bool{
		null("bootstrap_low", "bootstrap_high", "disagreement", "run_to_run_sd", "run_to_run_mean_abs"),
		null("disagreement", "run_to_run_sd", "run_to_run_mean_abs"),
		null(),
	} {
		a := m.Agents[i]
		for _, k := range []string{"bootstrap_low", "bootstrap_high", "repeated_tasks", "disagreeing_tasks",
			"disagreement", "single_trial_tasks", "run_to_run_sd", "run_to_run_mean_abs"} {
			v, ok := a[k]
			switch {
			case !ok:
				t.Errorf("%s lacks %q", a["name"], k)
			case wantNull[k] && v != nil:
				t.Errorf("%s: %s = %v, want null", a["name"], k, v)
			case !wantNull[k] && v == nil:
				t.Errorf("%s: %s = null, want a number", a["name"], k)
			}
		}
	}
}

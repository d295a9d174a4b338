package report

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// suiteOf is an input of one agent with, for each task in order, n clean
// counted trials of which the first c pass ({n, c} pairs; n = 0 lists the
// task without a trial).
func suiteOf(agent string, tasks ...[2]int) Input {
	in := Input{Suite: "s", Agents: []string{agent}}
	for ti, nc := range tasks {
		task := fmt.Sprintf("t%02d", ti)
		in.Tasks = append(in.Tasks, task)
		for i := range nc[0] {
			in.Trials = append(in.Trials, Trial{Agent: agent, Task: task, Index: i, Status: "clean",
				Passed: i < nc[1], Verified: true})
		}
	}
	return in
}

// times is tasks with every n and c multiplied by k: the same pass rates
// with k times the trials.
func times(k int, tasks ...[2]int) [][2]int {
	out := make([][2]int, len(tasks))
	for i, nc := range tasks {
		out[i] = [2]int{k * nc[0], k * nc[1]}
	}
	return out
}

func val(p *float64) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// want is one agent's expected reproducibility figures; a nil pointer is
// an undefined figure.
type want struct {
	bootLow, bootHigh              *float64
	repeated, disagreeing, single  int
	disagreement, runSD, runMeanAb *float64
}

func checkSpread(t *testing.T, a AgentSummary, w want) {
	t.Helper()
	eq := func(name string, got, want *float64) {
		t.Helper()
		if (got == nil) != (want == nil) || got != nil && !near(*got, *want, 1e-12) {
			t.Errorf("%s = %s, want %s", name, val(got), val(want))
		}
	}
	eq("bootstrap low", a.BootLow, w.bootLow)
	eq("bootstrap high", a.BootHigh, w.bootHigh)
	eq("disagreement", a.Disagreement, w.disagreement)
	eq("run to run s.d.", a.RunToRunSD, w.runSD)
	eq("run to run mean |difference|", a.RunToRunMeanAbs, w.runMeanAb)
	if a.RepeatedTasks != w.repeated || a.DisagreeingTasks != w.disagreeing || a.SingleTrialTasks != w.single {
		t.Errorf("repeated/disagreeing/single-trial tasks = %d/%d/%d, want %d/%d/%d",
			a.RepeatedTasks, a.DisagreeingTasks, a.SingleTrialTasks, w.repeated, w.disagreeing, w.single)
	}
}

// Figures that are exact whatever the random draws.
func TestSpreadExact(t *testing.T) {
	zero, one := ptr(0), ptr(1)
	tests := []struct {
		name  string
		tasks [][2]int
		want  want
	}{
		// Trials that all agree on one task: every resample is the data.
		{"one task, all pass", [][2]int{{3, 3}},
			want{bootLow: one, bootHigh: one, repeated: 1, disagreement: zero, runSD: zero, runMeanAb: zero}},
		{"one task, all fail", [][2]int{{4, 0}},
			want{bootLow: zero, bootHigh: zero, repeated: 1, disagreement: zero, runSD: zero, runMeanAb: zero}},
		{"all pass", [][2]int{{2, 2}, {5, 5}, {3, 3}},
			want{bootLow: one, bootHigh: one, repeated: 3, disagreement: zero, runSD: zero, runMeanAb: zero}},
		// Every task's trials agree, but the tasks differ: no trial noise,
		// so run to run is 0, while the bootstrap still samples the tasks:
		// both draws are the passing task with probability 1/4 (score 1),
		// both the failing one with 1/4 (score 0), far above 2.5% each.
		{"tasks agree, differ", [][2]int{{2, 2}, {2, 0}},
			want{bootLow: zero, bootHigh: one, repeated: 2, disagreement: zero, runSD: zero, runMeanAb: zero}},
		// One trial per task: nothing to compare, so only the bootstrap
		// (here over tasks that all fail) is defined.
		{"single trials", [][2]int{{1, 0}, {1, 0}, {0, 0}},
			want{bootLow: zero, bootHigh: zero, single: 2}},
		{"no trial", [][2]int{{0, 0}}, want{}},
		// One task, 2 of 4: a resample of its 4 trials has no pass with
		// probability (1/2)^4 = 6.25% and 4 with as much, both far above
		// 2.5% (≈125 of 2,000 resamples each, the 50th is needed), so the
		// interval is all of [0, 1].
		{"one task, 2 of 4", [][2]int{{4, 2}},
			want{bootLow: zero, bootHigh: one, repeated: 1, disagreeing: 1, disagreement: one,
				// Var = c(n−c)/(n−1)/N² = 2·2/3/16 = 1/12.
				runSD: ptr(math.Sqrt(2.0 / 12)), runMeanAb: ptr(math.Sqrt(2.0/12) * math.Sqrt(2/math.Pi))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkSpread(t, Build(suiteOf("a", tt.tasks...)).Agents[0], tt.want)
		})
	}
}

func TestRunToRunByHand(t *testing.T) {
	t.Run("pooled", func(t *testing.T) {
		// Tasks (n, c): (4, 2), (5, 1), (1, 1), (3, 3) and one not run; N = 13.
		// c(n−c)/(n−1) per task: 2·2/3 = 4/3, 1·4/4 = 1, 0 (one trial),
		// 3·0/2 = 0; Σ = 7/3, Var = (7/3)/13² = 7/507 ≈ 0.0138067.
		// s.d. of the difference = √(14/507) ≈ 0.1661728;
		// expected |difference| = 0.1661728·√(2/π) ≈ 0.1325867.
		a := Build(suiteOf("a", [2]int{4, 2}, [2]int{5, 1}, [2]int{1, 1}, [2]int{3, 3}, [2]int{0, 0})).Agents[0]
		if a.RunToRunSD == nil || !near(*a.RunToRunSD, 0.1661728, 1e-7) {
			t.Errorf("run to run s.d. = %s, want ≈ 0.1661728", val(a.RunToRunSD))
		}
		if a.RunToRunMeanAbs == nil || !near(*a.RunToRunMeanAbs, 0.1325867, 1e-7) {
			t.Errorf("run to run mean |difference| = %s, want ≈ 0.1325867", val(a.RunToRunMeanAbs))
		}
		if a.RepeatedTasks != 3 || a.DisagreeingTasks != 2 || a.SingleTrialTasks != 1 ||
			a.Disagreement == nil || !near(*a.Disagreement, 2.0/3, 1e-12) {
			t.Errorf("repeated/disagreeing/single = %d/%d/%d, share %s; want 3/2/1, 2/3",
				a.RepeatedTasks, a.DisagreeingTasks, a.SingleTrialTasks, val(a.Disagreement))
		}
	})
	t.Run("per-task form", func(t *testing.T) {
		// Equal n = 4, c = 1 and 2: the per-task form
		// (1/T²)·Σ p̂(1−p̂)·n/(n−1)/n = (1/4)·(3/16 + 4/16)/3 = 7/192, and
		// the pooled form (1·3/3 + 2·2/3)/8² = 7/192 too; the s.d. of the
		// difference is √(2·7/192) ≈ 0.2700309.
		a := Build(suiteOf("a", [2]int{4, 1}, [2]int{4, 2})).Agents[0]
		if a.RunToRunSD == nil || !near(*a.RunToRunSD, 0.2700309, 1e-7) {
			t.Errorf("run to run s.d. = %s, want ≈ 0.2700309", val(a.RunToRunSD))
		}
	})
}

func TestSpreadFixture(t *testing.T) {
	r := Build(fixture())
	// alpha: t1 2/3, t2 2/2, t3 0/2; beta: t1 0/3, t2 1/2 (the compromised
	// pass fails), t3 0/2. Each has one disagreeing task of 3 with two
	// trials or more, and Var = (2·1/2 + 0 + 0)/7² = 1/49 for alpha and
	// (0 + 1·1/1 + 0)/7² = 1/49 for beta: s.d. √2/7 ≈ 0.2020305, mean
	// |difference| 2/(7√π) ≈ 0.1611970.
	//
	// alpha's bootstrap is [0, 1]: a drawn task adds no pass with
	// probability 1/3 (t3) + 1/3·1/27 (t1) ≈ 0.346, so all 3 with ≈ 4.1%
	// (≈ 83 of 2,000 resamples); it adds only passes with 1/3 (t2) +
	// 1/3·8/27 (t1) ≈ 0.432, all 3 with ≈ 8.1%. Both are above 2.5%.
	third := ptr(1.0 / 3)
	sd, mad := ptr(math.Sqrt2/7), ptr(2/(7*math.Sqrt(math.Pi)))
	checkSpread(t, r.Agents[0], want{bootLow: ptr(0), bootHigh: ptr(1), repeated: 3, disagreeing: 1,
		disagreement: third, runSD: sd, runMeanAb: mad})
	b := r.Agents[1]
	b.BootLow, b.BootHigh = nil, nil // not exact: see TestBootstrapSanity
	checkSpread(t, b, want{repeated: 3, disagreeing: 1, disagreement: third, runSD: sd, runMeanAb: mad})

	// The per-agent counts reuse the cells' definition.
	sum := 0
	for _, a := range r.Agents {
		sum += a.DisagreeingTasks
	}
	if sum != r.Reproducibility.Disagreeing {
		t.Errorf("disagreeing tasks sum to %d over the agents, cells disagreeing = %d", sum, r.Reproducibility.Disagreeing)
	}
}

func TestBootstrapDeterministic(t *testing.T) {
	in := large()
	first, second := Build(in), Build(in)
	if !reflect.DeepEqual(first.Agents, second.Agents) {
		t.Error("two builds of the same input differ")
	}
	// An agent's interval depends on its trials only: not on the other
	// agents, their order, or the order of the tasks and trials.
	sub := in
	sub.Agents = []string{in.Agents[3], in.Agents[0]}
	sub.Tasks = slices.Clone(in.Tasks)
	slices.Reverse(sub.Tasks)
	sub.Trials = nil
	for _, tr := range slices.Backward(in.Trials) {
		if tr.Agent == in.Agents[0] || tr.Agent == in.Agents[3] {
			sub.Trials = append(sub.Trials, tr)
		}
	}
	got := Build(sub)
	for i, ai := range []int{3, 0} {
		g, w := got.Agents[i], first.Agents[ai]
		if *g.BootLow != *w.BootLow || *g.BootHigh != *w.BootHigh {
			t.Errorf("%s: interval [%v, %v] alone, [%v, %v] with the others", g.Name, *g.BootLow, *g.BootHigh, *w.BootLow, *w.BootHigh)
		}
	}
}

func TestBootstrapSanity(t *testing.T) {
	mixed := [][2]int{{2, 1}, {2, 2}, {2, 0}, {2, 1}, {2, 1}, {2, 2}, {2, 0}, {2, 1}, {2, 2}, {2, 1}}
	halves := slices.Repeat([][2]int{{2, 1}}, 20)
	inputs := map[string]Input{
		"fixture": fixture(), "large": large(), "hostile": hostile(),
		"mixed": suiteOf("a", mixed...), "mixed ×10": suiteOf("a", times(10, mixed...)...),
		"halves": suiteOf("a", halves...), "halves ×10": suiteOf("a", times(10, halves...)...),
	}
	width := map[string]float64{}
	for name, in := range inputs {
		for _, a := range Build(in).Agents {
			if a.BootLow == nil || a.BootHigh == nil {
				t.Errorf("%s/%s: no interval", name, a.Name)
				continue
			}
			lo, hi := *a.BootLow, *a.BootHigh
			if !(0 <= lo && lo <= a.PassRate && a.PassRate <= hi && hi <= 1) {
				t.Errorf("%s/%s: interval [%v, %v] does not hold the pass rate %v inside [0, 1]", name, a.Name, lo, hi, a.PassRate)
			}
			width[name] = hi - lo
		}
	}
	// Ten times the trials, same rates: the trial noise shrinks, the task
	// sampling does not. With every task at 1/2 there is only trial noise
	// (resampling such tasks changes nothing): the resampled score is
	// Binomial(40, 1/2)/40, s.d. 0.079, against Binomial(400, 1/2)/400,
	// s.d. 0.025, so the width falls to about a third.
	for _, tt := range []struct {
		name string
		most float64
	}{{"mixed", 1}, {"halves", 0.5}} {
		if w, w10 := width[tt.name], width[tt.name+" ×10"]; !(w10 < tt.most*w) {
			t.Errorf("%s: width %v with ten times the trials, %v without; want below %v×", tt.name, w10, w, tt.most)
		}
	}
	// Sign of life: the large suite's interval, of 1,000 trials over 100
	// tasks, is neither a point nor everything.
	if w := width["large"]; w < 0.01 || w > 0.3 {
		t.Errorf("large: width %v", w)
	}
}

// Each of the resampler's tables holds the distribution of the sum of
// 2^j drawn tasks (checked exactly, from the table, against sums computed
// one task at a time from the binomial formula), draw reads a table that
// way, and a resample adds up as many tasks as the agent ran.
func TestResamplerTables(t *testing.T) {
	small := []cellAcc{{n: 3, passed: 2}, {n: 2, passed: 2}, {n: 0}, {n: 2, passed: 0},
		{n: 5, passed: 1}, {n: 3, passed: 2}, {n: 1, passed: 1}, {n: 2, passed: 1}, {n: 4, passed: 3}}
	// Trials from 1 to 1,000 a task: the sums are too spread out for
	// convolve's dense array, and go through its map.
	wide := []cellAcc{{n: 1, passed: 1}, {n: 1000, passed: 1000}, {n: 2, passed: 1}, {n: 1000}}
	// Every number of tasks from 1 to 8, so that a resample adds up draws
	// of every table, with every remainder of the largest.
	for end := 1; end <= len(small); end++ {
		if end == 3 {
			continue // the third cell is a task without trials: as for 2
		}
		tasks := end
		if end > 3 {
			tasks--
		}
		t.Run(fmt.Sprintf("%d tasks", tasks), func(t *testing.T) { checkResampler(t, small[:end]) })
	}
	t.Run("wide", func(t *testing.T) { checkResampler(t, wide) })
	if n := len(newResampler(small).tables); n < 3 {
		t.Errorf("8 tasks: %d tables, want the tables of 1, 2 and 4 tasks at least", n)
	}
}

func checkResampler(t *testing.T, cells []cellAcc) {
	// one is the distribution of one drawn task: C(n, x) p^x (1−p)^(n−x),
	// p = c/n, for each task with a trial, each with the same weight.
	one, tasks := map[outcome]float64{}, 0
	for _, c := range cells {
		if c.n > 0 {
			tasks++
		}
	}
	for _, c := range cells {
		if c.n == 0 {
			continue
		}
		p := float64(c.passed) / float64(c.n)
		for x := 0; x <= c.n; x++ {
			if b := binomial(c.n, x) * math.Pow(p, float64(x)) * math.Pow(1-p, float64(c.n-x)); b > 0 {
				one[newOutcome(x, c.n)] += b / float64(tasks)
			}
		}
	}
	sumOf := func(m int) map[outcome]float64 { // of m draws, one at a time
		d := map[outcome]float64{0: 1}
		for range m {
			next := map[outcome]float64{}
			for x, px := range d {
				for y, py := range one {
					next[x+y] += px * py
				}
			}
			d = next
		}
		return d
	}
	compare := func(name string, got, want map[outcome]float64, tol float64) {
		t.Helper()
		for o := range got {
			if _, ok := want[o]; !ok && got[o] > tol {
				t.Errorf("%s: P(%d of %d) = %v, want 0", name, o.passed(), o.trials(), got[o])
			}
		}
		for o, w := range want {
			if !near(got[o], w, tol) {
				t.Errorf("%s: P(%d of %d) = %v, want %v", name, o.passed(), o.trials(), got[o], w)
			}
		}
	}
	// Frequencies of draws are within 0.006 (more than 5 standard
	// deviations) of the probabilities.
	const draws = 200_000
	pcg := rand.NewPCG(3, 4)
	freq := func(draw func() outcome) map[outcome]float64 {
		seen := map[outcome]float64{}
		for range draws {
			seen[draw()] += 1.0 / draws
		}
		return seen
	}

	rs := newResampler(cells)
	// Tables of 1, 2, 4 … tasks, none of more than the agent ran.
	if rs.tasks != tasks || len(rs.tables) == 0 || 1<<(len(rs.tables)-1) > tasks {
		t.Fatalf("tasks = %d, tables = %d", rs.tasks, len(rs.tables))
	}
	for j, tab := range rs.tables {
		got := map[outcome]float64{}
		k := float64(len(tab))
		for _, e := range tab {
			keep := float64(e.cut) / 0x1p64
			got[e.keep] += keep / k
			got[e.other] += (1 - keep) / k
		}
		compare(fmt.Sprintf("table %d", j), got, sumOf(1<<j), 1e-12)
	}
	compare("draw", freq(func() outcome { return rs.tables[0].draw(pcg.Uint64()) }), one, 0.006)
	compare("resample", freq(func() outcome { return rs.resample(pcg) }), sumOf(tasks), 0.006)
}

func binomial(n, k int) float64 {
	v := 1.0
	for i := 1; i <= k; i++ {
		v = v * float64(n-k+i) / float64(i)
	}
	return v
}

// The bootstrap agrees with the literal two-level resampling (draw tasks,
// then each drawn task's trials one by one), run here with ten times the
// resamples, to within the Monte Carlo error of 2,000 resamples.
func TestBootstrapMatchesLiteral(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var cells []cellAcc
	for range 30 {
		n := 1 + rng.IntN(6)
		cells = append(cells, cellAcc{n: n, passed: rng.IntN(n + 1)})
	}
	const resamples = 10 * bootResamples
	rates := make([]float64, resamples)
	for b := range rates {
		passed, n := 0, 0
		for range cells {
			c := cells[rng.IntN(len(cells))]
			n += c.n
			for range c.n {
				if rng.IntN(c.n) < c.passed {
					passed++
				}
			}
		}
		rates[b] = float64(passed) / float64(n)
	}
	slices.Sort(rates)
	k := resamples / 40
	wantLow, wantHigh := rates[k-1], rates[resamples-k]
	low, high := bootstrap(cells, 42)
	if !near(low, wantLow, 0.02) || !near(high, wantHigh, 0.02) {
		t.Errorf("bootstrap = [%v, %v], literal resampling [%v, %v]", low, high, wantLow, wantHigh)
	}
}

func TestBinomialPMF(t *testing.T) {
	// Binomial(4, 1/2): 1 4 6 4 1 sixteenths.
	for k, w := range []float64{1, 4, 6, 4, 1} {
		if got := binomialPMF(4, 2)[k]; !near(got, w/16, 1e-12) {
			t.Errorf("P(X = %d) = %v, want %v/16", k, got, w)
		}
	}
	// A large n has terms below the smallest float64: they are 0, the
	// rest still sums to 1, and nothing is NaN.
	sum := 0.0
	for _, p := range binomialPMF(5000, 1) {
		if math.IsNaN(p) || p < 0 {
			t.Fatalf("P = %v", p)
		}
		sum += p
	}
	if !near(sum, 1, 1e-9) {
		t.Errorf("Σ P = %v, want 1", sum)
	}
}

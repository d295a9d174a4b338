package report

import (
	"cmp"
	"maps"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
)

// outcome is what drawn tasks add to a bootstrap resample, their trials n
// and the passes x among their resampled trials, packed as n<<32 | x so
// that the sum of outcomes is the outcome of their sum (a resample has
// fewer than 2^32 passes).
type outcome uint64

func newOutcome(x, n int) outcome { return outcome(n)<<32 | outcome(x) }
func (o outcome) passed() int     { return int(o & math.MaxUint32) }
func (o outcome) trials() int     { return int(o >> 32) }

// dist is a distribution over outcomes, in increasing order.
type dist struct {
	out []outcome
	p   []float64
}

// resampler draws an agent's bootstrap resamples.
//
// One drawn task adds (x, n) to a resample, where n is the task's trials
// and x, the passes among n trials drawn with replacement from n of which
// c passed, is Binomial(n, c/n). Drawing a task uniformly and then x is
// one draw from D, the mixture over the agent's tasks of those binomials,
// and a resample's outcome is the sum of T independent draws from D. The
// sum of 2^j of them has the distribution D^{*2^j}, D convolved with
// itself 2^j times; tables[j] is an alias table (Walker's method, in
// Vose's form) of D^{*2^j}, so that a resample takes as many random
// numbers as the tables it needs to add up T, not one per trial. The
// table of 2^(j+1) tasks is built from that of 2^j while the products
// its convolution takes are fewer than the draws it saves, about
// bootResamples·T/2^(j+1). With 100 tasks of 10 trials each, say, D^{*16}
// has 161 outcomes, D^{*32} is not worth building, and a resample is 6
// draws of 16 tasks and one of 4.
//
// A resampler is immutable once built; resample takes the generator.
type resampler struct {
	tasks  int // T, the agent's tasks with a counted trial
	tables []aliasTable
}

// newResampler returns the resampler of an agent's cells, or nil when no
// cell has a trial. It depends only on how many tasks have each n and c,
// not on their order.
func newResampler(cells []cellAcc) *resampler {
	count := map[[2]int]int{} // tasks by n and c
	tasks := 0
	for i := range cells {
		if c := &cells[i]; c.n > 0 {
			count[[2]int{c.n, c.passed}]++
			tasks++
		}
	}
	if tasks == 0 {
		return nil
	}
	// Sums in a fixed order, so that not even rounding depends on the
	// maps' order.
	weight := map[outcome]float64{}
	for _, nc := range slices.SortedFunc(maps.Keys(count), func(a, b [2]int) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	}) {
		n, c, m := nc[0], nc[1], float64(count[nc])/float64(tasks)
		if c == 0 || c == n {
			// All pass or all fail: every resample of the trials is the same.
			weight[newOutcome(c, n)] += m
			continue
		}
		for x, p := range binomialPMF(n, c) {
			if p > 0 {
				weight[newOutcome(x, n)] += m * p
			}
		}
	}
	d := distOf(weight)
	rs := &resampler{tasks: tasks, tables: []aliasTable{newAliasTable(d)}}
	for m := 2; m <= tasks && len(d.out)*len(d.out) <= bootResamples*(tasks/m); m *= 2 {
		d = convolve(d, d)
		rs.tables = append(rs.tables, newAliasTable(d))
	}
	return rs
}

// resample draws one resample's outcome: the sum of T draws from D, taken
// as q draws of the largest table's 2^j and one draw of each table the
// binary digits of the remainder T − q·2^j name.
func (rs *resampler) resample(pcg *rand.PCG) outcome {
	var sum outcome
	top := len(rs.tables) - 1
	for range rs.tasks >> top {
		sum += rs.tables[top].draw(pcg.Uint64())
	}
	for j, r := 0, rs.tasks&(1<<top-1); r > 0; j, r = j+1, r>>1 {
		if r&1 == 1 {
			sum += rs.tables[j].draw(pcg.Uint64())
		}
	}
	return sum
}

// convolve returns the distribution of the sum of a draw from a and an
// independent one from b. The sums are added up in a dense array indexed
// by trials and passes when it is not much larger than the pairs of
// outcomes (it is when the tasks' trials differ little), else in a map.
func convolve(a, b dist) dist {
	nLo := a.out[0].trials() + b.out[0].trials()
	nHi := a.out[len(a.out)-1].trials() + b.out[len(b.out)-1].trials()
	xs := maxPassed(a) + maxPassed(b) + 1
	if cells := (nHi - nLo + 1) * xs; cells <= 4*len(a.out)*len(b.out) {
		grid := make([]float64, cells)
		for i, x := range a.out {
			for j, y := range b.out {
				s := x + y
				grid[(s.trials()-nLo)*xs+s.passed()] += a.p[i] * b.p[j]
			}
		}
		var d dist
		for k, p := range grid { // in increasing order of outcome
			if p > 0 {
				d.out = append(d.out, newOutcome(k%xs, nLo+k/xs))
				d.p = append(d.p, p)
			}
		}
		return d
	}
	w := make(map[outcome]float64, len(a.out)+len(b.out))
	for i, x := range a.out {
		for j, y := range b.out {
			w[x+y] += a.p[i] * b.p[j]
		}
	}
	return distOf(w)
}

func maxPassed(d dist) int {
	m := 0
	for _, o := range d.out {
		m = max(m, o.passed())
	}
	return m
}

// distOf returns the distribution with the given weights, in increasing
// order of outcome.
func distOf(w map[outcome]float64) dist {
	d := dist{out: slices.Sorted(maps.Keys(w))}
	d.p = make([]float64, len(d.out))
	for i, o := range d.out {
		d.p[i] = w[o]
	}
	return d
}

// aliasTable is an alias table: entry i of k is drawn with probability 1/k,
// and then gives keep when a uniform fraction is below cut/2^64, else
// other.
type aliasTable []aliasEntry

type aliasEntry struct {
	cut         uint64
	keep, other outcome
}

// newAliasTable builds the alias table of d (whose probabilities sum to 1
// up to rounding) by Vose's method.
func newAliasTable(d dist) aliasTable {
	k := len(d.out)
	t := make(aliasTable, k)
	scaled := make([]float64, k) // probability × k
	var small, large []int
	for i, o := range d.out {
		t[i].keep = o
		scaled[i] = d.p[i] * float64(k)
		if scaled[i] < 1 {
			small = append(small, i)
		} else {
			large = append(large, i)
		}
	}
	for len(small) > 0 && len(large) > 0 {
		s, l := small[len(small)-1], large[len(large)-1]
		small = small[:len(small)-1]
		t[s].cut, t[s].other = fraction(scaled[s]), d.out[l]
		scaled[l] -= 1 - scaled[s]
		if scaled[l] < 1 {
			large = large[:len(large)-1]
			small = append(small, l)
		}
	}
	// What is left has probability 1 up to rounding: it is always kept.
	for _, i := range append(small, large...) {
		t[i].cut, t[i].other = math.MaxUint64, d.out[i]
	}
	return t
}

// draw maps a uniform 64-bit number to an outcome: the high word of u·k
// picks one of the k entries, the low word is the fraction compared with
// its cut.
func (t aliasTable) draw(u uint64) outcome {
	i, f := bits.Mul64(u, uint64(len(t)))
	e := &t[i]
	o := e.keep
	if f >= e.cut {
		o = e.other
	}
	return o
}

// fraction is x in [0, 1) as a fraction of 2^64.
func fraction(x float64) uint64 {
	if x <= 0 {
		return 0
	}
	if f := x * 0x1p64; f < 0x1p64 {
		return uint64(f)
	}
	return math.MaxUint64
}

// binomialPMF returns P(X = k) for k = 0 .. n, X ~ Binomial(n, c/n),
// 0 < c < n, computed from log-probabilities (a term too small for a
// float64 is 0) and scaled to sum to 1.
func binomialPMF(n, c int) []float64 {
	p := float64(c) / float64(n)
	lp, lq := math.Log(p), math.Log1p(-p)
	lgN, _ := math.Lgamma(float64(n + 1))
	pmf := make([]float64, n+1)
	sum := 0.0
	for k := range pmf {
		a, _ := math.Lgamma(float64(k + 1))
		b, _ := math.Lgamma(float64(n - k + 1))
		pmf[k] = math.Exp(lgN - a - b + float64(k)*lp + float64(n-k)*lq)
		sum += pmf[k]
	}
	for k := range pmf {
		pmf[k] /= sum
	}
	return pmf
}

package report

import (
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
)

// bootResamples is the number of bootstrap resamples of each agent's score.
const bootResamples = 2000

// bootStream is the PCG stream (second seed word) of every bootstrap; the
// first word is the hash of the agent's name.
const bootStream = 0x70726f63746f7231 // "proctor1"

// disagrees reports whether a cell's counted trials include both a pass and
// a failure, which needs at least two of them. It is the one definition of
// a disagreeing cell, used by the reproducibility table and by each agent's
// share of disagreeing tasks.
func (c *cellAcc) disagrees() bool { return c.passed > 0 && c.passed < c.n }

// spread fills the reproducibility fields of s from the agent's cells, one
// per task (cells of tasks the agent did not run have n = 0).
func (s *AgentSummary) spread(cells []cellAcc) {
	trials := 0
	for i := range cells {
		c := &cells[i]
		trials += c.n
		switch {
		case c.n == 1:
			s.SingleTrialTasks++
		case c.n >= 2:
			s.RepeatedTasks++
			if c.disagrees() {
				s.DisagreeingTasks++
			}
		}
	}
	if s.RepeatedTasks > 0 {
		s.Disagreement = ptr(ratio(s.DisagreeingTasks, s.RepeatedTasks))
		sd, mad := runToRun(cells)
		s.RunToRunSD, s.RunToRunMeanAbs = ptr(sd), ptr(mad)
	}
	if trials > 0 {
		low, high := bootstrap(cells, seed(s.Name))
		s.BootLow, s.BootHigh = ptr(low), ptr(high)
	}
}

// runToRun estimates how far the pass rate (passed/trials, pooled over the
// agent's N counted trials) of a second, independent run of the same tasks
// with the same trials per task would be from the first. Task t's passes
// are Binomial(n_t, p_t), so one run's rate has variance
// Var = Σ_t n_t·p_t(1−p_t) / N². With c_t passes, n_t·p_t(1−p_t) is
// estimated without bias by n_t²·p̂(1−p̂)/(n_t−1) = c_t(n_t−c_t)/(n_t−1)
// for n_t ≥ 2; a task with one trial adds nothing. The difference of two
// runs has variance 2·Var: sd is its standard deviation and meanAbs its
// expected absolute value were it normal, sd·√(2/π). Both are 0 when no
// task has trials.
func runToRun(cells []cellAcc) (sd, meanAbs float64) {
	v, trials := 0.0, 0
	for i := range cells {
		c := &cells[i]
		trials += c.n
		if c.n >= 2 {
			v += float64(c.passed) * float64(c.n-c.passed) / float64(c.n-1)
		}
	}
	if trials == 0 {
		return 0, 0
	}
	v /= float64(trials) * float64(trials)
	sd = math.Sqrt(2 * v)
	return sd, sd * math.Sqrt(2/math.Pi)
}

// seed is the bootstrap seed of an agent: the FNV-1a hash of its name, so
// an agent's interval depends on its own trials only and the same store
// gives the same report.
func seed(agent string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(agent))
	return h.Sum64()
}

// bootstrap returns the two-level bootstrap 95% percentile interval of the
// pooled pass rate over the tasks with n > 0: each of bootResamples
// resamples draws as many tasks as the agent ran, with replacement, and,
// for each drawn task, its n trials with replacement from its own; the
// resample's rate is the passes over the trials drawn. The interval runs
// from the ⌈2.5%⌉-th smallest to the as many-th largest of the resampled
// rates. It is [0, 0] when no task has trials. The resampler draws the
// same distribution with far fewer random numbers than one per trial.
func bootstrap(cells []cellAcc, seed uint64) (low, high float64) {
	rs := newResampler(cells)
	if rs == nil {
		return 0, 0
	}
	pcg := rand.NewPCG(seed, bootStream)
	rates := make([]float64, bootResamples)
	for b := range rates {
		sum := rs.resample(pcg)
		rates[b] = float64(sum.passed()) / float64(sum.trials())
	}
	slices.Sort(rates)
	k := int(math.Ceil(0.025 * bootResamples))
	return rates[k-1], rates[bootResamples-k]
}

func ptr(x float64) *float64 { return &x }

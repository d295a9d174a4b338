package report

import (
	"math"
	"slices"
)

// z95 is the two-sided 95% quantile of the standard normal distribution.
const z95 = 1.959963984540054

// wilson returns the 95% Wilson score interval for passed successes out of
// n trials; [0, 1] when n is 0.
func wilson(passed, n int) (low, high float64) {
	if n <= 0 {
		return 0, 1
	}
	nf := float64(n)
	p := float64(passed) / nf
	z2 := z95 * z95
	den := 1 + z2/nf
	center := (p + z2/(2*nf)) / den
	half := z95 / den * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	low, high = center-half, center+half
	// Exact at the ends; rounding must not push them out of [0, 1].
	if passed == 0 {
		low = 0
	}
	if passed == n {
		high = 1
	}
	return max(0, low), min(1, high)
}

// passAtK is the unbiased estimator of pass@k for one task with n trials of
// which c passed: 1 - C(n-c, k)/C(n, k), computed as a product so it never
// overflows. It is 0 for k > n or k < 1.
func passAtK(n, c, k int) float64 {
	if k < 1 || k > n || n <= 0 {
		return 0
	}
	if n-c < k {
		return 1
	}
	prod := 1.0
	for i := n - c + 1; i <= n; i++ {
		prod *= 1 - float64(k)/float64(i)
	}
	return 1 - prod
}

// signTest is the exact two-sided sign test p-value for wins against losses
// (ties already dropped): min(1, 2·P(X ≤ min(wins, losses))) with
// X ~ Binomial(wins+losses, 1/2). It is 1 when there is nothing to test.
func signTest(wins, losses int) float64 {
	n := wins + losses
	if n == 0 {
		return 1
	}
	k := min(wins, losses)
	lgN, _ := math.Lgamma(float64(n + 1))
	sum := 0.0
	for i := 0; i <= k; i++ {
		a, _ := math.Lgamma(float64(i + 1))
		b, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lgN - a - b - float64(n)*math.Ln2)
	}
	return min(1, 2*sum)
}

// nearestRank returns the q-quantile (0 < q ≤ 1) of xs by the nearest-rank
// method: the smallest value with at least q of xs at or below it. It sorts
// xs in place; 0 for an empty slice.
func nearestRank(xs []int64, q float64) int64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	rank := int(math.Ceil(q * float64(len(xs))))
	rank = max(1, min(rank, len(xs)))
	return xs[rank-1]
}

// stddev is the population standard deviation of xs; 0 for fewer than two.
func stddev(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	mean := 0.0
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	ss := 0.0
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return math.Sqrt(ss / float64(len(xs)))
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

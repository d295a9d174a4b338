package report

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestWilson(t *testing.T) {
	// Known values of the 95% Wilson score interval.
	tests := []struct {
		passed, n int
		low, high float64
	}{
		{0, 10, 0, 0.27753},
		{5, 10, 0.23659, 0.76341},
		{10, 10, 0.72247, 1},
		{1, 1, 0.20654, 1},
		{0, 0, 0, 1},
	}
	for _, tt := range tests {
		low, high := wilson(tt.passed, tt.n)
		if !near(low, tt.low, 1e-5) || !near(high, tt.high, 1e-5) {
			t.Errorf("wilson(%d, %d) = [%.6f, %.6f], want [%.5f, %.5f]", tt.passed, tt.n, low, high, tt.low, tt.high)
		}
	}
}

func TestPassAtK(t *testing.T) {
	tests := []struct {
		n, c, k int
		want    float64
	}{
		{5, 2, 1, 0.4},
		{5, 2, 2, 0.7}, // 1 - C(3,2)/C(5,2) = 1 - 3/10
		{5, 2, 4, 1},   // n-c < k
		{5, 0, 1, 0},
		{5, 0, 5, 0},
		{5, 5, 1, 1},
		{5, 5, 5, 1},
		{10, 3, 5, 1 - 21.0/252}, // C(7,5)=21, C(10,5)=252
		{5, 2, 6, 0},             // k > n is undefined: 0
		{1000, 1, 1, 0.001},      // large n does not overflow
	}
	for _, tt := range tests {
		if got := passAtK(tt.n, tt.c, tt.k); !near(got, tt.want, 1e-12) {
			t.Errorf("passAtK(%d, %d, %d) = %v, want %v", tt.n, tt.c, tt.k, got, tt.want)
		}
	}
}

func TestSignTest(t *testing.T) {
	tests := []struct {
		wins, losses int
		want         float64
	}{
		{8, 0, 0.0078125}, // 2 · 1/256
		{0, 8, 0.0078125},
		{5, 5, 1},
		{0, 0, 1},
		{1, 0, 1},
		{9, 1, 0.021484375}, // 2 · 11/1024
		{6, 2, 0.2890625},   // 2 · 37/256
		{2000, 0, 0},        // far beyond 2^-1074: underflows to 0, no NaN
	}
	for _, tt := range tests {
		got := signTest(tt.wins, tt.losses)
		if !near(got, tt.want, 1e-12) || math.IsNaN(got) {
			t.Errorf("signTest(%d, %d) = %v, want %v", tt.wins, tt.losses, got, tt.want)
		}
	}
}

func TestNearestRank(t *testing.T) {
	xs := []int64{50, 10, 40, 30, 20, 60, 70, 80, 90, 100}
	if got := nearestRank(xs, 0.5); got != 50 {
		t.Errorf("median = %d, want 50", got)
	}
	if got := nearestRank(xs, 0.9); got != 90 {
		t.Errorf("p90 = %d, want 90", got)
	}
	if got := nearestRank(nil, 0.5); got != 0 {
		t.Errorf("median of nothing = %d, want 0", got)
	}
}

func TestStddev(t *testing.T) {
	if got := stddev([]float64{1, 0, 1, 0}); !near(got, 0.5, 1e-12) {
		t.Errorf("stddev = %v, want 0.5", got)
	}
	if got := stddev([]float64{0.3}); got != 0 {
		t.Errorf("stddev of one = %v, want 0", got)
	}
}

package trial

import (
	"slices"
	"testing"
)

func TestChanges(t *testing.T) {
	v := func(passed bool, reward float64, outcomes map[string]string) *Verdict {
		return &Verdict{Passed: passed, Reward: reward, Status: StatusClean, Results: &ResultsRef{Outcomes: outcomes}}
	}
	same := []*Verdict{v(true, 1, map[string]string{"a": "passed"}), v(true, 1, map[string]string{"a": "passed"})}
	if c := Changes(same); len(c) != 0 {
		t.Errorf("agreeing verdicts: %q", c)
	}
	if c := Changes(same[:1]); c != nil {
		t.Errorf("one verdict: %q", c)
	}
	flaky := []*Verdict{
		v(true, 1, map[string]string{"a": "passed", "b": "passed"}),
		v(false, 0, map[string]string{"a": "passed", "b": "failed"}),
		v(true, 1, map[string]string{"a": "passed"}),
	}
	want := []string{"passed: [true false true]", "reward: [1 0 1]", "test b: [passed failed missing]"}
	if c := Changes(flaky); !slices.Equal(c, want) {
		t.Errorf("Changes = %q, want %q", c, want)
	}
}

package trial

import (
	"fmt"
	"slices"
)

// Changes lists what differs among verdicts of the same task that should
// agree (the oracle run again, or one changeset graded again): passed,
// reward and status, and each expected test's outcome; one line each, in
// a stable order, naming the runs' values in order. None means the
// verdicts agree, as a deterministic grader's must.
func Changes(vs []*Verdict) []string {
	if len(vs) < 2 {
		return nil
	}
	var out []string
	differ := func(what string, vals []string) {
		for _, v := range vals[1:] {
			if v != vals[0] {
				out = append(out, fmt.Sprintf("%s: %v", what, vals))
				return
			}
		}
	}
	each := func(f func(v *Verdict) string) []string {
		vals := make([]string, len(vs))
		for i, v := range vs {
			vals[i] = f(v)
		}
		return vals
	}
	differ("passed", each(func(v *Verdict) string { return fmt.Sprint(v.Passed) }))
	differ("reward", each(func(v *Verdict) string { return fmt.Sprint(v.Reward) }))
	differ("status", each(func(v *Verdict) string { return string(v.Status) }))
	var ids []string
	for _, v := range vs {
		if v.Results != nil {
			for id := range v.Results.Outcomes {
				if !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		differ("test "+id, each(func(v *Verdict) string {
			if v.Results == nil {
				return "no report"
			}
			if o, ok := v.Results.Outcomes[id]; ok {
				return o
			}
			return "missing"
		}))
	}
	return out
}

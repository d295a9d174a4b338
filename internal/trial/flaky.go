package trial

import (
	"fmt"
	"slices"
)

// Changes lists what differs among verdicts of the same task that should
// agree (the oracle run again, or one changeset graded again): passed,
// reward and status, and each test's outcome (every test the report named,
// and each expected test of structured results); one line each, in
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
	outcomes := make([]map[string]string, len(vs))
	seen := map[string]bool{}
	var ids []string
	for i, v := range vs {
		outcomes[i] = v.TestOutcomes()
		for id := range outcomes[i] {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		vals := make([]string, len(vs))
		for i, v := range vs {
			switch o, ok := outcomes[i][id]; {
			case ok:
				vals[i] = o
			case v.Results == nil && v.Tests == nil:
				vals[i] = "no report"
			default:
				vals[i] = "missing"
			}
		}
		differ("test "+id, vals)
	}
	return out
}

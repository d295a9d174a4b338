// Package report turns the results of a `proctor bench` suite into reports:
// JSON (the stable, documented form other tools read), Markdown, CSV and a
// single self-contained HTML file.
//
// [Build] takes an [Input] that the caller filled from the store and the
// verified bundles, and computes every number once; the writers only format
// the resulting [Report]. The package knows nothing of SQLite, files or
// bundles, and it must never read the file system, run anything, or fetch
// anything: the HTML it writes holds its CSS and SVG inline, loads nothing and
// runs no script. Agent and task names are untrusted (an agent chose neither,
// but a suite author did); every writer escapes them for its format.
//
// # Which trials count
//
// A trial counts when its bundle was verified (Trial.Verified) and it has run
// (Trial.Status is not ""). Pending trials are ignored; unverified trials are
// listed in Integrity.Unverified with their error and excluded from every
// number. A counted trial passes only when Passed is set and its Status is
// "clean": a compromised, errored, timed-out or over-limit trial is a failure
// whatever its grader said. Rewards are taken as recorded, except that a
// compromised trial's reward counts as 0.
//
// # Statistics
//
//   - pass_rate is passed/trials; ci_low and ci_high are the 95% Wilson
//     score interval (z = 1.959964), which, unlike the normal approximation,
//     stays inside [0, 1] and is meaningful at 0/n and n/n. With no counted
//     trials the rate is 0 and the interval [0, 1].
//   - pass_at_k holds k = 1 .. the smallest number of counted trials the
//     agent has on any task it ran, each the unbiased estimator
//     1 - C(n-c, k)/C(n, k) averaged over the tasks the agent ran, computed
//     as 1 - Π_{i=n-c+1..n} (1 - k/i) so it never overflows.
//   - wall_ms_median and wall_ms_p90 are nearest-rank percentiles (the
//     smallest recorded wall time with at least that fraction of counted
//     trials at or below it).
//   - A comparison of two agents uses the tasks both ran (at least one
//     counted trial each). Agent A wins a task when its pass rate on it is
//     higher than B's. p_value is the exact two-sided sign test over the
//     tasks where the rates differ (ties dropped): under the null hypothesis
//     each differing task is a fair coin, so p = min(1, 2·P(X ≤ min(wins,
//     losses))) with X ~ Binomial(wins+losses, 1/2); it is 1 when no task
//     differs. The sign test is chosen because per-task pass rates are
//     paired, bounded and far from normal, and it assumes nothing about
//     the size of the differences. mean_difference is the mean of
//     (A's rate − B's rate) over the shared tasks.
//   - A task is unsolved when some agent ran it and no counted trial of any
//     agent passed; it is solved_by_all when every agent of the suite has at
//     least one counted passing trial on it.
//   - Reproducibility: an agent × task cell disagrees when its counted
//     trials include both a pass and a failure; reward_stddev is the
//     population standard deviation of the cell's rewards (0 for one trial).
//   - Integrity: for each agent, the number of compromised trials and, for
//     each violation kind, the number of compromised trials showing it
//     (a trial counts once per kind however often the kind repeats).
//
// Agents and tasks appear in the order of Input.Agents and Input.Tasks;
// a trial naming an agent or task missing from those lists adds it at the
// end, in order of first appearance.
//
// # JSON schema "proctor.report/v1"
//
// The JSON form is one object; fields are never removed or renamed within
// a schema version, new fields may be added. Rates are numbers in [0, 1],
// times are milliseconds, "generated" is RFC 3339.
//
//	{
//	  "schema": "proctor.report/v1",
//	  "suite": string, "generated": string,
//	  "agents": [{
//	    "name": string, "tasks": int, "trials": int, "passed": int,
//	    "pass_rate": number, "ci_low": number, "ci_high": number,
//	    "mean_reward": number,
//	    "compromised": int, "errors": int, "timeouts": int, "limits": int,
//	    "pass_at_k": [{"k": int, "value": number}],
//	    "model_calls": int, "input_tokens": int, "output_tokens": int,
//	    "wall_ms_median": int, "wall_ms_p90": int
//	  }],
//	  "comparisons": [{
//	    "a": string, "b": string, "shared_tasks": int,
//	    "wins": int, "losses": int, "ties": int,
//	    "p_value": number, "mean_difference": number,
//	    "tasks": [{"task": string, "a_pass_rate": number, "b_pass_rate": number}]
//	  }],
//	  "matrix": {
//	    "agents": [string], "unsolved": [string], "solved_by_all": [string],
//	    "rows": [{"task": string, "cells": [
//	      {"agent": string, "trials": int, "passed": int, "pass_rate": number}]}]
//	  },
//	  "reproducibility": {
//	    "cells": int, "disagreeing": int,
//	    "results": [{"agent": string, "task": string, "trials": int,
//	      "passed": int, "disagree": bool, "reward_stddev": number}],
//	    "regrades": {"checked": int, "differing": int,
//	      "mismatches": [{"agent": string, "task": string, "index": int,
//	        "same": bool, "detail": string}]}
//	  },
//	  "integrity": {
//	    "compromised": int,
//	    "by_agent": [{"agent": string, "compromised": int,
//	      "kinds": {kind: int}}],
//	    "compromised_trials": [{"agent": string, "task": string,
//	      "index": int, "violations": [string], "bundle": string}],
//	    "unverified": [{"agent": string, "task": string, "index": int,
//	      "bundle": string, "error": string}]
//	  },
//	  "trials": [{"agent": string, "task": string, "index": int,
//	    "status": string, "passed": bool, "reward": number,
//	    "bundle": string, "verified": bool, "counted": bool}]
//	}
//
// The arrays are never null. "trials" lists every trial of the input,
// pending and unverified ones included (counted tells them apart), by agent,
// task and index.
//
// A Report is an immutable value once built; its writers may be called
// concurrently.
package report

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
// # How reproducible a score is
//
// An agent's score is its pass_rate, pooled over trials (passed/trials),
// not the mean of per-task pass rates; the two are equal when every task
// has as many trials, and the figures below are of the pooled score. T is
// the number of tasks with a counted trial of the agent, n_t and c_t a
// task's counted trials and passes, N = Σ_t n_t.
//
//   - bootstrap_low and bootstrap_high are a two-level bootstrap 95%
//     percentile interval: each of 2,000 resamples draws T of the T tasks
//     with replacement and, for each drawn task, n_t of its trials with
//     replacement; the resample's score is the passes drawn over the trials
//     drawn. The interval runs from the 50th smallest to the 50th largest
//     of the 2,000 scores. The draws come from a PCG (math/rand/v2)
//     seeded with the FNV-1a hash of the agent's name, so the same trials
//     give the same interval, whatever the other agents and whatever the
//     order of the tasks. (The passes among n_t trials drawn with
//     replacement are Binomial(n_t, c_t/n_t), so a drawn task adds a draw
//     from the mixture of those binomials over the tasks, and a resample
//     the sum of T such draws; the sums of 1, 2, 4 … draws are drawn
//     directly from alias tables of their distributions, computed
//     exactly. It is the same distribution as drawing each trial, with a
//     few random numbers per resample instead of one per trial.) The
//     interval covers both the sampling of tasks and the noise of trials;
//     null when the agent has no counted trial.
//   - repeated_tasks counts the tasks with at least 2 counted trials,
//     disagreeing_tasks those of them whose cell disagrees (as defined
//     above: summed over the agents, it is reproducibility.disagreeing),
//     and disagreement is disagreeing_tasks/repeated_tasks, null when
//     repeated_tasks is 0. single_trial_tasks counts the tasks with one.
//   - run_to_run_sd and run_to_run_mean_abs say how far the score of a
//     second, independent run of the same tasks with the same n_t would
//     be from this one. A task's passes are Binomial(n_t, p_t), so one
//     run's score has variance Var = Σ_t n_t·p_t(1−p_t) / N². For n_t ≥ 2,
//     n_t·p_t(1−p_t) is estimated without bias by
//     n_t·p̂(1−p̂)·n_t/(n_t−1) = c_t(n_t−c_t)/(n_t−1), with p̂ = c_t/n_t;
//     a task with one trial adds nothing (its trial still counts in N, so
//     the estimate is low by what such tasks would add; single_trial_tasks
//     says how many there are). With equal n_t = n this is the per-task
//     form Var = (1/T²)·Σ_t p̂(1−p̂)·n/(n−1)/n. The difference of two runs
//     has variance 2·Var: run_to_run_sd = √(2·Var), and
//     run_to_run_mean_abs = √(2·Var)·√(2/π), the expected absolute
//     difference were it normal. They measure trial noise only, the same
//     tasks run again, unlike the bootstrap interval; null when
//     repeated_tasks is 0.
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
//	    "wall_ms_median": int, "wall_ms_p90": int,
//	    "bootstrap_low": number|null, "bootstrap_high": number|null,
//	    "repeated_tasks": int, "disagreeing_tasks": int,
//	    "disagreement": number|null, "single_trial_tasks": int,
//	    "run_to_run_sd": number|null, "run_to_run_mean_abs": number|null
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
//	  "tests": [{"task": string, "informational": bool,
//	    "rows": [{"test": string, "cells": [
//	      {"agent": string, "trials": int, "passed": int, "pass_rate": number}]}]}],
//	  "trials": [{"agent": string, "task": string, "index": int,
//	    "status": string, "passed": bool, "reward": number,
//	    "bundle": string, "verified": bool, "counted": bool,
//	    "tests_passed": int, "tests_reported": int}]
//	}
//
// "tests" has a table for each task whose counted trials carry a test
// report (the verdict's per-test outcomes, see docs/trial.md): a row per
// test any of them named, a cell per agent; trials counts the agent's
// counted trials on the task with a report, passed those that reported
// the test passed (a report that does not name it counts as not passed).
// informational is set when a report on the task decided nothing (a CTRF
// report read beside a reward file, which the agent's code could have
// written). The Markdown and HTML forms show the first 100 tests of a task.
//
// The arrays are never null; number|null is null where the figure is
// undefined, and no number is NaN or infinite. "trials" lists every trial of the input,
// pending and unverified ones included (counted tells them apart), by agent,
// task and index.
//
// A Report is an immutable value once built; its writers may be called
// concurrently.
package report

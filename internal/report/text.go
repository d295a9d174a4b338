package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// JSON writes the report in its stable JSON form, schema "proctor.report/v1",
// indented, followed by a newline.
func (r *Report) JSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("writing JSON report: %w", err)
	}
	return nil
}

// csvHeader is the CSV form's header row.
var csvHeader = []string{
	"agent", "task", "index", "status", "passed", "reward", "counted",
	"wall_ms", "agent_ms", "grader_ms", "model_calls", "input_tokens",
	"output_tokens", "violations", "bundle", "verified", "verify_error",
	"tests_passed", "tests_reported",
}

// CSV writes one row per trial of the input (pending and unverified ones
// included, told apart by the counted column) after a header row, in
// RFC 4180 form. Violations are joined by ";".
func (r *Report) CSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(csvHeader); err != nil {
		return fmt.Errorf("writing CSV report: %w", err)
	}
	i64 := func(v int64) string { return strconv.FormatInt(v, 10) }
	for i := range r.all {
		t := &r.all[i]
		rec := []string{
			t.Agent, t.Task, strconv.Itoa(t.Index), t.Status,
			strconv.FormatBool(t.Passed),
			strconv.FormatFloat(t.Reward, 'g', -1, 64),
			strconv.FormatBool(counted(t)),
			i64(t.WallMS), i64(t.AgentMS), i64(t.GraderMS),
			strconv.Itoa(t.ModelCalls), i64(t.InputTokens), i64(t.OutputTokens),
			strings.Join(t.Violations, ";"), t.Bundle,
			strconv.FormatBool(t.Verified), t.VerifyError,
		}
		passed, reported := t.testCounts()
		rec = append(rec, strconv.Itoa(passed), strconv.Itoa(reported))
		if err := cw.Write(rec); err != nil {
			return fmt.Errorf("writing CSV report: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("writing CSV report: %w", err)
	}
	return nil
}

// mdEscaper escapes text for a Markdown table cell: every punctuation mark
// Markdown gives a meaning to, and line breaks, which would end the row.
var mdEscaper = strings.NewReplacer(
	`\`, `\\`, "|", `\|`, "*", `\*`, "_", `\_`, "`", "\\`", "[", `\[`,
	"]", `\]`, "<", `\<`, ">", `\>`, "#", `\#`, "~", `\~`, "&", `\&`,
	"!", `\!`, "\r\n", " ", "\n", " ", "\r", " ",
)

func md(s string) string { return mdEscaper.Replace(s) }

func pct(x float64) string { return strconv.FormatFloat(100*x, 'f', 1, 64) + "%" }

// points formats a difference of rates in percentage points.
func points(x float64) string { return strconv.FormatFloat(100*x, 'f', 1, 64) + " points" }

// undefined is the text of a figure that is undefined (null in JSON).
const undefined = "–"

// spreadNotes are the lines under the per-agent reproducibility table, in
// both the Markdown and the HTML form.
var spreadNotes = [...]string{
	fmt.Sprintf("Bootstrap: 95%% percentile interval of the pass rate over %d resamples of the agent's tasks, then of each drawn task's trials.", bootResamples),
	"Disagreeing tasks: of the tasks with at least 2 trials, those with both a pass and a failure.",
	"Run to run: the standard deviation and the expected size of the difference in pass rate between two runs of the same tasks with as many trials each.",
	"Run to run counts trial noise only (the same tasks again); the bootstrap interval also counts which tasks the suite happened to hold.",
}

// spreadText is the text of an agent's reproducibility figures, shared by
// the Markdown and HTML forms; undefined figures read undefined.
type spreadText struct {
	Boot, Disagreement, RunSD, RunMeanAbs string
}

func (a *AgentSummary) spreadText() spreadText {
	t := spreadText{Boot: undefined, Disagreement: undefined, RunSD: undefined, RunMeanAbs: undefined}
	if a.BootLow != nil && a.BootHigh != nil {
		t.Boot = pct(*a.BootLow) + " – " + pct(*a.BootHigh)
	}
	if a.Disagreement != nil {
		t.Disagreement = fmt.Sprintf("%d/%d (%s)", a.DisagreeingTasks, a.RepeatedTasks, pct(*a.Disagreement))
	}
	if a.RunToRunSD != nil && a.RunToRunMeanAbs != nil {
		t.RunSD, t.RunMeanAbs = "± "+points(*a.RunToRunSD), points(*a.RunToRunMeanAbs)
	}
	return t
}

// singleTrialNote says how many of an agent's tasks have one trial, and so
// add nothing to its run-to-run figures; "" when none has.
func (a *AgentSummary) singleTrialNote() string {
	if a.SingleTrialTasks == 0 {
		return ""
	}
	if a.SingleTrialTasks == 1 {
		return "1 task with one trial adds nothing to run to run."
	}
	return fmt.Sprintf("%d tasks with one trial add nothing to run to run.", a.SingleTrialTasks)
}

// Markdown writes a human-readable summary: the leaderboard, the pairwise
// comparisons, the task × agent matrix, reproducibility, each task's tests
// (up to maxTestRows of them) and integrity. The per-trial list is left to
// the CSV and JSON forms.
func (r *Report) Markdown(w io.Writer) error {
	ew := &errWriter{w: w}
	p := ew.printf
	p("# Report: %s\n\n", md(r.Suite))
	p("Generated %s. Schema %s.\n\n", r.Generated.UTC().Format(time.RFC3339), Schema)

	p("## Leaderboard\n\n")
	p("| Agent | Trials | Passed | Pass rate | 95%% CI | Mean reward | pass@k | Compromised | Errors | Timeouts | Limits | Model calls | Input tokens | Output tokens | Wall median ms | Wall p90 ms |\n")
	p("|---|--:|--:|--:|---|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, a := range r.Agents {
		var ks []string
		for _, k := range a.PassAtK {
			ks = append(ks, fmt.Sprintf("@%d %s", k.K, pct(k.Value)))
		}
		p("| %s | %d | %d | %s | %s – %s | %.3f | %s | %d | %d | %d | %d | %d | %d | %d | %d | %d |\n",
			md(a.Name), a.Trials, a.Passed, pct(a.PassRate), pct(a.CILow), pct(a.CIHigh),
			a.MeanReward, strings.Join(ks, ", "), a.Compromised, a.Errors, a.Timeouts, a.Limits,
			a.ModelCalls, a.InputTokens, a.OutputTokens, a.WallMSMedian, a.WallMSP90)
	}
	if ft := r.Reproducibility.FlakyTasks; len(ft) > 0 {
		var who []string
		for _, a := range r.Agents {
			if a.FlakyTasks > 0 {
				who = append(who, fmt.Sprintf("%s (%d)", md(a.Name), a.FlakyTasks))
			}
		}
		names := make([]string, len(ft))
		for i, t := range ft {
			names[i] = md(t)
		}
		p("\n**Warning: flaky tasks.** A regrade changed a verdict of %s: their grader is not deterministic. These scores count them: %s.\n",
			strings.Join(names, ", "), strings.Join(who, ", "))
	}

	if len(r.Comparisons) > 0 {
		p("\n## Pairwise comparisons\n\n")
		p("Exact two-sided sign test over the tasks where the pass rates differ.\n\n")
		p("| A | B | Shared tasks | A better | B better | Ties | Mean difference | p-value |\n")
		p("|---|---|--:|--:|--:|--:|--:|--:|\n")
		for _, c := range r.Comparisons {
			p("| %s | %s | %d | %d | %d | %d | %+.3f | %.4g |\n",
				md(c.A), md(c.B), c.SharedTasks, c.Wins, c.Losses, c.Ties, c.MeanDifference, c.PValue)
		}
	}

	p("\n## Tasks × agents (passed/trials)\n\n| Task |")
	for _, a := range r.Matrix.Agents {
		p(" %s |", md(a))
	}
	p("\n|---|%s\n", strings.Repeat("--:|", len(r.Matrix.Agents)))
	for _, row := range r.Matrix.Rows {
		p("| %s |", md(row.Task))
		for _, c := range row.Cells {
			if c.Trials == 0 {
				p(" – |")
				continue
			}
			p(" %d/%d |", c.Passed, c.Trials)
		}
		p("\n")
	}
	p("\nUnsolved by every agent: %s\n\n", list(r.Matrix.Unsolved))
	p("Solved by every agent (at least one pass each): %s\n", list(r.Matrix.SolvedByAll))

	rp := r.Reproducibility
	p("\n## Reproducibility\n\n")
	p("| Agent | Pass rate | Bootstrap 95%% | Disagreeing tasks | Run to run | Expected run-to-run difference |\n")
	p("|---|--:|---|--:|--:|--:|\n")
	for i := range r.Agents {
		a := &r.Agents[i]
		st := a.spreadText()
		p("| %s | %s | %s | %s | %s | %s |\n", md(a.Name), pct(a.PassRate), st.Boot, st.Disagreement, st.RunSD, st.RunMeanAbs)
	}
	p("\n")
	for _, n := range spreadNotes {
		p("- %s\n", n)
	}
	for i := range r.Agents {
		if n := r.Agents[i].singleTrialNote(); n != "" {
			p("- %s: %s\n", md(r.Agents[i].Name), n)
		}
	}
	p("\n")
	p("%d of %d agent × task cells disagree (some trials pass, some fail).\n", rp.Disagreeing, rp.Cells)
	if rp.Disagreeing > 0 {
		p("\n| Agent | Task | Passed | Trials | Reward std. dev. |\n|---|---|--:|--:|--:|\n")
		for _, c := range rp.Results {
			if c.Disagree {
				p("| %s | %s | %d | %d | %.3f |\n", md(c.Agent), md(c.Task), c.Passed, c.Trials, c.RewardStddev)
			}
		}
	}
	p("\nRegrades: %d checked, %d differed.\n", rp.Regrades.Checked, rp.Regrades.Differing)
	if len(rp.Regrades.Mismatches) > 0 {
		p("\n| Agent | Task | Trial | Detail |\n|---|---|--:|---|\n")
		for _, g := range rp.Regrades.Mismatches {
			p("| %s | %s | %d | %s |\n", md(g.Agent), md(g.Task), g.Index, md(g.Detail))
		}
	}

	r.testsMarkdown(p)

	ig := r.Integrity
	p("\n## Integrity\n\n%d compromised trials.\n", ig.Compromised)
	if ig.Compromised > 0 {
		p("\n| Agent | Compromised | By violation kind |\n|---|--:|---|\n")
		for _, a := range ig.ByAgent {
			p("| %s | %d | %s |\n", md(a.Agent), a.Compromised, kinds(a.Kinds, md))
		}
	}
	p("\n%d trials failed verification and are excluded from every number.\n", len(ig.Unverified))
	if len(ig.Unverified) > 0 {
		p("\n| Agent | Task | Trial | Bundle | Error |\n|---|---|--:|---|---|\n")
		for _, u := range ig.Unverified {
			p("| %s | %s | %d | %s | %s |\n", md(u.Agent), md(u.Task), u.Index, md(u.Bundle), md(u.Error))
		}
	}
	if ew.err != nil {
		return fmt.Errorf("writing Markdown report: %w", ew.err)
	}
	return nil
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = md(n)
	}
	return strings.Join(out, ", ")
}

// kinds formats violation counts as "kind: n, …" in kind order.
func kinds(m map[string]int, esc func(string) string) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	for i, k := range ks {
		ks[i] = fmt.Sprintf("%s: %d", esc(k), m[k])
	}
	return strings.Join(ks, ", ")
}

// errWriter keeps the first write error and skips the writes after it.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

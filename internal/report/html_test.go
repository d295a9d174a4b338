package report

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
)

// hostile is the fixture with an agent and a task whose names are markup.
func hostile() Input {
	in := fixture()
	const evil = "<script>alert(1)</script>"
	in.Agents = append(in.Agents, evil)
	in.Tasks = append(in.Tasks, `t"><img src=x onerror=alert(2)>`)
	in.Trials = append(in.Trials, Trial{Agent: evil, Task: in.Tasks[3], Status: "clean",
		Passed: true, Reward: 1, WallMS: 4000, Verified: true})
	return in
}

func htmlOf(t *testing.T, in Input) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Build(in).HTML(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestHTMLSelfContained(t *testing.T) {
	out := htmlOf(t, hostile())
	// html/template quotes every attribute value with " and escapes any "
	// inside it, and escapes < and > in text, so after emptying the values
	// every remaining <…> is a real tag.
	tags := regexp.MustCompile(`<[a-zA-Z][^<>]*>`).FindAllString(
		regexp.MustCompile(`="[^"]*"`).ReplaceAllString(out, `=""`), -1)
	if len(tags) < 100 {
		t.Fatalf("found only %d tags", len(tags))
	}
	// Nothing may be loaded or run: no attribute that fetches, no event
	// handler, no script, link or embedding element.
	bad := regexp.MustCompile(`(?i)^<(script|link|img|iframe|object|embed|image|use|foreignobject)\b|\s(src|href|srcset|action|xlink:href|on[a-z]+)\s*=`)
	for _, tag := range tags {
		if bad.MatchString(tag) {
			t.Errorf("HTML holds the tag %s", tag)
		}
	}
	// Nor may the page or its CSS name anything remote.
	for _, re := range []*regexp.Regexp{
		regexp.MustCompile(`(?i)url\s*\(`),
		regexp.MustCompile(`(?i)@import`),
		regexp.MustCompile(`(?i)(https?:)?//[a-z0-9]`),
	} {
		if loc := re.FindStringIndex(out); loc != nil {
			t.Errorf("HTML matches %v at %q", re, out[max(0, loc[0]-40):min(len(out), loc[1]+40)])
		}
	}
}

func TestHTMLEscapes(t *testing.T) {
	out := htmlOf(t, hostile())
	if !strings.Contains(out, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the agent name does not appear escaped")
	}
	if !strings.Contains(out, "&lt;img src=x onerror=alert(2)&gt;") {
		t.Error("the task name does not appear escaped")
	}
	// The reproducibility table, and its note on the agent's single
	// trial, name the agent escaped too.
	for _, want := range []string{
		`<tr class="spread" data-agent="&lt;script&gt;alert(1)&lt;/script&gt;" data-boot-low="1.0000" data-boot-high="1.0000" data-repeated-tasks="0" data-disagreeing-tasks="0" data-disagreement="" data-run-to-run-sd="" data-run-to-run-mean-abs=""><td>&lt;script&gt;alert(1)&lt;/script&gt;</td>`,
		`<li>&lt;script&gt;alert(1)&lt;/script&gt;: 1 task with one trial adds nothing to run to run.</li>`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("HTML lacks %s", want)
		}
	}
}

func TestHTMLDataAttributes(t *testing.T) {
	out := htmlOf(t, fixture())
	for _, want := range []string{
		// The flaky task's warning, under the leaderboard.
		`<p id="flaky-warning" class="warning"><strong>Warning: flaky tasks.</strong> A regrade changed a verdict of <span class="flaky-task">t2</span>`,
		`<span class="flaky-agent" data-agent="beta" data-flaky-tasks="1">beta (1)</span>`,
		// Leaderboard rows: alpha 4/7, Wilson [0.2505, 0.8418].
		`<tr class="agent" data-agent="alpha" data-pass-rate="0.5714" data-ci-low="0.2505" data-ci-high="0.8418" data-trials="7" data-passed="4">`,
		`<tr class="agent" data-agent="beta" data-pass-rate="0.1429"`,
		// Heat-map cells with their colours.
		`style="background: rgb(26,152,80)" data-agent="alpha" data-task="t2" data-pass-rate="1.0000" data-trials="2" data-passed="2"`,
		`style="background: rgb(215,48,39)" data-agent="beta" data-task="t1" data-pass-rate="0.0000" data-trials="3" data-passed="0"`,
		`style="background: rgb(254,224,139)" data-agent="beta" data-task="t2" data-pass-rate="0.5000"`,
		// Leaderboard chart and wall-time histogram.
		`<g data-agent="alpha" data-pass-rate="0.5714" data-ci-low="0.2505" data-ci-high="0.8418">`,
		`<g data-agent="alpha" data-wall-median="2000" data-wall-p90="3000">`,
		`<tr class="pair" data-a="alpha" data-b="beta" data-p-value="0.5">`,
		`<span id="unverified">1</span>`,
		`<span id="compromised">1</span>`,
		`<span id="unsolved">t3</span>`,
		// Reproducibility per agent (see TestSpreadFixture).
		`<tr class="spread" data-agent="alpha" data-boot-low="0.0000" data-boot-high="1.0000" data-repeated-tasks="3" data-disagreeing-tasks="1" data-disagreement="0.3333" data-run-to-run-sd="0.2020" data-run-to-run-mean-abs="0.1612"><td>alpha</td><td>57.1%</td><td>0.0% – 100.0%</td><td>1/3 (33.3%)</td><td>± 20.2 points</td><td>16.1 points</td></tr>`,
		`<li>Run to run counts trial noise only`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("HTML lacks %s", want)
		}
	}
}

func TestHeat(t *testing.T) {
	for _, tt := range []struct {
		rate float64
		want string
	}{
		{0, "rgb(215,48,39)"}, {0.5, "rgb(254,224,139)"}, {1, "rgb(26,152,80)"}, {2, "rgb(26,152,80)"},
	} {
		if got := heat(tt.rate); got != tt.want {
			t.Errorf("heat(%v) = %s, want %s", tt.rate, got, tt.want)
		}
	}
}

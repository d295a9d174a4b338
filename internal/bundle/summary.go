package bundle

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// verdictView is the little of a verdict that Summary reads.
type verdictView struct {
	Passed *bool    `json:"passed"`
	Status *string  `json:"status"`
	Reward *float64 `json:"reward"`
	Task   struct {
		Name string `json:"name"`
	} `json:"task"`
}

// maxSummaryField bounds each value Summary prints.
const maxSummaryField = 200

// Summary describes a payload in a few lines for a person: the verdict
// (passed, status, reward), the task, the agent's command and directory
// digest, the environment digest, the signer's
// fingerprint and the size of the timeline and manifest. Every value from
// the payload is printed on one line, cut to a few hundred bytes, and
// quoted if it holds anything a terminal would interpret. Fields the
// verdict lacks are shown as "?".
func Summary(p *Payload) string {
	if p == nil {
		return ""
	}
	var v verdictView
	_ = json.Unmarshal(p.Verdict, &v) // a verdict of another shape shows "?"

	result := "?"
	if v.Passed != nil {
		result = "failed"
		if *v.Passed {
			result = "passed"
		}
	}
	status, reward := "?", "?"
	if v.Status != nil {
		status = safe(*v.Status)
	}
	if v.Reward != nil {
		reward = strconv.FormatFloat(*v.Reward, 'g', -1, 64)
	}
	task := p.Provenance.TaskDigest
	if v.Task.Name != "" {
		task = safe(v.Task.Name) + " " + task
	}
	var b strings.Builder
	fmt.Fprintf(&b, "verdict:  %s (status %s, reward %s)\n", result, status, reward)
	fmt.Fprintf(&b, "task:     %s\n", task)
	agent := safe(p.Provenance.Agent.Command)
	if d := p.Provenance.Agent.DirDigest; d != "" {
		agent += " (agent dir " + safe(d) + ")"
	}
	fmt.Fprintf(&b, "agent:    %s\n", agent)
	fmt.Fprintf(&b, "env:      %s\n", safe(p.Provenance.EnvironmentDigest))
	fmt.Fprintf(&b, "signer:   %s\n", safe(p.Signer.Fingerprint))
	fmt.Fprintf(&b, "contents: %d timeline events, %d artifacts\n", len(p.Timeline), len(p.Manifest))
	return b.String()
}

// safe renders an untrusted string for a terminal: as is when it is
// printable, Go-quoted otherwise (control characters, bidirectional
// overrides, invalid UTF-8), cut to maxSummaryField bytes.
func safe(s string) string {
	long := len(s) > maxSummaryField
	if long {
		n := maxSummaryField
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			s = strconv.Quote(s)
			break
		}
	}
	if long {
		s += "…"
	}
	return s
}

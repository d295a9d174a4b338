package report

// pageHTML is the template of the HTML report. It must stay self-contained:
// no script, no link, no src or href to anything outside the page.
const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>proctor report: {{.Suite}}</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; background: #fff; }
h1, h2 { font-weight: 600; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th:first-child, td:first-child, td.name, th.name { text-align: left; }
thead th { background: #f2f2f2; }
td.cell { min-width: 3.5em; text-align: center; }
td.cell.dark { color: #fff; }
td.cell.empty { color: #999; background: #fafafa; }
svg { display: block; margin: 0.5em 0 1em; }
svg text { font: 12px system-ui, sans-serif; fill: #222; }
.ci { stroke: #555; stroke-width: 2; }
.dot { fill: #1f4e9c; }
.bar { fill: #4a7bc8; }
.axis { stroke: #999; stroke-width: 1; }
.grid { stroke: #eee; stroke-width: 1; }
.note { color: #555; }
</style>
</head>
<body>
<h1>proctor report: {{.Suite}}</h1>
<p class="note">Generated {{.GeneratedText}}. Schema {{.Schema}}. Pass rates with 95% Wilson score intervals; trials whose bundle failed verification and pending trials are excluded from every number.</p>

<h2 id="leaderboard">Leaderboard</h2>
<svg id="leaderboard-chart" width="{{.Board.Width}}" height="{{.Board.Height}}" viewBox="0 0 {{.Board.Width}} {{.Board.Height}}" role="img" aria-label="pass rate per agent with 95% interval">
{{- range .Board.Ticks}}
<line class="grid" x1="{{.X}}" y1="0" x2="{{.X}}" y2="{{$.Board.AxisY}}"/>
<text x="{{.X}}" y="{{$.Board.AxisY}}" dy="16" text-anchor="middle">{{.Label}}</text>
{{- end}}
{{- range .Board.Rows}}
<g data-agent="{{.Name}}" data-pass-rate="{{.Rate}}" data-ci-low="{{.CILow}}" data-ci-high="{{.CIHigh}}">
<title>{{.Name}}: {{.PassRateText}} ({{.CIText}})</title>
<text x="4" y="{{.TextY}}">{{.Name}}</text>
<line class="ci" x1="{{.XLow}}" y1="{{.Y}}" x2="{{.XHigh}}" y2="{{.Y}}"/>
<line class="ci" x1="{{.XLow}}" y1="{{.WhiskerTop}}" x2="{{.XLow}}" y2="{{.WhiskerBottom}}"/>
<line class="ci" x1="{{.XHigh}}" y1="{{.WhiskerTop}}" x2="{{.XHigh}}" y2="{{.WhiskerBottom}}"/>
<circle class="dot" cx="{{.X}}" cy="{{.Y}}" r="5"/>
</g>
{{- end}}
</svg>
<table id="leaderboard-table">
<thead><tr><th>Agent</th><th>Tasks</th><th>Trials</th><th>Passed</th><th>Pass rate</th><th>95% CI</th><th>Mean reward</th><th>pass@k</th><th>Compromised</th><th>Errors</th><th>Timeouts</th><th>Limits</th><th>Model calls</th><th>Input tokens</th><th>Output tokens</th><th>Wall median ms</th><th>Wall p90 ms</th></tr></thead>
<tbody>
{{- range .Agents}}
<tr class="agent" data-agent="{{.Name}}" data-pass-rate="{{rate .PassRate}}" data-ci-low="{{rate .CILow}}" data-ci-high="{{rate .CIHigh}}" data-trials="{{.Trials}}" data-passed="{{.Passed}}">
<td>{{.Name}}</td><td>{{.Tasks}}</td><td>{{.Trials}}</td><td>{{.Passed}}</td><td>{{pct .PassRate}}</td><td>{{pct .CILow}} – {{pct .CIHigh}}</td><td>{{f3 .MeanReward}}</td>
<td class="name">{{range $i, $k := .PassAtK}}{{if $i}}, {{end}}@{{$k.K}} {{pct $k.Value}}{{end}}</td>
<td>{{.Compromised}}</td><td>{{.Errors}}</td><td>{{.Timeouts}}</td><td>{{.Limits}}</td><td>{{.ModelCalls}}</td><td>{{.InputTokens}}</td><td>{{.OutputTokens}}</td><td>{{.WallMSMedian}}</td><td>{{.WallMSP90}}</td>
</tr>
{{- end}}
</tbody>
</table>
{{- if .Reproducibility.FlakyTasks}}
<p id="flaky-warning" class="warning"><strong>Warning: flaky tasks.</strong> A regrade changed a verdict of {{range $i, $t := .Reproducibility.FlakyTasks}}{{if $i}}, {{end}}<span class="flaky-task">{{$t}}</span>{{end}}: their grader is not deterministic. These scores count them: {{range .Agents}}{{if .FlakyTasks}}<span class="flaky-agent" data-agent="{{.Name}}" data-flaky-tasks="{{.FlakyTasks}}">{{.Name}} ({{.FlakyTasks}})</span> {{end}}{{end}}</p>
{{- end}}

{{- if .Comparisons}}
<h2 id="comparisons">Pairwise comparisons</h2>
<p class="note">Over the tasks both agents ran; "A better" counts tasks where A's pass rate is higher. p-value: exact two-sided sign test over the tasks where the rates differ.</p>
<table id="comparisons-table">
<thead><tr><th>A</th><th class="name">B</th><th>Shared tasks</th><th>A better</th><th>B better</th><th>Ties</th><th>Mean difference</th><th>p-value</th></tr></thead>
<tbody>
{{- range .Comparisons}}
<tr class="pair" data-a="{{.A}}" data-b="{{.B}}" data-p-value="{{p4 .PValue}}"><td>{{.A}}</td><td class="name">{{.B}}</td><td>{{.SharedTasks}}</td><td>{{.Wins}}</td><td>{{.Losses}}</td><td>{{.Ties}}</td><td>{{f3 .MeanDifference}}</td><td>{{p4 .PValue}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}

<h2 id="matrix">Tasks × agents</h2>
<p class="note">Passed/trials per cell, coloured by pass rate (red 0%, yellow 50%, green 100%); – where the agent has no counted trial.</p>
<table id="matrix-table">
<thead><tr><th>Task</th>{{range .Matrix.Agents}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Heat}}
<tr data-task="{{.Task}}"><td>{{.Task}}</td>
{{- range .Cells}}
{{- if .HasTrial}}<td class="cell{{if .Dark}} dark{{end}}" style="background: {{.Color}}" data-agent="{{.Agent}}" data-task="{{.Task}}" data-pass-rate="{{.Rate}}" data-trials="{{.Trials}}" data-passed="{{.Passed}}" title="{{pct .PassRate}}">{{.Passed}}/{{.Trials}}</td>
{{- else}}<td class="cell empty" data-agent="{{.Agent}}" data-task="{{.Task}}" data-trials="0">–</td>{{end}}
{{- end}}
</tr>
{{- end}}
</tbody>
</table>
<p>Unsolved by every agent: <span id="unsolved">{{range $i, $t := .Matrix.Unsolved}}{{if $i}}, {{end}}{{$t}}{{else}}none{{end}}</span></p>
<p>Solved by every agent (at least one pass each): <span id="solved-by-all">{{range $i, $t := .Matrix.SolvedByAll}}{{if $i}}, {{end}}{{$t}}{{else}}none{{end}}</span></p>

<h2 id="wall-times">Wall times</h2>
<p class="note">Histogram of counted trials' wall times per agent, shared bins, each row scaled to its tallest bar.</p>
<svg id="wall-chart" width="{{.Hist.Width}}" height="{{.Hist.Height}}" viewBox="0 0 {{.Hist.Width}} {{.Hist.Height}}" role="img" aria-label="wall time distribution per agent">
{{- range .Hist.Ticks}}
<line class="grid" x1="{{.X}}" y1="0" x2="{{.X}}" y2="{{$.Hist.AxisY}}"/>
<text x="{{.X}}" y="{{$.Hist.AxisY}}" dy="16" text-anchor="middle">{{.Label}}</text>
{{- end}}
{{- range .Hist.Rows}}
<g data-agent="{{.Name}}" data-wall-median="{{.Median}}" data-wall-p90="{{.P90}}">
<text x="4" y="{{.TextY}}">{{.Name}}</text>
{{- range .Bars}}
<rect class="bar" x="{{.X}}" y="{{.Y}}" width="{{.W}}" height="{{.H}}" data-count="{{.Count}}"><title>{{.Range}}: {{.Count}}</title></rect>
{{- end}}
</g>
{{- end}}
</svg>

<h2 id="reproducibility">Reproducibility</h2>
<table id="spread-table">
<thead><tr><th>Agent</th><th>Pass rate</th><th>Bootstrap 95%</th><th>Disagreeing tasks</th><th>Run to run</th><th>Expected run-to-run difference</th></tr></thead>
<tbody>
{{- range .Spread}}
<tr class="spread" data-agent="{{.Name}}" data-boot-low="{{.BootLow}}" data-boot-high="{{.BootHigh}}" data-repeated-tasks="{{.Repeated}}" data-disagreeing-tasks="{{.Disagreeing}}" data-disagreement="{{.Disagreement}}" data-run-to-run-sd="{{.RunSD}}" data-run-to-run-mean-abs="{{.RunMeanAbs}}"><td>{{.Name}}</td><td>{{.PassRateText}}</td><td>{{.Text.Boot}}</td><td>{{.Text.Disagreement}}</td><td>{{.Text.RunSD}}</td><td>{{.Text.RunMeanAbs}}</td></tr>
{{- end}}
</tbody>
</table>
<ul class="note">
{{- range .SpreadNotes}}
<li>{{.}}</li>
{{- end}}
{{- range .Spread}}{{if .Note}}
<li>{{.Name}}: {{.Note}}</li>
{{- end}}{{end}}
</ul>
<p><span id="disagreeing">{{.Reproducibility.Disagreeing}}</span> of {{.Reproducibility.Cells}} agent × task cells disagree (some trials pass, some fail).</p>
{{- if .Disagreeing}}
<table id="disagreeing-table">
<thead><tr><th>Agent</th><th>Task</th><th>Passed</th><th>Trials</th><th>Reward std. dev.</th></tr></thead>
<tbody>
{{- range .Disagreeing}}
<tr><td>{{.Agent}}</td><td class="name">{{.Task}}</td><td>{{.Passed}}</td><td>{{.Trials}}</td><td>{{f3 .RewardStddev}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}
<p>Regrades: {{.Reproducibility.Regrades.Checked}} checked, <span id="regrades-differing">{{.Reproducibility.Regrades.Differing}}</span> differed.</p>
{{- if .Reproducibility.Regrades.Mismatches}}
<table id="regrades-table">
<thead><tr><th>Agent</th><th>Task</th><th>Trial</th><th>Detail</th></tr></thead>
<tbody>
{{- range .Reproducibility.Regrades.Mismatches}}
<tr><td>{{.Agent}}</td><td class="name">{{.Task}}</td><td>{{.Index}}</td><td class="name">{{.Detail}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}

{{- if .TestTables}}
<h2 id="tests">Tests</h2>
<p class="note">Per task, each test its trials' reports named: passed/trials with a report, coloured by pass rate; – where the agent has none.</p>
{{- range .TestTables}}
<h3 class="name">{{.Task}}</h3>
{{- if .Note}}
<p class="note informational">{{.Note}}</p>
{{- end}}
<table class="tests-table" data-task="{{.Task}}">
<thead><tr><th>Test</th>{{range $.Matrix.Agents}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{- range .Rows}}
<tr data-test="{{.Test}}"><td class="name">{{.Test}}</td>
{{- range .Cells}}
{{- if .HasTrial}}<td class="cell{{if .Dark}} dark{{end}}" style="background: {{.Color}}" data-agent="{{.Agent}}" data-pass-rate="{{.Rate}}" data-trials="{{.Trials}}" data-passed="{{.Passed}}" title="{{pct .PassRate}}">{{.Passed}}/{{.Trials}}</td>
{{- else}}<td class="cell empty" data-agent="{{.Agent}}" data-trials="0">–</td>{{end}}
{{- end}}
</tr>
{{- end}}
</tbody>
</table>
{{- if .More}}
<p>{{.More}} more tests in the JSON form.</p>
{{- end}}
{{- end}}
{{- end}}

<h2 id="integrity">Integrity</h2>
<p><span id="compromised">{{.Integrity.Compromised}}</span> compromised trials.</p>
{{- if .Integrity.Compromised}}
<table id="violations-table">
<thead><tr><th>Agent</th><th>Compromised</th><th>By violation kind</th></tr></thead>
<tbody>
{{- range .Integrity.ByAgent}}
<tr data-agent="{{.Agent}}" data-compromised="{{.Compromised}}"><td>{{.Agent}}</td><td>{{.Compromised}}</td><td class="name">{{kinds .Kinds}}</td></tr>
{{- end}}
</tbody>
</table>
<table id="compromised-table">
<thead><tr><th>Agent</th><th>Task</th><th>Trial</th><th>Violations</th><th>Bundle</th></tr></thead>
<tbody>
{{- range .Integrity.CompromisedTrials}}
<tr><td>{{.Agent}}</td><td class="name">{{.Task}}</td><td>{{.Index}}</td><td class="name">{{range $i, $v := .Violations}}{{if $i}}, {{end}}{{$v}}{{end}}</td><td class="name">{{.Bundle}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}
<p><span id="unverified">{{len .Integrity.Unverified}}</span> trials failed verification and are excluded from every number.</p>
{{- if .Integrity.Unverified}}
<table id="unverified-table">
<thead><tr><th>Agent</th><th>Task</th><th>Trial</th><th>Bundle</th><th>Error</th></tr></thead>
<tbody>
{{- range .Integrity.Unverified}}
<tr><td>{{.Agent}}</td><td class="name">{{.Task}}</td><td>{{.Index}}</td><td class="name">{{.Bundle}}</td><td class="name">{{.Error}}</td></tr>
{{- end}}
</tbody>
</table>
{{- end}}
<p class="note">The per-trial list is in the JSON and CSV forms of this report.</p>
</body>
</html>
`

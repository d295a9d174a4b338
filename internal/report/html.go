package report

import (
	"fmt"
	"html/template"
	"io"
	"strconv"
	"sync"
	"time"
)

// HTML writes the report as one self-contained HTML page: inline CSS and
// inline SVG drawn here, no script, and nothing fetched from anywhere. It
// holds the leaderboard with its confidence intervals, the task × agent
// heat map, the distribution of wall times, and the numbers as tables.
// Every name goes through html/template's contextual escaping.
//
// Elements carry their numbers for tools and tests: leaderboard rows
// (tr.agent) have data-agent, data-pass-rate, data-ci-low, data-ci-high,
// data-trials and data-passed; heat-map cells (td.cell) have data-agent,
// data-task, data-pass-rate, data-trials and data-passed; rows of the
// per-agent reproducibility table (tr.spread) have data-agent,
// data-boot-low, data-boot-high, data-repeated-tasks,
// data-disagreeing-tasks, data-disagreement, data-run-to-run-sd and
// data-run-to-run-mean-abs, each rate attribute empty where the JSON has
// null. Rates are written with four decimals.
func (r *Report) HTML(w io.Writer) error {
	if err := pageTemplate().Execute(w, r.view()); err != nil {
		return fmt.Errorf("writing HTML report: %w", err)
	}
	return nil
}

// Heat-map colours (ColorBrewer RdYlGn): pass rate 0, ½ and 1.
var (
	colorLow  = [3]float64{215, 48, 39}
	colorMid  = [3]float64{254, 224, 139}
	colorHigh = [3]float64{26, 152, 80}
)

// heat is the heat-map colour of a pass rate, interpolated through
// colorLow, colorMid and colorHigh.
func heat(rate float64) string {
	from, to, f := colorLow, colorMid, rate*2
	if rate > 0.5 {
		from, to, f = colorMid, colorHigh, rate*2-1
	}
	f = max(0, min(1, f))
	var c [3]int
	for i := range c {
		c[i] = int(from[i] + (to[i]-from[i])*f + 0.5)
	}
	return fmt.Sprintf("rgb(%d,%d,%d)", c[0], c[1], c[2])
}

// rate formats a rate for a data attribute.
func rate(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }

// Geometry of the charts, in SVG user units.
const (
	chartWidth = 900
	labelWidth = 220
	plotWidth  = chartWidth - labelWidth - 30
	boardRowH  = 26
	histRowH   = 56
	histBins   = 24
)

type htmlView struct {
	*Report
	GeneratedText string
	Board         chart
	Hist          histogram
	Heat          []heatRow
	Disagreeing   []CellResult
	Spread        []spreadRow
	SpreadNotes   []string
	TestTables    []testTable
}

// testTable is one task's per-test table, shown up to maxTestRows rows.
type testTable struct {
	Task, Note string // Note: why its outcomes are informational, or ""
	Rows       []testRow
	More       int // rows not shown
}

type testRow struct {
	Test  string
	Cells []heatCell
}

// spreadRow is one agent's row of the reproducibility table; a data
// attribute's value is "" where its figure is undefined.
type spreadRow struct {
	Name                  string
	PassRateText          string
	BootLow, BootHigh     string
	Repeated, Disagreeing int
	Disagreement          string
	RunSD, RunMeanAbs     string
	Text                  spreadText
	Note                  string
}

type chart struct {
	Height, Width int
	AxisY         int
	Ticks         []tick
	Rows          []boardRow
}

type tick struct {
	X     float64
	Label string
}

type boardRow struct {
	Name                      string
	Y, TextY                  int
	WhiskerTop, WhiskerBottom int
	X, XLow, XHigh            float64
	Rate, CILow, CIHigh       string
	PassRateText, CIText      string
}

type histogram struct {
	Height, Width, AxisY int
	MaxLabel             string
	Ticks                []tick
	Rows                 []histRow
}

type histRow struct {
	Name        string
	Median, P90 int64
	Y, TextY    int
	Bars        []histBar
}

type histBar struct {
	X, Y, W, H float64
	Count      int
	Range      string
}

type heatRow struct {
	Task  string
	Cells []heatCell
}

type heatCell struct {
	Cell
	Task     string
	Rate     string
	Color    template.CSS
	Dark     bool
	HasTrial bool
}

func (r *Report) view() htmlView {
	v := htmlView{Report: r, GeneratedText: r.Generated.UTC().Format(time.RFC3339)}

	// Leaderboard: one row per agent, dot at the pass rate, whisker over
	// the 95% interval.
	x := func(rate float64) float64 { return labelWidth + rate*plotWidth }
	v.Board = chart{Width: chartWidth, Height: boardRowH*len(r.Agents) + 40}
	v.Board.AxisY = boardRowH*len(r.Agents) + 10
	for i := 0; i <= 4; i++ {
		f := float64(i) / 4
		v.Board.Ticks = append(v.Board.Ticks, tick{X: x(f), Label: fmt.Sprintf("%d%%", i*25)})
	}
	for i, a := range r.Agents {
		y := boardRowH*i + boardRowH/2 + 4
		v.Board.Rows = append(v.Board.Rows, boardRow{
			Name: a.Name, Y: y, TextY: y + 4, WhiskerTop: y - 5, WhiskerBottom: y + 5,
			X: x(a.PassRate), XLow: x(a.CILow), XHigh: x(a.CIHigh),
			Rate: rate(a.PassRate), CILow: rate(a.CILow), CIHigh: rate(a.CIHigh),
			PassRateText: pct(a.PassRate), CIText: pct(a.CILow) + " – " + pct(a.CIHigh),
		})
	}

	// Heat map.
	for _, row := range r.Matrix.Rows {
		hr := heatRow{Task: row.Task}
		for _, c := range row.Cells {
			hc := heatCell{Cell: c, Task: row.Task, Rate: rate(c.PassRate), HasTrial: c.Trials > 0}
			if hc.HasTrial {
				hc.Color = template.CSS(heat(c.PassRate))
				hc.Dark = c.PassRate < 0.2 || c.PassRate > 0.8
			}
			hr.Cells = append(hr.Cells, hc)
		}
		v.Heat = append(v.Heat, hr)
	}

	for _, c := range r.Reproducibility.Results {
		if c.Disagree {
			v.Disagreeing = append(v.Disagreeing, c)
		}
	}
	v.SpreadNotes = spreadNotes[:]
	opt := func(x *float64) string {
		if x == nil {
			return ""
		}
		return rate(*x)
	}
	for i := range r.Agents {
		a := &r.Agents[i]
		v.Spread = append(v.Spread, spreadRow{
			Name: a.Name, PassRateText: pct(a.PassRate),
			BootLow: opt(a.BootLow), BootHigh: opt(a.BootHigh),
			Repeated: a.RepeatedTasks, Disagreeing: a.DisagreeingTasks, Disagreement: opt(a.Disagreement),
			RunSD: opt(a.RunToRunSD), RunMeanAbs: opt(a.RunToRunMeanAbs),
			Text: a.spreadText(), Note: a.singleTrialNote(),
		})
	}
	v.Hist = r.histogram()
	v.TestTables = testTables(r.Tests)
	return v
}

// testTables is the HTML view of the per-test tables.
func testTables(tests []TaskTests) []testTable {
	var out []testTable
	for _, tt := range tests {
		tb := testTable{Task: tt.Task}
		if tt.Informational {
			tb.Note = informationalTests
		}
		for i, row := range tt.Rows {
			if i == maxTestRows {
				tb.More = len(tt.Rows) - maxTestRows
				break
			}
			tr := testRow{Test: row.Test}
			for _, c := range row.Cells {
				hc := heatCell{Cell: Cell{Agent: c.Agent, Trials: c.Trials, Passed: c.Passed, PassRate: c.PassRate},
					Task: tt.Task, Rate: rate(c.PassRate), HasTrial: c.Trials > 0}
				if hc.HasTrial {
					hc.Color = template.CSS(heat(c.PassRate))
					hc.Dark = c.PassRate < 0.2 || c.PassRate > 0.8
				}
				tr.Cells = append(tr.Cells, hc)
			}
			tb.Rows = append(tb.Rows, tr)
		}
		out = append(out, tb)
	}
	return out
}

// histogram draws one row of bars per agent over shared wall-time bins, each
// row scaled to its own tallest bar.
func (r *Report) histogram() histogram {
	walls := make([][]int64, len(r.Agents))
	idx := make(map[string]int, len(r.Agents))
	for i, a := range r.Agents {
		idx[a.Name] = i
	}
	var maxWall int64
	for i := range r.all {
		t := &r.all[i]
		if !counted(t) {
			continue
		}
		walls[idx[t.Agent]] = append(walls[idx[t.Agent]], t.WallMS)
		maxWall = max(maxWall, t.WallMS)
	}
	width := niceCeil(maxWall/histBins + 1) // ms per bin
	binW := float64(plotWidth) / histBins
	h := histogram{Width: chartWidth, Height: histRowH*len(r.Agents) + 40, AxisY: histRowH*len(r.Agents) + 6}
	h.MaxLabel = seconds(width * histBins)
	for i := 0; i <= 4; i++ {
		h.Ticks = append(h.Ticks, tick{
			X:     labelWidth + float64(i)*plotWidth/4,
			Label: seconds(width * histBins * int64(i) / 4),
		})
	}
	for i, a := range r.Agents {
		counts := make([]int, histBins)
		tallest := 0
		for _, ms := range walls[i] {
			b := min(int(max(ms, 0)/width), histBins-1)
			counts[b]++
			tallest = max(tallest, counts[b])
		}
		top := histRowH * i
		row := newHistRow(a, top)
		for b, n := range counts {
			if n == 0 {
				continue
			}
			hgt := float64(histRowH-10) * float64(n) / float64(tallest)
			row.Bars = append(row.Bars, histBar{
				X: labelWidth + float64(b)*binW, W: binW - 1,
				Y: float64(top+histRowH-4) - hgt, H: hgt, Count: n,
				Range: seconds(int64(b)*width) + "–" + seconds(int64(b+1)*width),
			})
		}
		h.Rows = append(h.Rows, row)
	}
	return h
}

func newHistRow(a AgentSummary, top int) histRow {
	return histRow{Name: a.Name, Median: a.WallMSMedian, P90: a.WallMSP90, Y: top, TextY: top + histRowH/2 + 4}
}

// niceCeil rounds ms up to 1, 2 or 5 times a power of ten, so that the
// axis labels are round numbers.
func niceCeil(ms int64) int64 {
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if m*p >= ms {
				return m * p
			}
		}
	}
}

// seconds formats milliseconds as seconds for an axis label.
func seconds(ms int64) string {
	return strconv.FormatFloat(float64(ms)/1000, 'g', 4, 64) + " s"
}

// pageTemplate is parsed on first use, not at start-up: every proctor
// process (each sandbox's init among them) would pay for it.
var pageTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"pct":   pct,
		"rate":  rate,
		"kinds": func(m map[string]int) string { return kinds(m, func(s string) string { return s }) },
		"f3":    func(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) },
		"p4":    func(x float64) string { return strconv.FormatFloat(x, 'g', 4, 64) },
	}).Parse(pageHTML))
})

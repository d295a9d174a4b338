package report

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const chromium = "/usr/bin/chromium"

// requireTool skips the test when the tool at path is missing, but fails it
// where the environment promises every tool (CI=true or PROCTOR_NO_SKIP).
func requireTool(t *testing.T, path string) {
	t.Helper()
	if _, err := exec.LookPath(path); err != nil {
		if os.Getenv("PROCTOR_NO_SKIP") != "" || os.Getenv("CI") == "true" {
			t.Fatalf("cannot run here: needs %s (apt-get install chromium)", path)
		}
		t.Skipf("needs %s", path)
	}
}

// runChromium runs headless Chromium with no network-facing background
// services and a throw-away profile, returning its standard output.
func runChromium(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	base := []string{
		"--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--no-first-run",
		"--user-data-dir=" + t.TempDir(),
	}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

func writeReport(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := Build(hostile()).HTML(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBrowserDOM(t *testing.T) {
	requireTool(t, chromium)
	dom := string(runChromium(t, "--dump-dom", "file://"+writeReport(t)))
	for _, want := range []string{
		`data-agent="alpha" data-pass-rate="0.5714" data-ci-low="0.2505" data-ci-high="0.8418" data-trials="7" data-passed="4"`,
		`data-agent="beta" data-task="t1" data-pass-rate="0.0000" data-trials="3" data-passed="0"`,
		`>57.1%<`,
		`>2/3<`,
		// Reproducibility per agent (see TestSpreadFixture).
		`data-agent="alpha" data-boot-low="0.0000" data-boot-high="1.0000" data-repeated-tasks="3" data-disagreeing-tasks="1" data-disagreement="0.3333" data-run-to-run-sd="0.2020" data-run-to-run-mean-abs="0.1612"`,
		`>0.0% – 100.0%<`,
		`>1/3 (33.3%)<`,
		`>± 20.2 points<`,
		// The hostile name survived as text, not as an element.
		`&lt;script&gt;alert(1)&lt;/script&gt;`,
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered DOM lacks %s", want)
		}
	}
	// Chromium keeps <script> elements in the dumped DOM; the page has none,
	// and the hostile names must not have made one.
	if strings.Contains(strings.ToLower(dom), "<script") || strings.Contains(dom, "<img") {
		t.Error("rendered DOM holds a script or img element")
	}
}

func TestBrowserScreenshot(t *testing.T) {
	requireTool(t, chromium)
	shot := filepath.Join(t.TempDir(), "shot.png")
	runChromium(t, "--screenshot="+shot, "--window-size=1200,1600", "file://"+writeReport(t))
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 1000 {
		t.Fatalf("screenshot is %v", b)
	}
	// The heat map's 0%, 50% and 100% colours must be on screen, in blocks
	// of at least a cell's size, and so must the leaderboard's dots (three
	// discs of radius 5).
	for _, tt := range []struct {
		name string
		c    [3]float64
		min  int
	}{
		{"heat 0%", colorLow, 500},
		{"heat 50%", colorMid, 500},
		{"heat 100%", colorHigh, 500},
		{"leaderboard dot", [3]float64{0x1f, 0x4e, 0x9c}, 100},
	} {
		if n := countColor(img, tt.c); n < tt.min {
			t.Errorf("screenshot has %d pixels of the %s colour %v, want ≥ %d", n, tt.name, tt.c, tt.min)
		}
	}
}

// countColor counts the pixels within a small distance of c.
func countColor(img image.Image, c [3]float64) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(float64(r>>8), c[0], 3) && near(float64(g>>8), c[1], 3) && near(float64(bl>>8), c[2], 3) {
				n++
			}
		}
	}
	return n
}

package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/proctor-sandbox/proctor/internal/bundle"
)

func TestLogChainsAndWritesThrough(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := New(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	l.Append("trial.start", map[string]any{"task": "t"})
	l.Observe("net.connect", map[string]any{"addr": "192.0.2.1", "port": 80}, time.Time{})
	// Written through before Seal: a trial that dies here leaves this.
	got, err := ReadFile(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].Kind != "net.connect" {
		t.Fatalf("before Seal the file holds %+v", got)
	}
	l.Append("verdict", nil)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err = ReadFile(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if want := l.Events(); len(got) != len(want) || got[2].Hash != want[2].Hash {
		t.Fatalf("file %+v, log %+v", got, want)
	}
	if err := bundle.CheckTimeline(got); err != nil {
		t.Fatal(err)
	}
	l.Append("late", nil) // after Close: ignored
	if l.Len() != 3 {
		t.Errorf("Append after Close kept: %d events", l.Len())
	}
}

func TestObserveBounded(t *testing.T) {
	l, err := New("", Limits{PerKind: 3, Total: 5})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		l.Observe("hidden.lookup", map[string]any{"i": i}, time.Time{})
	}
	for i := 0; i < 4; i++ {
		l.Observe("net.connect", map[string]any{"i": i}, time.Time{})
	}
	l.Lost("hidden.unrecorded", 5)
	l.Append("agent.end", nil) // the harness's events are never left out
	l.Seal()
	l.Observe("net.connect", nil, time.Time{}) // after Seal: ignored
	l.Append("verdict", nil)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ev := l.Events()
	count := map[string]int{}
	for _, e := range ev {
		count[e.Kind]++
	}
	if count["hidden.lookup"] != 3 || count["net.connect"] != 2 || count["verdict"] != 1 {
		t.Fatalf("kept %v", count)
	}
	last := ev[len(ev)-2]
	if last.Kind != SuppressedKind {
		t.Fatalf("last event %s, want %s", last.Kind, SuppressedKind)
	}
	var d map[string]int
	if err := json.Unmarshal(last.Detail, &d); err != nil {
		t.Fatal(err)
	}
	if d["hidden.lookup"] != 7 || d["net.connect"] != 2 || d["hidden.unrecorded"] != 5 {
		t.Errorf("suppressed %v", d)
	}
	if c := l.Counts(); c["hidden.lookup"] != 10 || c["net.connect"] != 4 {
		t.Errorf("counts %v", c)
	}
}

func TestLogConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := New(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				l.Observe("net.connect", map[string]any{"g": g, "i": i}, time.Time{})
			}
		}()
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path, 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 800 {
		t.Fatalf("%d events in the file, want 800", len(got))
	}
}

// The file is evidence: any edit, removal or reordering of a line breaks
// the chain, and a torn last line is reported as such.
func TestReadFileTampered(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, _ := New(path, Limits{})
	l.Append("trial.start", nil)
	l.Observe("hidden.lookup", map[string]any{"path": "/tests/test_outputs.py"}, time.Time{})
	l.Observe("net.connect", map[string]any{"addr": "192.0.2.1"}, time.Time{})
	l.Append("verdict", nil)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	lines := strings.SplitAfter(strings.TrimSuffix(string(data), "\n"), "\n")
	lines[len(lines)-1] += "\n"
	cases := map[string]string{
		"edited":    strings.Replace(string(data), "test_outputs", "test_outputz", 1),
		"removed":   lines[0] + lines[2] + lines[3],
		"reordered": lines[0] + lines[2] + lines[1] + lines[3],
		"unknown":   strings.Replace(string(data), `"seq":0`, `"seq":0,"x":1`, 1),
	}
	for name, text := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Read(strings.NewReader(text), "audit.jsonl"); err == nil {
				t.Fatal("tampered log accepted")
			}
		})
	}
	t.Run("torn", func(t *testing.T) {
		evs, err := Read(bytes.NewReader(data[:len(data)-10]), "audit.jsonl")
		if !errors.Is(err, ErrTruncated) || len(evs) != 3 {
			t.Fatalf("err %v, %d events", err, len(evs))
		}
	})
}

// Details with characters JSON encoders like to escape still verify from
// the file: the line holds the canonical bytes the hash covers.
func TestFileKeepsCanonicalBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := New(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	l.Append("agent.start", map[string]any{"command": "make && ./run > out 2>&1 <in"})
	l.Observe("hidden.lookup", map[string]any{"path": "/tests/\u2028<x>&\u2029\x00\x7f\xff"}, time.Time{})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadFile(path, 1<<20)
	if err != nil {
		t.Fatalf("the file does not check: %v", err)
	}
	want := l.Events()
	for i := range want {
		if got[i].Hash != want[i].Hash || string(got[i].Detail) != string(want[i].Detail) {
			t.Errorf("event %d: file %s, log %s", i, got[i].Detail, want[i].Detail)
		}
	}
}

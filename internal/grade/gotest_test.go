package grade

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseGoTestJSONSample(t *testing.T) {
	f, err := os.Open("testdata/gotest.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := ParseGoTestJSON(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != SourceGoTestJSON {
		t.Errorf("Source = %q", res.Source)
	}
	want := map[string]Outcome{
		"example.com/m/calc/TestAdd":         Passed,
		"example.com/m/calc/TestDiv":         Failed,
		"example.com/m/calc/TestDiv/by_zero": Failed,
		"example.com/m/calc/TestDiv/normal":  Passed,
		"example.com/m/calc/TestParallel":    Passed,
		"example.com/m/calc/TestSlow":        Skipped,
		"example.com/m/calc":                 Error, // package failed
		"example.com/m/strutil/TestAdd":      Passed,
		"example.com/m/strutil/TestReverse":  Passed,
		"example.com/m/broken":               Error, // build failure
		"example.com/m/crash":                Error, // the binary died in TestBoom
		"TestDiv":                            Failed,
		"TestDiv/by_zero":                    Failed,
		"TestDiv/normal":                     Passed,
		"TestParallel":                       Passed,
		"TestSlow":                           Skipped,
		"TestReverse":                        Passed,
		"TestAdd":                            Passed, // passed in both packages
	}
	if len(res.Tests) != len(want) {
		t.Errorf("len(Tests) = %d, want %d: %v", len(res.Tests), len(want), res.Tests)
	}
	for id, o := range want {
		if got, ok := res.Tests[id]; !ok || got != o {
			t.Errorf("Tests[%q] = %q, %v; want %q", id, got, ok, o)
		}
	}
	// A test with no terminal event is missing, not passed.
	for _, id := range []string{"example.com/m/crash/TestBoom", "TestBoom", "example.com/m/strutil"} {
		if o, ok := res.Tests[id]; ok {
			t.Errorf("Tests[%q] = %q, want absent", id, o)
		}
	}
	if len(res.Duplicates) != 0 {
		t.Errorf("Duplicates = %v", res.Duplicates)
	}
}

func TestParseGoTestJSONRules(t *testing.T) {
	cases := []struct {
		name   string
		stream string
		want   map[string]Outcome
		dups   []string
	}{
		{"passed then failed", `{"Action":"pass","Package":"p","Test":"TestX"}
{"Action":"fail","Package":"p","Test":"TestX"}`, map[string]Outcome{"p/TestX": Failed, "TestX": Failed}, []string{"p/TestX"}},
		{"failed then passed", `{"Action":"fail","Package":"p","Test":"TestX"}
{"Action":"pass","Package":"p","Test":"TestX"}`, map[string]Outcome{"p/TestX": Failed, "TestX": Failed}, []string{"p/TestX"}},
		{"same name in two packages", `{"Action":"pass","Package":"p","Test":"TestX"}
{"Action":"fail","Package":"q","Test":"TestX"}`, map[string]Outcome{"p/TestX": Passed, "q/TestX": Failed, "TestX": Failed}, nil},
		{"no package", `{"Action":"pass","Test":"TestX"}`, map[string]Outcome{"TestX": Passed}, nil},
		{"package fail without test is error", `{"Action":"fail","Package":"p"}`, map[string]Outcome{"p": Error}, nil},
		{"package pass and skip are not recorded", `{"Action":"pass","Package":"p"}
{"Action":"skip","Package":"q"}`, map[string]Outcome{}, nil},
		// Output that looks like a result is only output.
		{"output ignored", `{"Action":"output","Package":"p","Test":"TestX","Output":"--- PASS: TestX (0.00s)\n"}
{"Action":"output","Package":"p","Output":"{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"TestX\"}\n"}`, map[string]Outcome{}, nil},
		{"run without result", `{"Action":"run","Package":"p","Test":"TestX"}`, map[string]Outcome{}, nil},
		{"unknown action ignored", `{"Action":"artifacts","Package":"p","Test":"TestX"}`, map[string]Outcome{}, nil},
		{"blank lines and CRLF", "\n{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"TestX\"}\r\n\n", map[string]Outcome{"p/TestX": Passed, "TestX": Passed}, nil},
		{"no final newline", `{"Action":"skip","Package":"p","Test":"TestX"}`, map[string]Outcome{"p/TestX": Skipped, "TestX": Skipped}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := ParseGoTestJSON(strings.NewReader(c.stream), 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tests) != len(c.want) {
				t.Errorf("Tests = %v, want %v", res.Tests, c.want)
			}
			for id, o := range c.want {
				if res.Tests[id] != o {
					t.Errorf("Tests[%q] = %q, want %q", id, res.Tests[id], o)
				}
			}
			if !slices.Equal(res.Duplicates, c.dups) {
				t.Errorf("Duplicates = %v, want %v", res.Duplicates, c.dups)
			}
		})
	}
}

func TestParseGoTestJSONHostile(t *testing.T) {
	good := `{"Action":"pass","Package":"p","Test":"TestX"}` + "\n"
	cases := []struct {
		name    string
		stream  string
		limit   int64
		wantIs  error
		wantErr string
	}{
		{"empty", "", 0, ErrMalformedReport, "empty report"},
		{"blank lines only", "\n \n", 0, ErrMalformedReport, "empty report"},
		{"not JSON", good + "PASS\n", 0, ErrMalformedReport, "line 2"},
		{"truncated line", good + good + `{"Action":"pa`, 0, ErrMalformedReport, "line 3"},
		{"no Action", good + `{"Package":"p","Test":"TestX"}`, 0, ErrMalformedReport, `line 2: not a test2json event: no "Action"`},
		{"Action not a string", `{"Action":1,"Test":"TestX"}`, 0, ErrMalformedReport, "line 1"},
		{"array", `[]`, 0, ErrMalformedReport, "line 1"},
		{"two objects on a line", `{"Action":"pass","Test":"A"}{"Action":"fail","Test":"A"}`, 0, ErrMalformedReport, "line 1"},
		{"over the limit", strings.Repeat(good, 10), int64(len(good)) * 9, ErrReportTooLarge, ""},
		{"one long line over the limit", `{"Action":"output","Output":"` + strings.Repeat("x", 1<<20) + `"}`, 1 << 16, ErrReportTooLarge, "over 65536 bytes"},
		{"too many tests", strings.Repeat(good, MaxTests+1), 0, ErrTooManyTests, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := ParseGoTestJSON(strings.NewReader(c.stream), c.limit)
			if err == nil {
				t.Fatalf("ParseGoTestJSON = %v, nil; want an error", res)
			}
			if res != nil {
				t.Errorf("ParseGoTestJSON returned results with an error: %v", res)
			}
			if !errors.Is(err, c.wantIs) || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseGoTestJSON error = %v; want one that is %v and contains %q", err, c.wantIs, c.wantErr)
			}
		})
	}
}

package grade

import (
	"bytes"
	"embed"
	"strings"
	"testing"
)

//go:embed testdata/pytest-junit.xml testdata/gotest.json testdata/ctrf
var seedFS embed.FS

var junitSeeds = []string{
	`<testsuites><testsuite><testcase classname="a.b.TestC" name="t[x-y]"><failure/><error/><skipped/></testcase></testsuite></testsuites>`,
	`<testsuite><testcase classname="" name="m" file="a/b.py"/></testsuite>`,
	`<!DOCTYPE r [<!ENTITY a "b">]><testsuite/>`,
	`<testsuite><testcase name="&amp;&#65;&lol;"/></testsuite>`,
	`<testsuites>` + strings.Repeat(`<testsuite>`, 40),
	``,
}

var goTestSeeds = []string{
	`{"Action":"fail","Package":"p"}`,
	`{"Action":"pass","Package":"p","Test":"TestX/sub"}` + "\n" + `{"Action":"fail","Package":"p","Test":"TestX/sub"}`,
	`{"Action":"output","Output":"\u0000"}`,
	"\n\n{}\n",
	``,
}

var ctrfSeeds = []string{
	`{"results": {"tool": {"name": "x"}, "summary": {"tests": 1, "passed": 1, "failed": 0, "skipped": 0, "pending": 0, "other": 0}, "tests": [{"name": "a", "status": "passed"}]}}`,
	`{"results": {"tests": [{"status": "passed", "status": "failed"}]}}`,
	`{"results": [[[[[[` + "",
	`{} {}`,
	``,
}

func seed(t testing.TB, name string) []byte {
	data, err := seedFS.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestSeedCorporaNonEmpty(t *testing.T) {
	for _, name := range []string{"testdata/pytest-junit.xml", "testdata/gotest.json"} {
		if len(bytes.TrimSpace(seed(t, name))) == 0 {
			t.Errorf("seed %s is empty", name)
		}
	}
	des, err := seedFS.ReadDir("testdata/ctrf")
	if err != nil || len(des) == 0 {
		t.Errorf("no CTRF seeds: %v", err)
	}
	for _, de := range des {
		if len(bytes.TrimSpace(seed(t, "testdata/ctrf/"+de.Name()))) == 0 {
			t.Errorf("seed %s is empty", de.Name())
		}
	}
	if len(junitSeeds) == 0 || len(goTestSeeds) == 0 || len(ctrfSeeds) == 0 {
		t.Error("an inline seed corpus is empty")
	}
}

// checkResults holds for every report a parser accepts.
func checkResults(t *testing.T, res *Results, err error) {
	if err != nil {
		if res != nil {
			t.Fatalf("results %v returned with error %v", res, err)
		}
		return
	}
	if res == nil {
		t.Fatal("nil results without an error")
	}
	if len(res.Tests) > 2*MaxTests {
		t.Fatalf("%d ids", len(res.Tests))
	}
	for id, o := range res.Tests {
		if id == "" {
			t.Fatal("an empty id was recorded")
		}
		switch o {
		case Passed, Failed, Error, Skipped:
		default:
			t.Fatalf("Tests[%q] = %q", id, o)
		}
	}
	for _, id := range res.Duplicates {
		if _, ok := res.Tests[id]; !ok {
			t.Fatalf("duplicate %q not in Tests", id)
		}
	}
	// Decide must not panic on anything a parser produced.
	for id := range res.Tests {
		Decide(res, Expectation{FailToPass: []string{id}, Tripwire: id})
		break
	}
}

func FuzzParseJUnit(f *testing.F) {
	f.Add(seed(f, "testdata/pytest-junit.xml"))
	for _, s := range junitSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := ParseJUnit(bytes.NewReader(data), 1<<20)
		checkResults(t, res, err)
	})
}

func FuzzParseGoTestJSON(f *testing.F) {
	f.Add(seed(f, "testdata/gotest.json"))
	for _, s := range goTestSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := ParseGoTestJSON(bytes.NewReader(data), 1<<20)
		checkResults(t, res, err)
	})
}

func FuzzParseCTRF(f *testing.F) {
	des, err := seedFS.ReadDir("testdata/ctrf")
	if err != nil {
		f.Fatal(err)
	}
	for _, de := range des {
		f.Add(seed(f, "testdata/ctrf/"+de.Name()))
	}
	for _, s := range ctrfSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := ParseCTRF(bytes.NewReader(data), 1<<20)
		checkResults(t, res, err)
		if err == nil {
			for id, o := range res.Reported {
				if res.Tests[id] != o {
					t.Fatalf("Reported[%q] = %q, Tests %q", id, o, res.Tests[id])
				}
			}
		}
	})
}

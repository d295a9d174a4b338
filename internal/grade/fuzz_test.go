package grade

import (
	"bytes"
	"embed"
	"strings"
	"testing"
)

//go:embed testdata/pytest-junit.xml testdata/gotest.json
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
	if len(junitSeeds) == 0 || len(goTestSeeds) == 0 {
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

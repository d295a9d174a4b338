package grade

import (
	"encoding/xml"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseJUnitPytestSample(t *testing.T) {
	f, err := os.Open("testdata/pytest-junit.xml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := ParseJUnit(f, 0)
	if err != nil {
		t.Fatal(err)
	}
	if res.Source != SourceJUnit {
		t.Errorf("Source = %q", res.Source)
	}
	want := map[string]Outcome{
		// node ids
		"tests/test_parser.py::TestTokenize::test_empty":                  Passed,
		"tests/test_parser.py::TestTokenize::test_split[a-b]":             Passed,
		"tests/test_parser.py::TestTokenize::test_split[a.b-c::d]":        Passed,
		"tests/test_parser.py::TestTokenize::test_unicode":                Failed,
		"tests/test_parser.py::TestTokenize::test_teardown":               Error, // failure + teardown error: the worse
		"tests/test_parser.py::test_module_level":                         Passed,
		"tests/test_parser.py::test_db":                                   Error,
		"tests/test_parser.py::test_windows_only":                         Skipped,
		"tests/test_parser.py::test_known_bug":                            Skipped, // xfail
		"tests/unit/test_io.py::TestReader::TestNested::test_deep[x-y-z]": Passed,
		"tests/unit/test_io.py::TestReader::test_read[0]":                 Passed,
		"test_top.py::test_root_level":                                    Passed,
		"tests/test_zz_tripwire.py::test_tripwire":                        Failed,
		"tests.test_broken":                                               Error, // collection error: no classname
		// raw classname.name forms
		"tests.test_parser.TestTokenize.test_split[a-b]":            Passed,
		"tests.test_parser.TestTokenize.test_unicode":               Failed,
		"tests.test_parser.test_db":                                 Error,
		"tests.unit.test_io.TestReader.TestNested.test_deep[x-y-z]": Passed,
		"test_top.test_root_level":                                  Passed,
	}
	for id, o := range want {
		if got, ok := res.Tests[id]; !ok || got != o {
			t.Errorf("Tests[%q] = %q, %v; want %q", id, got, ok, o)
		}
	}
	// 14 testcases: 13 with two distinct forms, the collection error with one.
	if len(res.Tests) != 27 {
		t.Errorf("len(Tests) = %d, want 27: %v", len(res.Tests), res.Tests)
	}
	if len(res.Duplicates) != 0 {
		t.Errorf("Duplicates = %v", res.Duplicates)
	}
}

func TestJUnitNodeID(t *testing.T) {
	cases := []struct {
		classname, name, file string
		node, raw             string
	}{
		{"tests.test_a.TestX", "test_y", "", "tests/test_a.py::TestX::test_y", "tests.test_a.TestX.test_y"},
		{"tests.test_a", "test_y[1.5-a/b]", "", "tests/test_a.py::test_y[1.5-a/b]", "tests.test_a.test_y[1.5-a/b]"},
		{"test_a", "test_y", "", "test_a.py::test_y", "test_a.test_y"},
		{"pkg.test_a.TestOuter.TestInner", "test_y", "", "pkg/test_a.py::TestOuter::TestInner::test_y", "pkg.test_a.TestOuter.TestInner.test_y"},
		// A module alone is never taken for a class.
		{"TestModule", "test_y", "", "TestModule.py::test_y", "TestModule.test_y"},
		// xunit1's file attribute settles a dotted directory name.
		{"tests.v1.2.test_x.TestA", "test_a", "tests/v1.2/test_x.py", "tests/v1.2/test_x.py::TestA::test_a", "tests.v1.2.test_x.TestA.test_a"},
		{"tests.v1.2.test_x", "test_a", "tests/v1.2/test_x.py", "tests/v1.2/test_x.py::test_a", "tests.v1.2.test_x.test_a"},
		// A file attribute that does not prefix classname is ignored.
		{"tests.test_a.TestX", "test_y", "other/test_b.py", "tests/test_a.py::TestX::test_y", "tests.test_a.TestX.test_y"},
		{"tests.test_ab", "test_y", "tests/test_a.py", "tests/test_ab.py::test_y", "tests.test_ab.test_y"},
		{"", "tests.test_broken", "", "tests.test_broken", "tests.test_broken"},
		// Hostile shapes still give some string, and never panic.
		{".", "x", "", "/.py::x", "..x"},
		{"A.B", "x", ".py", "A.py::B::x", "A.B.x"},
	}
	for _, c := range cases {
		t.Run(c.classname+"/"+c.name, func(t *testing.T) {
			tc := &testcase{classname: c.classname, name: c.name, file: c.file}
			node, raw := tc.ids()
			if node != c.node || raw != c.raw {
				t.Errorf("ids() = %q, %q; want %q, %q", node, raw, c.node, c.raw)
			}
		})
	}
}

func TestParseJUnitDuplicates(t *testing.T) {
	cases := []struct {
		name  string
		cases string // testcase elements
		want  Outcome
	}{
		{"passed then failed", `<testcase classname="t.test_a" name="test_x"/><testcase classname="t.test_a" name="test_x"><failure/></testcase>`, Failed},
		{"failed then passed", `<testcase classname="t.test_a" name="test_x"><failure/></testcase><testcase classname="t.test_a" name="test_x"/>`, Failed},
		{"error then failed", `<testcase classname="t.test_a" name="test_x"><error/></testcase><testcase classname="t.test_a" name="test_x"><failure/></testcase>`, Error},
		{"skipped then passed", `<testcase classname="t.test_a" name="test_x"><skipped/></testcase><testcase classname="t.test_a" name="test_x"/>`, Skipped},
		{"in two suites", `<testcase classname="t.test_a" name="test_x"><failure/></testcase></testsuite><testsuite><testcase classname="t.test_a" name="test_x"/>`, Failed},
		// A second testcase whose raw form is spelled to hit the first
		// one's node id cannot launder its failure either.
		{"forged alias", `<testcase classname="t.test_a" name="test_x"><failure/></testcase><testcase classname="t/test_a.py::test" name="x"/>`, Failed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := ParseJUnit(strings.NewReader(`<testsuites><testsuite>`+c.cases+`</testsuite></testsuites>`), 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"t/test_a.py::test_x", "t.test_a.test_x"} {
				if got := res.Tests[id]; got != c.want {
					t.Errorf("Tests[%q] = %q, want %q", id, got, c.want)
				}
			}
			if c.name != "forged alias" && !slices.Equal(res.Duplicates, []string{"t/test_a.py::test_x"}) {
				t.Errorf("Duplicates = %v", res.Duplicates)
			}
		})
	}
}

func TestParseJUnitAccepts(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want map[string]Outcome
	}{
		{"testsuite root", `<?xml version="1.0" encoding="UTF-8"?><testsuite><testcase classname="a" name="t"/></testsuite>`, map[string]Outcome{"a.py::t": Passed, "a.t": Passed}},
		{"no tests collected", `<testsuites><testsuite name="pytest" tests="0"/></testsuites>`, map[string]Outcome{}},
		{"nested suites", `<testsuites><testsuite><testsuite><testcase classname="a" name="t"><skipped/></testcase></testsuite></testsuite></testsuites>`, map[string]Outcome{"a.py::t": Skipped, "a.t": Skipped}},
		{"comment and PI after root", `<testsuite><testcase classname="a" name="t"/></testsuite><!-- x --><?pi x?>` + "\n", map[string]Outcome{"a.py::t": Passed, "a.t": Passed}},
		// Within one testcase the worst child wins, whatever its order.
		{"error before failure", `<testsuite><testcase classname="a" name="t"><error/><failure/><skipped/></testcase></testsuite>`, map[string]Outcome{"a.py::t": Error, "a.t": Error}},
		{"failure before skipped", `<testsuite><testcase classname="a" name="t"><failure/><skipped/></testcase></testsuite>`, map[string]Outcome{"a.py::t": Failed, "a.t": Failed}},
		// Outcome elements count only as direct children of <testcase>.
		{"failure inside system-out is not a failure", `<testsuite><testcase classname="a" name="t"><properties><failure/></properties></testcase></testsuite>`, map[string]Outcome{"a.py::t": Passed, "a.t": Passed}},
		// Namespaced elements are not JUnit's.
		{"namespaced failure ignored", `<testsuite xmlns:x="urn:x"><testcase classname="a" name="t"><x:failure/></testcase></testsuite>`, map[string]Outcome{"a.py::t": Passed, "a.t": Passed}},
		{"predefined entities", `<testsuite><testcase classname="a" name="t[&lt;&amp;&gt;]"/></testsuite>`, map[string]Outcome{"a.py::t[<&>]": Passed, "a.t[<&>]": Passed}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := ParseJUnit(strings.NewReader(c.doc), 0)
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
		})
	}
}

func TestParseJUnitHostile(t *testing.T) {
	laughs := `<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
]>
<testsuites><testsuite><testcase classname="a" name="&lol3;"/></testsuite></testsuites>`
	many := `<testsuite>` + strings.Repeat(`<testcase name="t"/>`, MaxTests+1) + `</testsuite>`
	cases := []struct {
		name    string
		doc     string
		limit   int64
		wantIs  error
		wantErr string
	}{
		{"empty", "", 0, ErrMalformedReport, "empty report"},
		{"whitespace", " \n", 0, ErrMalformedReport, "empty report"},
		{"over the limit", `<testsuites>` + strings.Repeat(" ", 100) + `</testsuites>`, 50, ErrReportTooLarge, "over 50 bytes"},
		{"exactly the limit", `<testsuites></testsuites>`, int64(len(`<testsuites></testsuites>`)) - 1, ErrReportTooLarge, ""},
		{"too many testcases", many, 0, ErrTooManyTests, ""},
		{"deeply nested", `<testsuites>` + strings.Repeat(`<testsuite>`, 100_000), 0, ErrMalformedReport, "nested deeper than 32"},
		{"deeply nested in a testcase", `<testsuite><testcase name="t">` + strings.Repeat(`<a>`, 1000), 0, ErrMalformedReport, "nested deeper"},
		{"billion laughs", laughs, 0, ErrMalformedReport, "DTD"},
		{"external entity", `<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><testsuite><testcase name="&x;"/></testsuite>`, 0, ErrMalformedReport, "DTD"},
		{"undeclared entity", `<testsuite><testcase name="&lol;"/></testsuite>`, 0, ErrMalformedReport, "entity"},
		{"second root forges passes", `<testsuite><testcase name="t"><failure/></testcase></testsuite><testsuite><testcase name="u"/></testsuite>`, 0, ErrMalformedReport, "second root"},
		{"wrong root", `<html><testsuite/></html>`, 0, ErrMalformedReport, "root element is <html>"},
		{"namespaced root", `<x:testsuites xmlns:x="urn:x"/>`, 0, ErrMalformedReport, "root element"},
		{"testcase outside a suite", `<testsuites><testcase name="t"/></testsuites>`, 0, ErrMalformedReport, "inside <testsuites>"},
		{"testcase in a testcase", `<testsuite><testcase name="t"><testcase name="u"/></testcase></testsuite>`, 0, ErrMalformedReport, "inside <testcase>"},
		{"testsuite in a testcase", `<testsuite><testcase name="t"><testsuite/></testcase></testsuite>`, 0, ErrMalformedReport, "<testsuite> inside <testcase>"},
		{"testcase without a name", `<testsuite><testcase classname="a"/></testsuite>`, 0, ErrMalformedReport, "without a name"},
		{"truncated", `<testsuites><testsuite><testcase name="t"/>`, 0, ErrMalformedReport, ""},
		{"mismatched tags", `<testsuites><testsuite></testsuites></testsuite>`, 0, ErrMalformedReport, ""},
		{"text outside root", `junk<testsuite/>`, 0, ErrMalformedReport, ""},
		{"not utf-8", `<?xml version="1.0" encoding="ISO-8859-1"?><testsuite/>`, 0, ErrMalformedReport, ""},
		{"invalid utf-8", "<testsuite><testcase name=\"\xff\"/></testsuite>", 0, ErrMalformedReport, ""},
		{"binary", "\x00\x01\x02", 0, ErrMalformedReport, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res, err := ParseJUnit(strings.NewReader(c.doc), c.limit)
			if err == nil {
				t.Fatalf("ParseJUnit = %v, nil; want an error", res)
			}
			if res != nil {
				t.Errorf("ParseJUnit returned results with an error: %v", res)
			}
			if !errors.Is(err, c.wantIs) || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseJUnit error = %v; want one that is %v and contains %q", err, c.wantIs, c.wantErr)
			}
		})
	}
}

// ParseJUnit's promise that entities are never expanded rests on
// encoding/xml's behaviour, not only on its refusing DTDs: check the library
// itself, so an upgrade that changed it would fail here.
func TestEncodingXMLDoesNotExpandDeclaredEntities(t *testing.T) {
	doc := `<!DOCTYPE r [<!ENTITY lol "lol"><!ENTITY lol1 "&lol;&lol;&lol;&lol;"><!ENTITY x SYSTEM "file:///etc/passwd">]><r a="&lol1;">&lol1;&x;</r>`
	for _, strict := range []bool{true, false} {
		d := xml.NewDecoder(strings.NewReader(doc))
		d.Strict = strict
		var text strings.Builder
		var err error
		for {
			var tok xml.Token
			tok, err = d.Token()
			if err != nil {
				break
			}
			switch t := tok.(type) {
			case xml.CharData:
				text.Write(t)
			case xml.StartElement:
				for _, a := range t.Attr {
					text.WriteString(a.Value)
				}
			}
		}
		if strict && (err == io.EOF || !strings.Contains(err.Error(), "entity")) {
			t.Errorf("strict decoder: err = %v, want an invalid entity error", err)
		}
		if strings.Contains(text.String(), "lollol") || strings.Contains(text.String(), "root:") {
			t.Errorf("strict=%v: the decoder expanded an entity: %q", strict, text.String())
		}
	}
}

func TestLimitReaderAllowsExactlyTheLimit(t *testing.T) {
	doc := `<testsuite><testcase name="t"/></testsuite>`
	if _, err := ParseJUnit(strings.NewReader(doc), int64(len(doc))); err != nil {
		t.Errorf("a report of exactly the limit: %v", err)
	}
	if _, err := ParseJUnit(strings.NewReader(doc+" "), int64(len(doc))); !errors.Is(err, ErrReportTooLarge) {
		t.Errorf("a report one byte over the limit: %v, want ErrReportTooLarge", err)
	}
}

package grade

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// maxXMLDepth caps element nesting in a JUnit report. pytest writes at most
// five levels (testsuites/testsuite/testcase/properties/property); the cap
// leaves room for other writers that nest testsuites.
const maxXMLDepth = 32

// ParseJUnit parses a JUnit XML report as pytest --junitxml writes it: a
// <testsuites> or <testsuite> root, <testsuite> elements (which may nest)
// holding <testcase classname="…" name="…"> elements. A testcase passed
// unless it has a <failure> (failed), an <error> (error) or a <skipped>
// (skipped) child; with several such children the worst wins. pytest reports
// an xfail as skipped and a non-strict xpass as passed.
//
// Each testcase is recorded under two ids:
//
//   - the pytest node id, "path/to/test_file.py::Class::test_name[param]"
//     (primary). pytest builds classname by splitting the node id at "::",
//     turning the file path's "/" into "." and dropping ".py", and joining
//     the file and class names with "."; name is the last part with any
//     parameters. ParseJUnit undoes this: when the testcase has a file
//     attribute (junit_family=xunit1) whose dotted form prefixes classname,
//     the path is that file and the rest of classname are the classes;
//     otherwise the trailing dotted parts of classname that begin with an
//     upper-case ASCII letter are classes (pytest's default python_classes is
//     "Test*"; unittest classes are CamelCase by convention), keeping at least
//     one part for the module, and the rest, joined with "/" plus ".py", is
//     the path. The mapping is a guess where a directory name holds a dot or
//     a module name begins with a capital; the raw form below is exact.
//   - the raw "classname.name" (alias), or name alone if classname is empty
//     (as for a collection error).
//
// The report is hostile: ParseJUnit reads at most limit bytes (limit <= 0
// means DefaultReportLimit) and fails with ErrReportTooLarge beyond, refuses
// more than MaxTests testcases, nesting deeper than 32 elements, any DTD
// (<!DOCTYPE …>) and a second root element. encoding/xml resolves no external
// entities and expands no entity a DTD declares (an undeclared entity such as
// &lol; is a syntax error in its strict mode), so neither external-entity
// reads nor billion-laughs expansion can happen; refusing the DTD outright
// makes that plain.
func ParseJUnit(r io.Reader, limit int64) (*Results, error) {
	res, err := parseJUnit(newLimitReader(r, limit))
	if err != nil {
		if errors.Is(err, ErrReportTooLarge) || errors.Is(err, ErrTooManyTests) {
			return nil, fmt.Errorf("parsing JUnit XML: %w", err)
		}
		return nil, fmt.Errorf("parsing JUnit XML: %w: %w", ErrMalformedReport, err)
	}
	return res, nil
}

func parseJUnit(r io.Reader) (*Results, error) {
	d := xml.NewDecoder(r)
	d.Strict = true
	d.Entity = nil        // only the five predefined entities
	d.CharsetReader = nil // only UTF-8 (pytest writes utf-8)
	res := newResults(SourceJUnit)
	var (
		stack    []string // open element names
		rootDone bool
		tc       *testcase // the open <testcase>, if any
	)
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.Directive:
			return nil, fmt.Errorf("line %d: a DTD or other directive is not allowed", line(d))
		case xml.StartElement:
			if len(stack) >= maxXMLDepth {
				return nil, fmt.Errorf("line %d: elements nested deeper than %d", line(d), maxXMLDepth)
			}
			name := elemName(t.Name)
			switch {
			case len(stack) == 0:
				if rootDone {
					return nil, fmt.Errorf("line %d: a second root element <%s>", line(d), name)
				}
				if name != "testsuites" && name != "testsuite" {
					return nil, fmt.Errorf("line %d: root element is <%s>, not <testsuites> or <testsuite>", line(d), name)
				}
			case name == "testcase":
				if stack[len(stack)-1] != "testsuite" {
					return nil, fmt.Errorf("line %d: <testcase> inside <%s>, not <testsuite>", line(d), stack[len(stack)-1])
				}
				tc = &testcase{outcome: Passed}
				for _, a := range t.Attr {
					switch elemName(a.Name) {
					case "classname":
						tc.classname = a.Value
					case "name":
						tc.name = a.Value
					case "file":
						tc.file = a.Value
					}
				}
				if tc.name == "" {
					return nil, fmt.Errorf("line %d: <testcase> without a name", line(d))
				}
			case name == "testsuite":
				if p := stack[len(stack)-1]; p != "testsuites" && p != "testsuite" {
					return nil, fmt.Errorf("line %d: <testsuite> inside <%s>", line(d), p)
				}
			case tc != nil && stack[len(stack)-1] == "testcase":
				var o Outcome
				switch name {
				case "failure":
					o = Failed
				case "error":
					o = Error
				case "skipped":
					o = Skipped
				}
				if o != "" && o.severity() > tc.outcome.severity() {
					tc.outcome = o
				}
			}
			stack = append(stack, name)
		case xml.EndElement:
			// Strict mode has checked that it matches the open element.
			stack = stack[:len(stack)-1]
			if elemName(t.Name) == "testcase" && tc != nil {
				node, raw := tc.ids()
				if err := res.record(node, tc.outcome, raw); err != nil {
					return nil, err
				}
				tc = nil
			}
			if len(stack) == 0 {
				rootDone = true
			}
		case xml.CharData:
			if len(stack) == 0 && len(strings.TrimSpace(string(t))) > 0 {
				return nil, fmt.Errorf("line %d: text outside the root element", line(d))
			}
		}
	}
	if !rootDone {
		if len(stack) > 0 {
			return nil, fmt.Errorf("truncated: <%s> is not closed", stack[len(stack)-1])
		}
		return nil, errors.New("no root element (empty report)")
	}
	return res.finish(), nil
}

type testcase struct {
	classname, name, file string
	outcome               Outcome
}

// ids returns the testcase's pytest node id and its raw classname.name form.
func (tc *testcase) ids() (node, raw string) {
	if tc.classname == "" {
		return tc.name, tc.name
	}
	raw = tc.classname + "." + tc.name
	var path string
	var classes []string
	if mod, ok := strings.CutSuffix(tc.file, ".py"); ok && mod != "" {
		dotted := strings.ReplaceAll(mod, "/", ".")
		if rest, ok := strings.CutPrefix(tc.classname, dotted); ok && (rest == "" || rest[0] == '.') {
			path = tc.file
			if rest != "" {
				classes = strings.Split(rest[1:], ".")
			}
		}
	}
	if path == "" {
		parts := strings.Split(tc.classname, ".")
		k := len(parts)
		for k > 1 && startsUpper(parts[k-1]) {
			k--
		}
		path = strings.Join(parts[:k], "/") + ".py"
		classes = parts[k:]
	}
	var b strings.Builder
	b.WriteString(path)
	for _, c := range classes {
		b.WriteString("::")
		b.WriteString(c)
	}
	b.WriteString("::")
	b.WriteString(tc.name)
	return b.String(), raw
}

func startsUpper(s string) bool { return s != "" && 'A' <= s[0] && s[0] <= 'Z' }

// elemName is the name of an element or attribute; one in a namespace keeps
// its namespace, so that it matches none of the names JUnit uses.
func elemName(n xml.Name) string {
	if n.Space != "" {
		return n.Space + ":" + n.Local
	}
	return n.Local
}

func line(d *xml.Decoder) int {
	l, _ := d.InputPos()
	return l
}

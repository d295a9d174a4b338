package grade

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
)

// CTRFFile is the name Terminal-Bench 2 verifiers give their CTRF report
// (pytest --ctrf /logs/verifier/ctrf.json).
const CTRFFile = "ctrf.json"

// maxJSONDepth caps nesting in a CTRF report. A pytest-json-ctrf report
// nests five levels (results.tests[].extra.worker); the cap leaves room for
// steps and attachments other reporters write.
const maxJSONDepth = 64

// ParseCTRF parses a CTRF (Common Test Report Format) JSON report as
// pytest-json-ctrf writes it (`pytest --ctrf FILE`):
//
//	{"results": {
//	  "tool":    {"name": "pytest", "version": "8.4.1"},
//	  "summary": {"tests": 2, "passed": 1, "failed": 1, "skipped": 0, "pending": 0, "other": 0,
//	              "start": 1784212054.96, "stop": 1784212055.07},
//	  "tests": [
//	    {"name": "test_outputs.py::test_a", "status": "passed", "duration": 0.0012, ...},
//	    {"name": "test_outputs.py::test_b", "status": "failed", "raw_status": "call_failed", ...}]}}
//
// Each entry of results.tests is recorded under its name, exactly as
// written (pytest-json-ctrf writes the pytest node id relative to the
// rootdir, without parameters: see docs/trial.md), with its status mapped
// to an outcome: passed → passed, failed → failed, skipped and pending (not
// run) → skipped, other → error. Results.Tool is results.tool's name and
// version.
//
// The report is hostile, and parsed strictly with encoding/json: at most
// limit bytes (limit <= 0 means DefaultReportLimit, beyond it
// ErrReportTooLarge), at most MaxTests tests (ErrTooManyTests), one JSON
// object and nothing after it, nesting at most 64 deep, no object holding
// a key twice (encoding/json would keep the last, so {"status": "failed",
// "status": "passed"} could read either way), and every field this parser
// reads of the type the CTRF schema gives it: results, results.tool
// (with a name), results.summary (non-negative integer counts) and
// results.tests are required; each test needs a non-empty name and one of
// the five statuses; duration, start, stop, retries, flaky, message,
// trace, suite, tags, extra, rawStatus and filePath (and pytest-json-ctrf
// 0.3's raw_status and file_path) must have their types when present. The
// summary must agree with the tests: as many tests, and as many of each
// status (but for other, which pytest-json-ctrf 0.3 always writes as 0).
// Keys the schema does not name are ignored, as CTRF lets reporters add
// them. Errors name the field, as in
//
//	results.tests[3].status: "ok" is not a CTRF status (want passed, failed, skipped, pending or other)
func ParseCTRF(r io.Reader, limit int64) (*Results, error) {
	res, err := parseCTRF(newLimitReader(r, limit))
	if err != nil {
		if errors.Is(err, ErrReportTooLarge) || errors.Is(err, ErrTooManyTests) {
			return nil, fmt.Errorf("parsing CTRF JSON: %w", err)
		}
		return nil, fmt.Errorf("parsing CTRF JSON: %w: %w", ErrMalformedReport, err)
	}
	return res, nil
}

// ctrfStatuses maps a CTRF status to an outcome.
var ctrfStatuses = map[string]Outcome{
	"passed":  Passed,
	"failed":  Failed,
	"skipped": Skipped,
	"pending": Skipped,
	"other":   Error,
}

func parseCTRF(r io.Reader) (*Results, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty report")
	}
	if err := checkJSON(data); err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("the report is not a JSON object")
	}
	if f, ok := top["reportFormat"]; ok {
		var s string
		if json.Unmarshal(f, &s) != nil || s != "CTRF" {
			return nil, fmt.Errorf(`reportFormat: %s, want "CTRF"`, short(f))
		}
	}
	results, err := object(top, "results", "")
	if err != nil {
		return nil, err
	}
	tool, err := object(results, "tool", "results.")
	if err != nil {
		return nil, err
	}
	toolName, err := str(tool, "name", "results.tool.", true)
	if err != nil {
		return nil, err
	}
	toolVersion, err := str(tool, "version", "results.tool.", false)
	if err != nil {
		return nil, err
	}
	summary, err := object(results, "summary", "results.")
	if err != nil {
		return nil, err
	}
	want := map[string]int64{}
	for _, k := range []string{"tests", "passed", "failed", "skipped", "pending", "other"} {
		n, err := count(summary, k, "results.summary.")
		if err != nil {
			return nil, err
		}
		want[k] = n
	}
	for _, k := range []string{"start", "stop", "duration"} {
		if _, err := number(summary, k, "results.summary."); err != nil {
			return nil, err
		}
	}
	rawTests, ok := results["tests"]
	if !ok {
		return nil, errors.New("results.tests: missing")
	}
	var tests []json.RawMessage
	if err := json.Unmarshal(rawTests, &tests); err != nil || tests == nil {
		return nil, fmt.Errorf("results.tests: want an array, got %s", kindOf(rawTests))
	}
	if len(tests) > MaxTests {
		return nil, ErrTooManyTests
	}
	res := newResults(SourceCTRF)
	res.Tool = strings.TrimSpace(toolName + " " + toolVersion)
	got := map[string]int64{}
	for i, raw := range tests {
		at := fmt.Sprintf("results.tests[%d].", i)
		var t map[string]json.RawMessage
		if err := json.Unmarshal(raw, &t); err != nil || t == nil {
			return nil, fmt.Errorf("results.tests[%d]: want an object, got %s", i, kindOf(raw))
		}
		name, status, err := ctrfTest(t, at)
		if err != nil {
			return nil, err
		}
		got[status]++
		if err := res.record(name, ctrfStatuses[status]); err != nil {
			return nil, err
		}
	}
	if want["tests"] != int64(len(tests)) {
		return nil, fmt.Errorf("results.summary.tests: %d, but results.tests holds %d", want["tests"], len(tests))
	}
	for _, k := range []string{"passed", "failed", "skipped", "pending", "other"} {
		if want[k] != got[k] && !(k == "other" && want[k] == 0) {
			return nil, fmt.Errorf("results.summary.%s: %d, but results.tests holds %d", k, want[k], got[k])
		}
	}
	return res.finish(), nil
}

// ctrfTest checks one entry of results.tests and returns its name and
// status.
func ctrfTest(t map[string]json.RawMessage, at string) (name, status string, err error) {
	if name, err = str(t, "name", at, true); err != nil {
		return "", "", err
	}
	if strings.TrimSpace(name) == "" || strings.IndexByte(name, 0) >= 0 {
		return "", "", fmt.Errorf("%sname: empty or holds a NUL byte", at)
	}
	if status, err = str(t, "status", at, true); err != nil {
		return "", "", err
	}
	if _, ok := ctrfStatuses[status]; !ok {
		return "", "", fmt.Errorf("%sstatus: %q is not a CTRF status (want passed, failed, skipped, pending or other)", at, truncate(status, 40))
	}
	for _, k := range []string{"duration", "start", "stop"} {
		if _, err := number(t, k, at); err != nil {
			return "", "", err
		}
	}
	if _, ok := t["retries"]; ok {
		if _, err := count(t, "retries", at); err != nil {
			return "", "", err
		}
	}
	for _, k := range []string{"message", "trace", "rawStatus", "raw_status", "filePath", "file_path", "type", "browser"} {
		if _, err := str(t, k, at, false); err != nil {
			return "", "", err
		}
	}
	if f, ok := t["flaky"]; ok {
		var b bool
		if json.Unmarshal(f, &b) != nil {
			return "", "", fmt.Errorf("%sflaky: want true or false, got %s", at, kindOf(f))
		}
	}
	if f, ok := t["extra"]; ok {
		var m map[string]json.RawMessage
		if json.Unmarshal(f, &m) != nil || m == nil {
			return "", "", fmt.Errorf("%sextra: want an object, got %s", at, kindOf(f))
		}
	}
	if f, ok := t["tags"]; ok {
		var s []string
		if json.Unmarshal(f, &s) != nil {
			return "", "", fmt.Errorf("%stags: want an array of strings, got %s", at, kindOf(f))
		}
	}
	if f, ok := t["suite"]; ok { // a string in the CTRF schema, an array in newer pytest-json-ctrf
		var s string
		var l []string
		if json.Unmarshal(f, &s) != nil && json.Unmarshal(f, &l) != nil {
			return "", "", fmt.Errorf("%ssuite: want a string or an array of strings, got %s", at, kindOf(f))
		}
	}
	return name, status, nil
}

// object returns the object at key of m; prefix names m in errors.
func object(m map[string]json.RawMessage, key, prefix string) (map[string]json.RawMessage, error) {
	raw, ok := m[key]
	if !ok {
		return nil, fmt.Errorf("%s%s: missing", prefix, key)
	}
	var o map[string]json.RawMessage
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		return nil, fmt.Errorf("%s%s: want an object, got %s", prefix, key, kindOf(raw))
	}
	return o, nil
}

// str returns the string at key of m ("" when absent and not required).
func str(m map[string]json.RawMessage, key, prefix string, required bool) (string, error) {
	raw, ok := m[key]
	if !ok {
		if required {
			return "", fmt.Errorf("%s%s: missing", prefix, key)
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s%s: want a string, got %s", prefix, key, kindOf(raw))
	}
	return s, nil
}

// count returns the required non-negative integer at key of m.
func count(m map[string]json.RawMessage, key, prefix string) (int64, error) {
	raw, ok := m[key]
	if !ok {
		return 0, fmt.Errorf("%s%s: missing", prefix, key)
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil || n < 0 {
		return 0, fmt.Errorf("%s%s: want a whole number of 0 or more, got %s", prefix, key, short(raw))
	}
	return n, nil
}

// number checks that the value at key of m, when present, is a finite
// number of 0 or more.
func number(m map[string]json.RawMessage, key, prefix string) (float64, error) {
	raw, ok := m[key]
	if !ok {
		return 0, nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || f < 0 || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%s%s: want a number of 0 or more, got %s", prefix, key, short(raw))
	}
	return f, nil
}

// kindOf names the JSON type of raw, for errors.
func kindOf(raw json.RawMessage) string {
	s := bytes.TrimSpace(raw)
	if len(s) == 0 {
		return "nothing"
	}
	switch s[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	default:
		return "a number"
	}
}

// short is raw for an error message, cut to a few characters.
func short(raw json.RawMessage) string { return truncate(string(bytes.TrimSpace(raw)), 40) }

// checkJSON checks that data is one JSON value with nothing after it, nested
// at most maxJSONDepth deep, and that no object in it holds a key twice.
func checkJSON(data []byte) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	type frame struct {
		keys   map[string]bool
		object bool
		key    bool // the next token of an object is a key
	}
	var stack []*frame
	started := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			if len(stack) > 0 || !started {
				return errors.New("truncated: the JSON document ends early")
			}
			return nil
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return errors.New("truncated: the JSON document ends early")
			}
			return fmt.Errorf("not JSON: %w (at byte %d)", err, d.InputOffset())
		}
		if started && len(stack) == 0 {
			return fmt.Errorf("more data after the JSON document (at byte %d)", d.InputOffset())
		}
		started = true
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.object && top.key {
			if k, ok := tok.(string); ok {
				if top.keys[k] {
					return fmt.Errorf("the key %q appears twice in one object (at byte %d)", truncate(k, 40), d.InputOffset())
				}
				top.keys[k] = true
				top.key = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxJSONDepth {
				return fmt.Errorf("nested deeper than %d (at byte %d)", maxJSONDepth, d.InputOffset())
			}
			if top != nil && top.object {
				top.key = true
			}
			f := &frame{object: tok == json.Delim('{'), key: tok == json.Delim('{')}
			if f.object {
				f.keys = map[string]bool{}
			}
			stack = append(stack, f)
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		default:
			if top != nil && top.object {
				top.key = true
			}
		}
	}
}

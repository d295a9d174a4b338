package bundle

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
)

const jcsDir = "testdata/jcs"

// TestCanonicalizeVectors runs the RFC 8785 examples (sections 3.2.2 and
// 3.2.3), the cyberphone/json-canonicalization test data and our own edge
// cases: each testdata/jcs/input/X.json must canonicalize to exactly
// testdata/jcs/output/X.json.
func TestCanonicalizeVectors(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join(jcsDir, "input", "*.json"))
	if err != nil || len(inputs) < 10 {
		t.Fatalf("only %d inputs in %s (%v)", len(inputs), jcsDir, err)
	}
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			data, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(jcsDir, "output", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := Canonicalize(data)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("got  %s\nwant %s", got, want)
			}
			// The independent reference canonicalizer agrees.
			if ref, err := refCanonical(data); err != nil || !bytes.Equal(ref, want) {
				t.Errorf("reference: %s, %v", ref, err)
			}
			// Canonical output is a fixed point.
			if again, err := Canonicalize(got); err != nil || !bytes.Equal(again, got) {
				t.Errorf("not a fixed point: %s, %v", again, err)
			}
		})
	}
}

// TestCanonicalizeRFCBytes checks the UTF-8 bytes of the RFC's example
// against its section 3.2.4 hex dump.
func TestCanonicalizeRFCBytes(t *testing.T) {
	dump, err := os.ReadFile(filepath.Join(jcsDir, "output", "rfc8785-example.hex"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := hex.DecodeString(strings.Join(strings.Fields(string(dump)), ""))
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.ReadFile(filepath.Join(jcsDir, "input", "rfc8785-example.json"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := Canonicalize(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got\n% x\nwant\n% x", got, want)
	}
}

// TestCanonicalizeNumbers runs RFC 8785 Appendix B, Table 1: each IEEE 754
// value, written as a JSON number in two spellings, must canonicalize to
// the table's text; NaN and Infinity must be rejected.
func TestCanonicalizeNumbers(t *testing.T) {
	f, err := os.Open(filepath.Join(jcsDir, "numbers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		fields := strings.Fields(line)
		bits, err := strconv.ParseUint(fields[0], 16, 64)
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		rows++
		v := math.Float64frombits(bits)
		want := fields[1]
		if want == "-" {
			if !math.IsNaN(v) && !math.IsInf(v, 0) {
				t.Errorf("%s: a rejected row must be NaN or Infinity", fields[0])
			}
			if s, ok := es6Number(v); ok {
				t.Errorf("%s: reference formatted %s", fields[0], s)
			}
			continue
		}
		if ref, ok := es6Number(v); !ok || ref != want {
			t.Errorf("%s: reference gives %s, want %s", fields[0], ref, want)
		}
		for _, lit := range []string{strconv.FormatFloat(v, 'e', -1, 64), strconv.FormatFloat(v, 'E', 16, 64)} {
			got, err := Canonicalize([]byte("[" + lit + "]"))
			if err != nil || string(got) != "["+want+"]" {
				t.Errorf("%s (%s): got %s, %v; want %s", fields[0], lit, got, err, want)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if rows != 26 {
		t.Errorf("%d rows in numbers.txt, want the 26 of the RFC's table", rows)
	}
	for _, lit := range []string{"NaN", "Infinity", "-Infinity", "1e309", "-1e400"} {
		if got, err := Canonicalize([]byte("[" + lit + "]")); err == nil {
			t.Errorf("%s: accepted as %s", lit, got)
		}
	}
}

// TestCanonicalizeInvalid checks that every file in testdata/jcs/invalid
// is rejected.
func TestCanonicalizeInvalid(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(jcsDir, "invalid", "*.json"))
	if err != nil || len(files) < 20 {
		t.Fatalf("only %d invalid inputs (%v)", len(files), err)
	}
	for _, fn := range files {
		data, err := os.ReadFile(fn)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Canonicalize(data); err == nil {
			t.Errorf("%s: accepted as %s", filepath.Base(fn), got)
		} else if strings.ContainsAny(err.Error(), "\n\r") {
			t.Errorf("%s: error %q is not one line", filepath.Base(fn), err)
		}
	}
}

// refCanonical is an independent RFC 8785 canonicalizer for tests:
// encoding/json to decode, es6Number for numbers, sorting by UTF-16 code
// units. It trusts its input to have no duplicate names.
func refCanonical(data []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	var b []byte
	err := refAppend(&b, v)
	return b, err
}

func refAppend(b *[]byte, v any) error {
	switch v := v.(type) {
	case nil:
		*b = append(*b, "null"...)
	case bool:
		*b = strconv.AppendBool(*b, v)
	case string:
		*b = appendString(*b, v)
	case json.Number:
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			return err
		}
		s, ok := es6Number(f)
		if !ok {
			return strconv.ErrRange
		}
		*b = append(*b, s...)
	case []any:
		*b = append(*b, '[')
		for i, e := range v {
			if i > 0 {
				*b = append(*b, ',')
			}
			if err := refAppend(b, e); err != nil {
				return err
			}
		}
		*b = append(*b, ']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return utf16Less(keys[i], keys[j]) })
		*b = append(*b, '{')
		for i, k := range keys {
			if i > 0 {
				*b = append(*b, ',')
			}
			*b = appendString(*b, k)
			*b = append(*b, ':')
			if err := refAppend(b, v[k]); err != nil {
				return err
			}
		}
		*b = append(*b, '}')
	}
	return nil
}

func utf16Less(a, b string) bool {
	x, y := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	for i := 0; i < len(x) && i < len(y); i++ {
		if x[i] != y[i] {
			return x[i] < y[i]
		}
	}
	return len(x) < len(y)
}

// es6Number formats f as ECMAScript's Number::toString does (ECMA-262,
// 7.1.12.1), from the shortest decimal digits that round-trip; ok is false
// for NaN and the infinities.
func es6Number(f float64) (string, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", false
	}
	if f == 0 {
		return "0", true
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// f = 0.DIGITS × 10^n, with k digits.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k, n := len(digits), x+1
	var s string
	switch {
	case k <= n && n <= 21:
		s = digits + strings.Repeat("0", n-k)
	case 0 < n && n <= 21:
		s = digits[:n] + "." + digits[n:]
	case -6 < n && n <= 0:
		s = "0." + strings.Repeat("0", -n) + digits
	default:
		s = digits[:1]
		if k > 1 {
			s += "." + digits[1:]
		}
		if n-1 >= 0 {
			s += "e+" + strconv.Itoa(n-1)
		} else {
			s += "e-" + strconv.Itoa(1-n)
		}
	}
	return sign + s, true
}

// TestEventHashIsJCS checks the hand-built event encoding against
// Canonicalize, with kinds and times full of characters that need escapes.
func TestEventHashIsJCS(t *testing.T) {
	for _, e := range []Event{
		{Seq: 0, Time: FormatTime(fixedStart), Kind: "trial.start", Detail: json.RawMessage(`{}`), Prev: Genesis},
		{Seq: 1 << 52, Time: "x\"\\\b\f\n\r\t\x00\x1f\x7f/<>&é😀", Kind: "k\u2028\ufeff", Detail: json.RawMessage(`{"a":[1,"é"],"b":null}`), Prev: "p"},
	} {
		obj := map[string]any{"seq": e.Seq, "time": e.Time, "kind": e.Kind, "detail": e.Detail, "prev": e.Prev}
		c, err := canonicalJSON(obj)
		if err != nil {
			t.Fatal(err)
		}
		want := digestOf(string(c))
		if got := eventHash(e); got != want {
			t.Errorf("eventHash = %s, JCS gives %s (%s)", got, want, c)
		}
	}
}

package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// smallFile is a recording of three calls, made with the Tape's own
// methods: JSON, a stream, and a refusal before the body was read. Its
// lines: 1 the header, 2-4 the calls, 5-9 the bodies.
func smallFile(t testing.TB) []byte {
	t.Helper()
	tape := NewTape()
	add := func(gw, method, target string, req []byte, status int, ctype, resp string) {
		sum := ""
		if req != nil {
			sum = sha(req)
		}
		c, err := tape.begin(gw, method, target, sum, req)
		if err != nil {
			t.Fatal(err)
		}
		tee := &tee{t: tape, c: c}
		tee.write([]byte(resp))
		tape.end(c, status, ctype, tee, false)
	}
	add("openai", "POST", "/v1/chat/completions", []byte(`{"model":"m"}`), 200, "application/json", `{"ok":true}`)
	add("anthropic", "POST", "/v1/messages", []byte(`{"model":"c","stream":true}`), 200, "text/event-stream", "data: {}\n\n")
	add("openai", "GET", "/v1/files", nil, 403, "application/json", string(errorBody("endpoint not offered by the gateway: GET /v1/files")))
	return encode(t, tape)
}

// edit applies f to a copy of file's lines.
func edit(file []byte, f func(ls [][]byte) [][]byte) []byte {
	var ls [][]byte
	for _, l := range lines(file) {
		ls = append(ls, bytes.Clone(l))
	}
	return bytes.Join(f(ls), nil)
}

// replaceIn replaces old by new in line i (0-based) of ls.
func replaceIn(ls [][]byte, i int, old, new string) [][]byte {
	ls[i] = bytes.Replace(ls[i], []byte(old), []byte(new), 1)
	return ls
}

func blobOf(t testing.TB, line []byte) blobLine {
	t.Helper()
	var b blobLine
	if err := json.Unmarshal(line, &b); err != nil {
		t.Fatal(err)
	}
	return b
}

func blobLineOf(data []byte) []byte {
	var b bytes.Buffer
	writeBlob(&b, sha(data), data)
	return b.Bytes()
}

func TestWriteBlobIsJSON(t *testing.T) {
	for _, data := range [][]byte{{}, []byte("a"), []byte("ab"), []byte("abc"), bytes.Repeat([]byte{0xff, 0, '"'}, 5000)} {
		if got, want := blobLineOf(data), encodeLine(blobLine{SHA256: sha(data), Base64: data}); !bytes.Equal(got, want) {
			t.Errorf("writeBlob(%d bytes) = %.80q, encoding/json: %.80q", len(data), got, want)
		}
	}
}

// TestReadTapeRefuses reads broken and tampered recordings: each is refused
// with a *TapeError naming the line and field.
func TestReadTapeRefuses(t *testing.T) {
	valid := smallFile(t)
	ls := lines(valid)
	if len(ls) != 9 {
		t.Fatalf("the small recording has %d lines, want 9:\n%s", len(ls), valid)
	}
	readTape(t, valid)

	// The first body, which the missing case drops: the first call line
	// naming it is at fault.
	first := blobOf(t, ls[4]).SHA256
	missingLine, missingField := 0, ""
	for i, l := range ls[1:4] {
		if f := "request_sha256"; bytes.Contains(l, []byte(`"`+f+`":"`+first)) {
			missingLine, missingField = i+2, f
			break
		}
		if f := "response_sha256"; bytes.Contains(l, []byte(`"`+f+`":"`+first)) {
			missingLine, missingField = i+2, f
			break
		}
	}
	// An extra body, in its sorted place.
	extra := []byte("no call names this")
	extraAt := 4 + len(slices.DeleteFunc(slices.Clone(ls[4:]), func(l []byte) bool { return blobOf(t, l).SHA256 > sha(extra) }))

	for _, tc := range []struct {
		name   string
		file   []byte
		limit  int64 // 0: the file's size
		line   int
		field  string
		err    error
		reason string
	}{
		{"a flipped byte in a body", edit(valid, func(ls [][]byte) [][]byte {
			b := blobOf(t, ls[4])
			b.Base64[len(b.Base64)/2] ^= 1
			var l bytes.Buffer
			writeBlob(&l, b.SHA256, b.Base64)
			ls[4] = l.Bytes()
			return ls
		}), 0, 5, "base64", ErrTapeTampered, "the body hashes to sha256:"},
		{"a missing body", edit(valid, func(ls [][]byte) [][]byte {
			return replaceIn(slices.Delete(ls, 4, 5), 0, `"blobs":5`, `"blobs":4`)
		}), 0, missingLine, missingField, ErrTapeMalformed, "no line holds the body sha256:" + first[:12]},
		{"an extra body", edit(valid, func(ls [][]byte) [][]byte {
			return replaceIn(slices.Insert(ls, extraAt, blobLineOf(extra)), 0, `"blobs":5`, `"blobs":6`)
		}), 0, extraAt + 1, "sha256", ErrTapeMalformed, "no call names this body"},
		{"a body given twice", edit(valid, func(ls [][]byte) [][]byte {
			return replaceIn(slices.Insert(ls, 5, ls[4]), 0, `"blobs":5`, `"blobs":6`)
		}), 0, 6, "sha256", ErrTapeMalformed, "given twice"},
		{"bodies out of order", edit(valid, func(ls [][]byte) [][]byte {
			ls[4], ls[5] = ls[5], ls[4]
			return ls
		}), 0, 6, "sha256", ErrTapeMalformed, "not sorted"},
		{"a seq gap", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 2, `"seq":2`, `"seq":3`) }),
			0, 3, "seq", ErrTapeMalformed, "3 where 2 is due"},
		{"an unknown field", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 1, `"seq":1,`, `"seq":1,"extra":true,`) }),
			0, 2, "extra", ErrTapeMalformed, "unknown field"},
		{"a field of another type", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 1, `"status":200`, `"status":"200"`) }),
			0, 2, "status", ErrTapeMalformed, "a JSON string, not a int"},
		{"a field given twice", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 1, `"seq":1,`, `"seq":1,"seq":1,`) }),
			0, 2, "", ErrTapeMalformed, "canonical"},
		{"a space", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 1, `"seq":1`, `"seq": 1`) }),
			0, 2, "", ErrTapeMalformed, "canonical"},
		{"a CRLF", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 1, "}\n", "}\r\n") }),
			0, 2, "", ErrTapeMalformed, "canonical"},
		{"cut false written out", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 1, "}\n", `,"cut":false}`+"\n") }),
			0, 2, "", ErrTapeMalformed, "canonical"},
		{"an upper-case digest", edit(valid, func(ls [][]byte) [][]byte {
			var l callLine
			json.Unmarshal(ls[1], &l)
			return replaceIn(ls, 1, l.RequestSHA256, strings.ToUpper(l.RequestSHA256))
		}), 0, 2, "request_sha256", ErrTapeMalformed, "hex"},
		{"a wrong size", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 1, `"request_bytes":13`, `"request_bytes":14`) }),
			0, 2, "request_bytes", ErrTapeMalformed, "the body is 13 bytes"},
		{"a status out of range", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 1, `"status":200`, `"status":99`) }),
			0, 2, "status", ErrTapeMalformed, "between 200 and 999"},
		{"not base64", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 4, `"base64":"`, `"base64":"!`) }),
			0, 5, "base64", ErrTapeMalformed, "not base64"},
		{"another schema", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 0, "/v1", "/v2") }),
			0, 1, "schema", ErrTapeMalformed, `not "proctor.recording/v1"`},
		{"more calls announced", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 0, `"calls":3`, `"calls":4`) }),
			0, 1, "calls", ErrTapeMalformed, "the header announces 4 calls, line 5 is a body after 3"},
		{"fewer calls announced", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 0, `"calls":3,"blobs":5`, `"calls":2,"blobs":4`) }),
			0, 1, "calls", ErrTapeMalformed, "the header announces 2 calls, line 4 holds one more"},
		{"more bodies announced", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 0, `"blobs":5`, `"blobs":6`) }),
			0, 1, "blobs", ErrTapeMalformed, "the header announces 6 bodies, the file ends after 5"},
		{"fewer bodies announced", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 0, `"blobs":5`, `"blobs":4`) }),
			0, 1, "blobs", ErrTapeMalformed, "the header announces 4 bodies, line 9 holds one more"},
		{"too many calls announced", edit(valid, func(ls [][]byte) [][]byte { return replaceIn(ls, 0, `"calls":3`, `"calls":100001`) }),
			0, 1, "calls", ErrTapeTooLarge, "not between 0 and 100000"},
		{"cut after a line", valid[:len(valid)-len(ls[8])], 0, 1, "blobs", ErrTapeMalformed, "the file ends after 4"},
		{"cut in a line", valid[:len(valid)-10], 0, 9, "", ErrTapeMalformed, "cut short"},
		{"cut in the header", valid[:20], 0, 1, "", ErrTapeMalformed, "cut short"},
		{"empty", nil, 0, 1, "", ErrTapeMalformed, "empty"},
		{"a line after the bodies", append(bytes.Clone(valid), "\n"...), 0, 10, "", ErrTapeMalformed, "after the last body"},
		{"over the limit", valid, int64(len(valid)) - 1, 9, "", ErrTapeTooLarge, fmt.Sprintf("over the limit of %d bytes", len(valid)-1)},
		{"over the limit in the header", valid, 10, 1, "", ErrTapeTooLarge, "over the limit of 10 bytes"},
		{"not JSON", []byte("hello\n"), 0, 1, "", ErrTapeMalformed, "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			limit := tc.limit
			if limit == 0 {
				limit = int64(len(tc.file))
			}
			tape, err := ReadTape(bytes.NewReader(tc.file), limit)
			var te *TapeError
			if !errors.As(err, &te) {
				t.Fatalf("ReadTape = %v, %v; want a *TapeError", tape, err)
			}
			if te.Line != tc.line || te.Field != tc.field || !errors.Is(err, tc.err) || !strings.Contains(te.Reason, tc.reason) {
				t.Errorf("ReadTape: %v\nwant line %d, field %q, %v, a reason holding %q", err, tc.line, tc.field, tc.err, tc.reason)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("line %d", tc.line)) {
				t.Errorf("the message does not name the line: %v", err)
			}
		})
	}
}

// FuzzReadTape checks that ReadTape never panics, refuses with a *TapeError
// only, and that a recording it accepts is written back byte for byte.
func FuzzReadTape(f *testing.F) {
	valid := smallFile(f)
	seeds := [][]byte{
		valid,
		encode(f, NewTape()),
		valid[:len(valid)/2],
		bytes.Replace(valid, []byte(`"seq":2`), []byte(`"seq":3`), 1),
		bytes.Replace(valid, []byte(`"blobs":5`), []byte(`"blobs":4`), 1),
		bytes.Replace(valid, []byte(`"status":200`), []byte(`"status":204`), 1),
		bytes.Replace(valid, []byte(`"base64":"`), []byte(`"base64":"QQ==`), 1),
		[]byte(`{"schema":"proctor.recording/v1","calls":0,"blobs":0}`),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	if len(seeds) == 0 {
		f.Fatal("no seeds")
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tape, err := ReadTape(bytes.NewReader(b), 1<<20)
		if err != nil {
			if te := new(TapeError); !errors.As(err, &te) || te.Line < 1 {
				t.Fatalf("ReadTape = %v, not a *TapeError with a line", err)
			}
			return
		}
		if out := encode(t, tape); !bytes.Equal(out, b) {
			t.Fatalf("accepted\n%q\nwritten back as\n%q", b, out)
		}
	})
}

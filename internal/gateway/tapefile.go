package gateway

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// tapeSchema names the format of recording.jsonl.
const tapeSchema = "proctor.recording/v1"

// The lines of recording.jsonl, their fields in the order written.
type (
	tapeHeader struct {
		Schema string `json:"schema"`
		Calls  int    `json:"calls"`
		Blobs  int    `json:"blobs"`
	}
	callLine struct {
		Seq            int    `json:"seq"`
		Gateway        string `json:"gateway"`
		Method         string `json:"method"`
		Target         string `json:"target"`
		RequestSHA256  string `json:"request_sha256"`
		RequestBytes   int64  `json:"request_bytes"`
		Status         int    `json:"status"`
		ContentType    string `json:"content_type"`
		ResponseSHA256 string `json:"response_sha256"`
		ResponseBytes  int64  `json:"response_bytes"`
		Cut            bool   `json:"cut,omitempty"`
	}
	// blobLine is written by writeBlob, which streams the base64.
	blobLine struct {
		SHA256 string `json:"sha256"`
		Base64 []byte `json:"base64"`
	}
)

// How lines start, and how a blob line is put together.
const (
	callPrefix = `{"seq":`
	blobPrefix = `{"sha256":"`
	blobMid    = `","base64":"`
	blobEnd    = "\"}\n"
)

// encodeLine is v's line: encoding/json, without HTML escapes, and a
// newline.
func encodeLine(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(v) // cannot fail: strings, numbers and booleans
	return b.Bytes()
}

// writeBlob writes the line of a blob, as encodeLine would write its
// blobLine (base64 needs no JSON escape), without holding the base64.
func writeBlob(w io.Writer, sum string, data []byte) {
	io.WriteString(w, blobPrefix+sum+blobMid)
	enc := base64.NewEncoder(base64.StdEncoding, w)
	enc.Write(data)
	enc.Close()
	io.WriteString(w, blobEnd)
}

func (c *tapeCall) line() callLine {
	return callLine{Seq: c.seq, Gateway: c.gateway, Method: c.method, Target: c.target,
		RequestSHA256: c.requestSHA256, RequestBytes: c.requestBytes,
		Status: c.status, ContentType: c.contentType,
		ResponseSHA256: c.responseSHA256, ResponseBytes: c.responseBytes, Cut: c.cut}
}

// WriteTo writes the recording as recording.jsonl (see "Recording and
// replay"): the same calls always make the same bytes, at most
// MaxRecordingSize of them. A recording Tape must be complete, every Gateway
// given it closed: if recording failed, or a call is still being served,
// WriteTo writes nothing and says why.
func (t *Tape) WriteTo(w io.Writer) (int64, error) {
	t.mu.Lock()
	if t.err != nil {
		t.mu.Unlock()
		return 0, fmt.Errorf("writing the recording: %w", t.err)
	}
	calls := slices.Clone(t.calls)
	for _, c := range calls {
		if !c.done {
			t.mu.Unlock()
			return 0, fmt.Errorf("writing the recording: call %d is still being served; close the gateways first", c.seq)
		}
	}
	sums := slices.Sorted(maps.Keys(t.blobs))
	blobs := make([][]byte, len(sums))
	for i, s := range sums {
		blobs[i] = t.blobs[s]
	}
	t.mu.Unlock()

	cw := &countingWriter{w: w}
	bw := bufio.NewWriterSize(cw, 64<<10)
	bw.Write(encodeLine(tapeHeader{Schema: tapeSchema, Calls: len(calls), Blobs: len(sums)}))
	for _, c := range calls {
		bw.Write(encodeLine(c.line()))
	}
	for i, s := range sums {
		writeBlob(bw, s, blobs[i])
	}
	err := bw.Flush() // the first error of any write
	if err != nil {
		err = fmt.Errorf("writing the recording: %w", err)
	}
	return cw.n, err
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ReadTape reads a recording WriteTo wrote, to replay it (Options.Replay).
// The file is taken as hostile: it must be at most limit bytes
// (MaxRecordingSize if limit is not positive), and exactly as WriteTo writes
// it: each line one JSON object, its fields known, in order, each once,
// without spaces; calls numbered from 1 without gaps; every body a call
// names present once, hashing to its digest, and no other; counts as the
// header says, limits as a Tape's. A file that is not is refused with a
// *TapeError naming the line and field (wrapping ErrTapeTampered when a
// body does not hash to its digest); a failure of r is returned wrapped.
// So a recording ReadTape accepts is written back byte for byte by WriteTo.
//
// The digests make a file consistent, not authentic: whoever can write the
// file can write another recording. ReadTape holds the bodies in memory, and
// while reading a few times the longest line.
func ReadTape(r io.Reader, limit int64) (*Tape, error) {
	if limit <= 0 {
		limit = MaxRecordingSize
	}
	p := &tapeReader{br: bufio.NewReaderSize(&io.LimitedReader{R: r, N: limit + 1}, 64<<10), limit: limit}

	line, err := p.next()
	if err == io.EOF {
		return nil, &TapeError{Line: 1, Reason: "the file is empty", Err: ErrTapeMalformed}
	}
	if err != nil {
		return nil, err
	}
	var h tapeHeader
	if err := p.decode(line, &h); err != nil {
		return nil, err
	}
	switch {
	case h.Schema != tapeSchema:
		return nil, p.errf("schema", ErrTapeMalformed, "not %q", tapeSchema)
	case h.Calls < 0 || h.Calls > maxTapeCalls:
		return nil, p.errf("calls", ErrTapeTooLarge, "not between 0 and %d", maxTapeCalls)
	case h.Blobs < 0 || h.Blobs > 2*h.Calls:
		return nil, p.errf("blobs", ErrTapeMalformed, "not between 0 and twice the calls")
	case !bytes.Equal(encodeLine(h), line):
		return nil, p.errf("", ErrTapeMalformed, "not in canonical form (as WriteTo writes it)")
	}
	headerErr := func(field, format string, args ...any) error {
		return &TapeError{Line: 1, Field: field, Reason: fmt.Sprintf(format, args...), Err: ErrTapeMalformed}
	}

	calls := make([]*tapeCall, 0, min(h.Calls, 1<<10))
	refs := make(map[string]bool) // the bodies the calls name
	for i := range h.Calls {
		line, err := p.next()
		if err == io.EOF {
			return nil, headerErr("calls", "the header announces %d calls, the file ends after %d", h.Calls, i)
		}
		if err != nil {
			return nil, err
		}
		if bytes.HasPrefix(line, []byte(blobPrefix)) {
			return nil, headerErr("calls", "the header announces %d calls, line %d is a body after %d", h.Calls, p.line, i)
		}
		c, err := p.call(line, i+1)
		if err != nil {
			return nil, err
		}
		if c.requestSHA256 != "" {
			refs[c.requestSHA256] = true
		}
		refs[c.responseSHA256] = true
		calls = append(calls, c)
	}

	blobs := make(map[string][]byte, min(h.Blobs, 1<<10))
	var prev string
	var total int64
	for i := range h.Blobs {
		line, err := p.next()
		if err == io.EOF {
			return nil, headerErr("blobs", "the header announces %d bodies, the file ends after %d", h.Blobs, i)
		}
		if err != nil {
			return nil, err
		}
		if bytes.HasPrefix(line, []byte(callPrefix)) {
			return nil, headerErr("calls", "the header announces %d calls, line %d holds one more", h.Calls, p.line)
		}
		var b blobLine
		if err := p.decode(line, &b); err != nil {
			return nil, err
		}
		switch {
		case !isDigest(b.SHA256):
			return nil, p.errf("sha256", ErrTapeMalformed, "not 64 lower-case hex digits")
		case b.SHA256 == prev:
			return nil, p.errf("sha256", ErrTapeMalformed, "the body is given twice")
		case b.SHA256 < prev:
			return nil, p.errf("sha256", ErrTapeMalformed, "the bodies are not sorted by sha256")
		case !refs[b.SHA256]:
			return nil, p.errf("sha256", ErrTapeMalformed, "no call names this body")
		}
		if sum := sha256.Sum256(b.Base64); hex.EncodeToString(sum[:]) != b.SHA256 {
			return nil, p.errf("base64", ErrTapeTampered, "the body hashes to %s, the line says %s",
				digestText(hex.EncodeToString(sum[:])), digestText(b.SHA256))
		}
		if !canonicalBlob(line, b.SHA256, b.Base64) {
			return nil, p.errf("", ErrTapeMalformed, "not in canonical form (as WriteTo writes it)")
		}
		if total += int64(len(b.Base64)); total > maxTapeBodies {
			return nil, p.errf("base64", ErrTapeTooLarge, "the bodies come to over %d bytes", maxTapeBodies)
		}
		if b.Base64 == nil {
			b.Base64 = []byte{}
		}
		blobs[b.SHA256], prev = b.Base64, b.SHA256
	}

	switch line, err := p.next(); {
	case err == io.EOF:
	case err != nil:
		return nil, err
	case bytes.HasPrefix(line, []byte(blobPrefix)):
		return nil, headerErr("blobs", "the header announces %d bodies, line %d holds one more", h.Blobs, p.line)
	case bytes.HasPrefix(line, []byte(callPrefix)):
		return nil, headerErr("calls", "the header announces %d calls, line %d holds one more", h.Calls, p.line)
	default:
		return nil, p.errf("", ErrTapeMalformed, "a line after the last body")
	}

	for i, c := range calls {
		missing := func(field, sum string) error {
			return &TapeError{Line: i + 2, Field: field, Err: ErrTapeMalformed,
				Reason: fmt.Sprintf("no line holds the body %s", digestText(sum))}
		}
		size := func(field string, n int) error {
			return &TapeError{Line: i + 2, Field: field, Err: ErrTapeMalformed,
				Reason: fmt.Sprintf("the body is %d bytes", n)}
		}
		if c.requestSHA256 != "" {
			b, ok := blobs[c.requestSHA256]
			if !ok {
				return nil, missing("request_sha256", c.requestSHA256)
			}
			if int64(len(b)) != c.requestBytes {
				return nil, size("request_bytes", len(b))
			}
		}
		b, ok := blobs[c.responseSHA256]
		if !ok {
			return nil, missing("response_sha256", c.responseSHA256)
		}
		if int64(len(b)) != c.responseBytes {
			return nil, size("response_bytes", len(b))
		}
		c.response = b
	}

	t := NewTape()
	t.replay = true
	t.calls, t.blobs, t.bodies = calls, blobs, total
	return t, nil
}

// tapeReader reads a recording line by line, within its limit.
type tapeReader struct {
	br    *bufio.Reader // reads at most limit+1 bytes
	limit int64
	read  int64
	line  int // of the line read last
}

// next returns the next line, newline included; io.EOF at the end.
func (p *tapeReader) next() ([]byte, error) {
	b, err := p.br.ReadBytes('\n')
	if len(b) == 0 && err == io.EOF {
		return nil, io.EOF
	}
	p.line++
	if p.read += int64(len(b)); p.read > p.limit {
		return nil, p.errf("", ErrTapeTooLarge, "the file is over the limit of %d bytes", p.limit)
	}
	if err == io.EOF {
		return nil, p.errf("", ErrTapeMalformed, "the line has no newline: the file is cut short")
	}
	if err != nil {
		return nil, fmt.Errorf("reading the recording, line %d: %w", p.line, err)
	}
	return b, nil
}

// errf is a *TapeError for the line read last.
func (p *tapeReader) errf(field string, sentinel error, format string, args ...any) error {
	return &TapeError{Line: p.line, Field: field, Reason: fmt.Sprintf(format, args...), Err: sentinel}
}

// decode reads line into v, strictly: unknown fields are refused. It does
// not check the form: the callers compare it with the canonical one.
func (p *tapeReader) decode(line []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(line))
	d.DisallowUnknownFields()
	err := d.Decode(v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	var be base64.CorruptInputError
	switch {
	case errors.As(err, &te):
		return p.errf(te.Field, ErrTapeMalformed, "a JSON %s, not a %v", te.Value, te.Type)
	case errors.As(err, &be):
		return p.errf("base64", ErrTapeMalformed, "not base64: %v", be)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name, uerr := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		if uerr != nil {
			name = "?"
		}
		return p.errf(clip(name), ErrTapeMalformed, "unknown field")
	}
	return p.errf("", ErrTapeMalformed, "not a JSON object: %v", err)
}

// call reads the line of call seq. Its response is left nil, for ReadTape
// to fill once the bodies have been read.
func (p *tapeReader) call(line []byte, seq int) (*tapeCall, error) {
	var l callLine
	if err := p.decode(line, &l); err != nil {
		return nil, err
	}
	bad := func(field, format string, args ...any) (*tapeCall, error) {
		return nil, p.errf(field, ErrTapeMalformed, format, args...)
	}
	switch {
	case l.Seq != seq:
		return bad("seq", "%d where %d is due: calls are numbered from 1, in order, without gaps", l.Seq, seq)
	case !validName(l.Gateway):
		return bad("gateway", "not a gateway name")
	case !validMethod(l.Method):
		return bad("method", "not an HTTP method")
	case l.Target == "":
		return bad("target", "empty")
	case l.RequestSHA256 != "" && !isDigest(l.RequestSHA256):
		return bad("request_sha256", "neither empty nor 64 lower-case hex digits")
	case l.RequestBytes < 0 || l.RequestBytes > maxRequestBody:
		return bad("request_bytes", "not between 0 and %d", maxRequestBody)
	case l.RequestSHA256 == "" && l.RequestBytes != 0:
		return bad("request_bytes", "not 0 for a body that was not read")
	case l.Status < 200 || l.Status > 999:
		return bad("status", "not between 200 and 999")
	case !isDigest(l.ResponseSHA256):
		return bad("response_sha256", "not 64 lower-case hex digits")
	case l.ResponseBytes < 0 || l.ResponseBytes > maxTapeBodies:
		return bad("response_bytes", "not between 0 and %d", maxTapeBodies)
	case (l.Status == 204 || l.Status == 304) && l.ResponseBytes != 0:
		return bad("response_bytes", "not 0 for status %d, which has no body", l.Status)
	case !bytes.Equal(encodeLine(l), line):
		return bad("", "not in canonical form (as WriteTo writes it)")
	}
	return &tapeCall{seq: l.Seq, gateway: l.Gateway, method: l.Method, target: l.Target,
		requestSHA256: l.RequestSHA256, requestBytes: l.RequestBytes,
		done: true, status: l.Status, contentType: l.ContentType,
		responseSHA256: l.ResponseSHA256, responseBytes: l.ResponseBytes, cut: l.Cut}, nil
}

// canonicalBlob reports whether line is the one writeBlob writes for data,
// without holding another copy of its base64.
func canonicalBlob(line []byte, sum string, data []byte) bool {
	n := base64.StdEncoding.EncodedLen(len(data))
	head := blobPrefix + sum + blobMid
	if len(line) != len(head)+n+len(blobEnd) || string(line[:len(head)]) != head || string(line[len(head)+n:]) != blobEnd {
		return false
	}
	enc := line[len(head) : len(head)+n]
	var buf [4 << 10]byte
	for len(data) > 0 {
		k := min(len(data), 3<<10) // a multiple of 3: no padding but at the end
		m := base64.StdEncoding.EncodedLen(k)
		base64.StdEncoding.Encode(buf[:m], data[:k])
		if !bytes.Equal(buf[:m], enc[:m]) {
			return false
		}
		data, enc = data[k:], enc[m:]
	}
	return len(enc) == 0
}

// isDigest reports whether s is a hex SHA-256 as the tape writes it.
func isDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validMethod reports whether s is an HTTP method: a token (RFC 9110).
func validMethod(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

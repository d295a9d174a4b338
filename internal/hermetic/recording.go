package hermetic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"
	"golang.org/x/net/http/httpguts"

	"github.com/proctor-sandbox/proctor/internal/netpolicy"
)

// Schema names the format of a recording's index.
const Schema = "proctor.hermetic/v1"

// IndexFile is the name of a recording's index in a directory made by
// Export; its bodies are beside it, each named BlobFile(digest).
const IndexFile = "hermetic.json"

// BlobFile is the file name of a recorded body: "hermetic-" and its hex
// SHA-256. A plain name, fit for a bundle's manifest.
func BlobFile(sha256hex string) string { return "hermetic-" + sha256hex }

// Limits on what an index may hold when read.
const (
	maxIndexBytes = 64 << 20
	maxExchanges  = 100_000
	maxURLBytes   = 8 << 10
	maxAccept     = 1 << 10
	maxHeaderVal  = 8 << 10
	maxHeaders    = 64
)

// Exchange is one request of a recording and what answered it. The
// request is named by its key: Method, URL, Accept and RequestSHA256.
// The answer is a response (Status, Header, the body by BodySHA256), or,
// when Refused is set, a refusal by the recorder (Status, no body): the
// replay refuses it again in the same words.
type Exchange struct {
	Method string `json:"method"` // "CONNECT" for a tunnel the recorder refused
	// URL is absolute: scheme http or https, the host as netpolicy.ParseHost
	// gives it, the port only when not the scheme's default, then the
	// request target as the client sent it (path and query). For a
	// CONNECT, "host:port".
	URL           string `json:"url"`
	Accept        string `json:"accept"`         // the request's Accept header, "" for none
	RequestSHA256 string `json:"request_sha256"` // of the request body; "" for none
	RequestBytes  int64  `json:"request_bytes"`

	Status     int         `json:"status"`
	Header     [][2]string `json:"header"`      // kept response headers (keptHeaders), sorted by name
	BodySHA256 string      `json:"body_sha256"` // "" for an empty body
	BodyBytes  int64       `json:"body_bytes"`
	Refused    string      `json:"refused,omitempty"` // why the recorder refused the request
	Count      int         `json:"count"`             // how often the request was asked while recording
}

// key is what a request is matched on.
type key struct{ method, url, accept, body string }

func (e *Exchange) key() key { return key{e.Method, e.URL, e.Accept, e.RequestSHA256} }

// good reports whether the answer is final: a later request with the
// same key is given it rather than being fetched again while recording.
func (e *Exchange) good() bool { return e.Refused == "" && e.Status < 500 }

func (k key) less(o key) int {
	return cmpStrings(k.url, o.url, k.method, o.method, k.accept, o.accept, k.body, o.body)
}

func cmpStrings(pairs ...string) int {
	for i := 0; i < len(pairs); i += 2 {
		if c := strings.Compare(pairs[i], pairs[i+1]); c != 0 {
			return c
		}
	}
	return 0
}

// keptHeaders are the response headers a recording keeps and a replay
// sends: what clients act on (type, encoding, redirects, names of
// downloads, validators, retry hints, authentication challenges). Not
// kept: Date, Set-Cookie, Server, hop-by-hop and framing headers (the
// replay frames the body itself), and whatever else a server adds.
// Content-Length is kept for a HEAD only, whose response has no body to
// count.
var keptHeaders = map[string]bool{
	"Cache-Control": true, "Content-Disposition": true, "Content-Encoding": true,
	"Content-Language": true, "Content-Type": true, "Etag": true, "Expires": true,
	"Last-Modified": true, "Link": true, "Location": true, "Retry-After": true,
	"Www-Authenticate": true, "Content-Length": true,
}

// index is the JSON document of a recording.
type index struct {
	Schema    string     `json:"schema"`
	Exchanges []Exchange `json:"exchanges"`
}

// Recording is a content-addressed record of what a verifier fetched: an
// index in canonical JSON (RFC 8785), whose SHA-256 is the recording's
// digest, and the bodies it names, by their SHA-256, in a blob directory.
// It is immutable and safe for concurrent use.
type Recording struct {
	raw     []byte // the index, canonical
	digest  string
	ex      []Exchange // sorted by key
	byKey   map[key]int
	tunnels map[string]bool // "host:port" of every https exchange
	blobDir string          // where the bodies are; "" when not loaded with them
}

// Digest is "sha256:" and the hex SHA-256 of the index.
func (r *Recording) Digest() string { return r.digest }

// Index returns the index as stored: canonical JSON.
func (r *Recording) Index() []byte { return bytes.Clone(r.raw) }

// Exchanges returns the exchanges, sorted by URL, method, Accept and
// request digest.
func (r *Recording) Exchanges() []Exchange {
	out := slices.Clone(r.ex)
	for i := range out {
		out[i].Header = slices.Clone(out[i].Header)
	}
	return out
}

// Blob is one recorded body.
type Blob struct {
	SHA256 string // hex
	Size   int64
}

// Blobs lists the distinct bodies the index names, sorted by digest.
func (r *Recording) Blobs() []Blob {
	seen := map[string]bool{}
	var out []Blob
	for _, e := range r.ex {
		if e.BodySHA256 != "" && !seen[e.BodySHA256] {
			seen[e.BodySHA256] = true
			out = append(out, Blob{e.BodySHA256, e.BodyBytes})
		}
	}
	slices.SortFunc(out, func(a, b Blob) int { return strings.Compare(a.SHA256, b.SHA256) })
	return out
}

// Files lists the files of the recording in a directory made by Export:
// IndexFile, then each body's BlobFile, sorted.
func (r *Recording) Files() []string {
	out := []string{IndexFile}
	for _, b := range r.Blobs() {
		out = append(out, BlobFile(b.SHA256))
	}
	return out
}

// Size is the bytes of the distinct bodies.
func (r *Recording) Size() int64 {
	var n int64
	for _, b := range r.Blobs() {
		n += b.Size
	}
	return n
}

func (r *Recording) lookup(k key) (*Exchange, bool) {
	i, ok := r.byKey[k]
	if !ok {
		return nil, false
	}
	return &r.ex[i], true
}

// newRecording makes the Recording of exchanges, which must be valid.
// EmptyRecording is the recording of a verifier that fetched nothing: its
// replay refuses every request.
func EmptyRecording() (*Recording, error) { return newRecording([]Exchange{}, "") }

func newRecording(ex []Exchange, blobDir string) (*Recording, error) {
	ex = slices.Clone(ex)
	slices.SortFunc(ex, func(a, b Exchange) int { return a.key().less(b.key()) })
	raw, err := encodeIndex(ex)
	if err != nil {
		return nil, err
	}
	return parseIndex(raw, blobDir)
}

func encodeIndex(ex []Exchange) ([]byte, error) {
	if ex == nil {
		ex = []Exchange{}
	}
	for i := range ex {
		if ex[i].Header == nil {
			ex[i].Header = [][2]string{}
		}
	}
	b, err := json.Marshal(index{Schema: Schema, Exchanges: ex})
	if err != nil {
		return nil, fmt.Errorf("hermetic: encoding the index: %w", err)
	}
	return jcs.Transform(b)
}

// ParseIndex reads an index without its bodies: enough to list them
// (Blobs, Files) and check a digest, not to replay. The index is taken as
// hostile: it must be exactly as this package writes one (canonical JSON,
// known fields, exchanges sorted and unique, every field in range);
// anything else is an *IndexError wrapping ErrMalformed (or
// ErrRecordingFull for one over the limits).
func ParseIndex(b []byte) (*Recording, error) { return parseIndex(b, "") }

func parseIndex(b []byte, blobDir string) (*Recording, error) {
	whole := func(err error, format string, args ...any) error {
		return &IndexError{Exchange: -1, Reason: fmt.Sprintf(format, args...), Err: err}
	}
	if len(b) > maxIndexBytes {
		return nil, whole(ErrRecordingFull, "the index is over %d bytes", maxIndexBytes)
	}
	var ix index
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ix); err != nil {
		return nil, whole(ErrMalformed, "not a recording index: %v", err)
	}
	if dec.More() {
		return nil, whole(ErrMalformed, "text after the index")
	}
	if ix.Schema != Schema {
		return nil, &IndexError{Exchange: -1, Field: "schema", Reason: "not " + strconv.Quote(Schema), Err: ErrMalformed}
	}
	if len(ix.Exchanges) > maxExchanges {
		return nil, whole(ErrRecordingFull, "over %d exchanges", maxExchanges)
	}
	r := &Recording{ex: ix.Exchanges, byKey: make(map[key]int, len(ix.Exchanges)), tunnels: map[string]bool{}, blobDir: blobDir}
	sizes := map[string]int64{}
	for i := range r.ex {
		e := &r.ex[i]
		if field, reason := checkExchange(e); reason != "" {
			return nil, &IndexError{Exchange: i, Field: field, Reason: reason, Err: ErrMalformed}
		}
		if i > 0 && r.ex[i-1].key().less(e.key()) >= 0 {
			return nil, &IndexError{Exchange: i, Reason: "exchanges not sorted, or the same request twice", Err: ErrMalformed}
		}
		if n, ok := sizes[e.BodySHA256]; ok && n != e.BodyBytes {
			return nil, &IndexError{Exchange: i, Field: "body_bytes", Reason: "another exchange gives this body another size", Err: ErrMalformed}
		}
		sizes[e.BodySHA256] = e.BodyBytes
		r.byKey[e.key()] = i
		if rest, ok := strings.CutPrefix(e.URL, "https://"); ok {
			h, p, _ := splitAuthority(rest[:strings.IndexByte(rest, '/')], 443)
			r.tunnels[tunnelKey(h, p)] = true
		}
	}
	canon, err := encodeIndex(slices.Clone(ix.Exchanges))
	if err != nil {
		return nil, whole(ErrMalformed, "%v", err)
	}
	if !bytes.Equal(canon, b) {
		return nil, whole(ErrMalformed, "not in canonical form (RFC 8785, as this package writes it)")
	}
	r.raw = canon
	sum := sha256.Sum256(canon)
	r.digest = "sha256:" + hex.EncodeToString(sum[:])
	return r, nil
}

// checkExchange returns the field at fault and why, or "" and "".
func checkExchange(e *Exchange) (field, reason string) {
	switch {
	case !validToken(e.Method):
		return "method", "not an HTTP method"
	case e.Method == http.MethodConnect:
		if h, p, err := splitAuthority(e.URL, 0); err != nil || tunnelKey(h, p) != e.URL || e.Refused == "" {
			return "url", "a CONNECT is recorded only as a refused \"host:port\""
		}
	case checkURL(e.URL) != "":
		return "url", checkURL(e.URL)
	}
	switch {
	case len(e.Accept) > maxAccept || !printable(e.Accept):
		return "accept", "not printable ASCII of at most 1 KiB"
	case e.RequestSHA256 != "" && !isHex64(e.RequestSHA256):
		return "request_sha256", "neither empty nor 64 lower-case hex digits"
	case (e.RequestSHA256 == "") != (e.RequestBytes == 0) || e.RequestBytes < 0 || e.RequestBytes > maxRequestBody:
		return "request_bytes", "not the size of the request body the digest names"
	case e.Count < 1:
		return "count", "not at least 1"
	case e.BodySHA256 != "" && !isHex64(e.BodySHA256):
		return "body_sha256", "neither empty nor 64 lower-case hex digits"
	case (e.BodySHA256 == "") != (e.BodyBytes == 0) || e.BodyBytes < 0 || e.BodyBytes > maxBlobBytes:
		return "body_bytes", "not the size of the body the digest names"
	case len(e.Header) > maxHeaders:
		return "header", "too many headers"
	case e.Refused != "":
		if e.Status < 400 || e.Status > 599 || e.BodySHA256 != "" || len(e.Header) != 0 || len(e.Refused) > maxReason || !printable(e.Refused) {
			return "refused", "a refusal has a 4xx or 5xx status, printable reason, no header and no body"
		}
		return "", ""
	case e.Status < 200 || e.Status > 599:
		return "status", "not 200-599"
	case (e.Status == 204 || e.Status == 304 || e.Method == http.MethodHead) && e.BodyBytes != 0:
		return "body_bytes", "a body where the response has none"
	}
	for i, h := range e.Header {
		switch {
		case !keptHeaders[h[0]] || (h[0] == "Content-Length" && e.Method != http.MethodHead):
			return "header", h[0] + " is not a kept header"
		case len(h[1]) > maxHeaderVal || !printable(h[1]):
			return "header", h[0] + ": value not printable ASCII of at most 8 KiB"
		case i > 0 && e.Header[i-1][0] > h[0]:
			return "header", "not sorted by name"
		}
	}
	return "", ""
}

// checkURL says what is wrong with an exchange's URL, or "".
func checkURL(s string) string {
	if len(s) > maxURLBytes {
		return "longer than 8 KiB"
	}
	scheme, rest, ok := strings.Cut(s, "://")
	def := map[string]int{"http": 80, "https": 443}[scheme]
	if !ok || def == 0 {
		return "not an http:// or https:// URL"
	}
	j := strings.IndexByte(rest, '/')
	if j < 0 {
		return "no path"
	}
	h, p, err := splitAuthority(rest[:j], def)
	if err != nil {
		return err.Error()
	}
	if rest[:j] != authorityOf(h, p, def) || !validTarget(rest[j:]) {
		return "not canonical"
	}
	return ""
}

// validTarget reports whether t is an origin-form request target the way
// a client sends one: "/" then printable ASCII, no space or '#'.
func validTarget(t string) bool {
	return strings.HasPrefix(t, "/") && printable(t) && !strings.ContainsAny(t, " #")
}

// splitAuthority parses "host[:port]" into the canonical host and the
// port (def when absent; absent is an error when def is 0).
func splitAuthority(s string, def int) (string, int, error) {
	hp, ps := s, ""
	if i := strings.LastIndexByte(s, ':'); i >= 0 && !strings.HasSuffix(s, "]") {
		hp, ps = s[:i], s[i+1:]
	}
	port := def
	if ps != "" || strings.HasSuffix(s, ":") {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != ps {
			return "", 0, fmt.Errorf("bad port %q", ps)
		}
		port = n
	}
	if port == 0 {
		return "", 0, fmt.Errorf("missing port")
	}
	h, _, err := netpolicy.ParseHost(hp)
	if err != nil {
		return "", 0, fmt.Errorf("host: %v", err)
	}
	return h, port, nil
}

// authorityOf writes host and port, the port left out when it is def.
func authorityOf(host string, port, def int) string {
	if port == def {
		return host
	}
	return host + ":" + strconv.Itoa(port)
}

// tunnelKey is how a tunnel, and a CONNECT exchange's URL, is written:
// "host:port", the port always there.
func tunnelKey(host string, port int) string { return host + ":" + strconv.Itoa(port) }

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	for _, c := range []byte(s) {
		if c < 0x20 || c >= 0x7f {
			return false
		}
	}
	return true
}

func validToken(s string) bool { return len(s) <= 32 && httpguts.ValidHeaderFieldName(s) }

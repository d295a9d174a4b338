package bundle

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"
)

// Schema names the payload format; it is the payload's "schema" field.
const Schema = "proctor.bundle/v1"

// SignatureContext is prefixed to JCS(payload) to form the message that is
// signed, so that a signature over a bundle can never be taken for a
// signature over anything else made with the same key.
const SignatureContext = "proctor-bundle-v1\x00"

// Algorithm is the only signature algorithm of this schema.
const Algorithm = "ed25519"

// Genesis is the prev of the first timeline event: 64 zeros.
const Genesis = "0000000000000000000000000000000000000000000000000000000000000000"

// TimeLayout is the one form of a timeline event's time: RFC 3339 in UTC
// with exactly nine fractional digits, so that times sort as strings and
// each instant has one spelling.
const TimeLayout = "2006-01-02T15:04:05.000000000Z"

// MaxSize bounds the size of a bundle.json Verify accepts.
const MaxSize = 64 << 20

// maxSafeInt is the largest integer every JSON implementation reads
// exactly (I-JSON, RFC 7493): 2^53-1.
const maxSafeInt = 1<<53 - 1

// Payload is what a bundle signs. It is a plain value; Sign fills Signer
// and Verify returns a new one, which the caller owns.
type Payload struct {
	// Schema is always Schema.
	Schema string `json:"schema"`
	// Verdict is the trial's verdict, a JSON object this package does not
	// interpret (Summary reads a few fields). Verify returns it in canonical
	// form. SetVerdict fills it from a Go value.
	Verdict json.RawMessage `json:"verdict"`
	// Timeline is the hash-chained event log; build it with a Timeline.
	Timeline []Event `json:"timeline"`
	// Manifest lists the artifacts beside the bundle, sorted by name; build
	// it with HashArtifacts.
	Manifest []Artifact `json:"manifest"`
	// Provenance binds every input of the trial by digest.
	Provenance Provenance `json:"provenance"`
	// Signer is the key that signed the bundle; Sign fills it.
	Signer Signer `json:"signer"`
}

// Event is one entry of the timeline. Hash is the lowercase hex SHA-256 of
// the JCS form of the event without its hash field; Prev is the previous
// event's Hash, or Genesis for the first event.
type Event struct {
	Seq    int64           `json:"seq"`    // 0, 1, 2, … without gaps
	Time   string          `json:"time"`   // TimeLayout
	Kind   string          `json:"kind"`   // 1-64 of [a-z0-9_.:-], starting with a letter
	Detail json.RawMessage `json:"detail"` // a JSON object, canonical
	Prev   string          `json:"prev"`   // 64 lowercase hex
	Hash   string          `json:"hash"`   // 64 lowercase hex
}

// At returns the event's time. It is the zero time if Time is malformed.
func (e Event) At() time.Time {
	t, _ := parseTime(e.Time)
	return t
}

// Artifact is one file beside the bundle.
type Artifact struct {
	// Name is a plain file name: 1-255 bytes of UTF-8, no '/', '\\' or
	// control character, not starting with '.'.
	Name   string `json:"name"`
	SHA256 string `json:"sha256"` // 64 lowercase hex, no prefix
	Size   int64  `json:"size"`   // bytes, 0 to 2^53-1
}

// Provenance is every input the agent was given, content-addressed, and
// what ran the trial.
type Provenance struct {
	TaskDigest        string       `json:"task_digest"`        // "sha256:" + 64 hex
	EnvironmentDigest string       `json:"environment_digest"` // "sha256:" or "host-sha256:" + 64 hex
	Agent             Agent        `json:"agent"`
	Proctor           ProctorBuild `json:"proctor"`
	Host              Host         `json:"host"`
}

// Agent is what the agent was run as. The values of its environment are
// never recorded (they may be credentials); their names are.
type Agent struct {
	Command   string   `json:"command"`    // non-empty
	DirDigest string   `json:"dir_digest"` // "sha256:" + 64 hex, or "" without --agent-dir
	EnvNames  []string `json:"env_names"`  // sorted, unique; no '=' or NUL
	// Layer is the installed agent the command ran from, when it ran
	// from a recipe; absent otherwise.
	Layer *AgentLayer `json:"layer,omitempty"`
}

// AgentLayer names an installed agent: its recipe, by name and digest, and
// the digest of the installed tree.
type AgentLayer struct {
	Recipe       string `json:"recipe"`        // 1-64 of [a-z0-9._-]
	RecipeDigest string `json:"recipe_digest"` // "sha256:" + 64 hex
	Digest       string `json:"digest"`        // "sha256:" + 64 hex
}

// ProctorBuild identifies the harness binary.
type ProctorBuild struct {
	Version  string `json:"version"`  // non-empty; "(devel)" for a source build
	Revision string `json:"revision"` // VCS revision, "" when unknown
	Go       string `json:"go"`       // runtime.Version(), non-empty
}

// Host is the machine the trial ran on.
type Host struct {
	Kernel    string   `json:"kernel"`    // non-empty, as uname -r prints it
	Platform  string   `json:"platform"`  // GOOS/GOARCH, "linux/amd64"
	Isolation []string `json:"isolation"` // isolation features in force: sorted, unique
}

// Signer names the key that signed the payload. It is inside the payload,
// so it is signed too.
type Signer struct {
	Algorithm   string `json:"algorithm"`   // Algorithm
	PublicKey   string `json:"public_key"`  // standard base64, padded, of the 32-byte key
	Fingerprint string `json:"fingerprint"` // Fingerprint(PublicKey)
}

// SetVerdict sets p.Verdict to the canonical JSON of v, which must encode
// as a JSON object.
func (p *Payload) SetVerdict(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding the verdict: %w", err)
	}
	c, err := canonicalObject(data)
	if err != nil {
		return fmt.Errorf("encoding the verdict: %w", err)
	}
	p.Verdict = c
	return nil
}

// Fingerprint identifies an ed25519 public key: "SHA256:" followed by the
// unpadded standard base64 of the SHA-256 of the 32 key bytes. (OpenSSH
// prints fingerprints in the same style, but hashes its own key encoding,
// so the two never coincide.)
func Fingerprint(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// signerOf describes pub.
func signerOf(pub ed25519.PublicKey) Signer {
	return Signer{Algorithm: Algorithm, PublicKey: base64.StdEncoding.EncodeToString(pub), Fingerprint: Fingerprint(pub)}
}

// FormatTime renders t in TimeLayout, in UTC.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// parseTime reads a time in TimeLayout, and only in its one spelling.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(TimeLayout, s)
	if err != nil || t.Format(TimeLayout) != s {
		return time.Time{}, fmt.Errorf("want a UTC time as %s, got %s", TimeLayout, show(s))
	}
	return t, nil
}

// ThisBuild describes the running binary from its build information.
func ThisBuild() ProctorBuild {
	b := ProctorBuild{Version: "(devel)", Go: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if v := info.Main.Version; v != "" {
		b.Version = v
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	b.Revision = rev
	return b
}

// ThisPlatform is the running binary's GOOS/GOARCH, for Host.Platform.
func ThisPlatform() string { return runtime.GOOS + "/" + runtime.GOARCH }

// The checks of single values. Each returns "" when v is well formed, or
// what is wrong with it.

func isHex64(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func checkHex64(s string) string {
	if !isHex64(s) {
		return "want 64 lowercase hex digits, got " + show(s)
	}
	return ""
}

// checkDigest accepts prefix + 64 lowercase hex for one of prefixes.
func checkDigest(s string, prefixes ...string) string {
	for _, p := range prefixes {
		if rest, ok := strings.CutPrefix(s, p); ok && isHex64(rest) {
			return ""
		}
	}
	return fmt.Sprintf("want %s followed by 64 lowercase hex digits, got %s", strings.Join(prefixes, " or "), show(s))
}

// checkKind: 1-64 bytes of [a-z0-9_.:-], starting with a letter.
func checkKind(s string) string {
	ok := len(s) >= 1 && len(s) <= 64 && s[0] >= 'a' && s[0] <= 'z'
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '-'
	}
	if !ok {
		return "want 1-64 of [a-z0-9_.:-] starting with a letter, got " + show(s)
	}
	return ""
}

// CheckArtifactName reports whether name may appear in a manifest: a plain
// relative file name of 1 to 255 bytes of UTF-8 that does not start with
// '.' (so neither "." nor "..") and has no '/', '\\' or control character,
// so that it names the same file in the artifact directory on any
// platform.
func CheckArtifactName(name string) error {
	if msg := checkName(name); msg != "" {
		return fmt.Errorf("artifact name %s: %s", show(name), msg)
	}
	return nil
}

func checkName(s string) string {
	switch {
	case s == "":
		return "empty"
	case len(s) > 255:
		return fmt.Sprintf("%d bytes long, at most 255", len(s))
	case s[0] == '.':
		return "starts with '.'"
	case !utf8.ValidString(s):
		return "not valid UTF-8"
	}
	for _, r := range s {
		switch {
		case r == '/' || r == '\\':
			return "contains a path separator"
		case r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0:
			return "contains a control character"
		}
	}
	return ""
}

func checkEnvName(s string) string {
	switch {
	case s == "":
		return "empty variable name"
	case strings.ContainsAny(s, "=\x00"):
		return "variable name " + show(s) + " contains '=' or NUL"
	}
	return ""
}

func checkFeature(s string) string {
	if s == "" || len(s) > 128 {
		return "want 1-128 bytes, got " + show(s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "contains a control character: " + show(s)
		}
	}
	return ""
}

func checkPlatform(s string) string {
	goos, goarch, ok := strings.Cut(s, "/")
	if !ok || !isWord(goos) || !isWord(goarch) {
		return "want GOOS/GOARCH such as \"linux/amd64\", got " + show(s)
	}
	return ""
}

// isWord: 1-32 of [a-z0-9].
func isWord(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

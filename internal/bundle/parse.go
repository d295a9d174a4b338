package bundle

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
)

// value is one JSON value of a canonical document and where it is.
type value struct {
	node
	path string // "" for the document itself
}

// name is how a value is named in a VerifyError.
func (v value) name() string {
	if v.path == "" {
		return "bundle"
	}
	return v.path
}

// child is the path of member key of v.
func (v value) child(key string) string {
	plain := key != ""
	for i := 0; plain && i < len(key); i++ {
		c := key[i]
		plain = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	switch {
	case !plain:
		return v.path + "[" + strconv.Quote(key) + "]"
	case v.path == "":
		return key
	default:
		return v.path + "." + key
	}
}

func (v value) fail(sentinel error, format string, args ...any) *VerifyError {
	return fail(v.name(), sentinel, format, args...)
}

func (v value) wrongType(want string) *VerifyError {
	return v.fail(ErrSchema, "want %s, got %s", want, kindOf(v.raw))
}

// member returns the member key of an object, if it has one.
func (v value) member(key string) (value, bool) {
	for _, m := range v.members {
		if m.key == key {
			return value{node: m.val, path: v.child(key)}, true
		}
	}
	return value{}, false
}

// object reads v as an object holding exactly keys: the first missing key
// (in the order given), else the first unknown key (in canonical order),
// fails.
func (v value) object(keys ...string) (map[string]value, *VerifyError) {
	if !isObject(v.raw) {
		return nil, v.wrongType("an object")
	}
	out := make(map[string]value, len(keys))
	for _, k := range keys {
		m, ok := v.member(k)
		if !ok {
			return nil, fail(v.child(k), ErrSchema, "missing")
		}
		out[k] = m
	}
	if len(v.members) > len(keys) {
		for _, m := range v.members {
			if _, ok := out[m.key]; !ok {
				return nil, fail(v.child(m.key), ErrSchema, "unknown field")
			}
		}
	}
	return out, nil
}

func (v value) array() ([]value, *VerifyError) {
	if len(v.raw) == 0 || v.raw[0] != '[' {
		return nil, v.wrongType("an array")
	}
	out := make([]value, len(v.elems))
	for i, e := range v.elems {
		out[i] = value{node: e, path: v.path + "[" + strconv.Itoa(i) + "]"}
	}
	return out, nil
}

func (v value) string() (string, *VerifyError) {
	if len(v.raw) == 0 || v.raw[0] != '"' {
		return "", v.wrongType("a string")
	}
	return v.str, nil
}

// checked reads a string and applies check, which returns "" or what is
// wrong.
func (v value) checked(check func(string) string) (string, *VerifyError) {
	s, err := v.string()
	if err != nil {
		return "", err
	}
	if msg := check(s); msg != "" {
		return "", v.fail(ErrSchema, "%s", msg)
	}
	return s, nil
}

// integer reads a non-negative integer of at most 2^53-1. In canonical
// JSON such a number is plain digits.
func (v value) integer() (int64, *VerifyError) {
	s := string(v.raw)
	if kindOf(v.raw) != "a number" {
		return 0, v.wrongType("an integer")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > maxSafeInt {
		return 0, v.fail(ErrSchema, "want an integer from 0 to 2^53-1, got %s", show(s))
	}
	return n, nil
}

// sortedStrings reads an array of strings, each passing check, in strictly
// increasing byte order.
func (v value) sortedStrings(check func(string) string) ([]string, *VerifyError) {
	items, err := v.array()
	if err != nil {
		return nil, err
	}
	out := make([]string, len(items))
	for i, it := range items {
		if out[i], err = it.checked(check); err != nil {
			return nil, err
		}
		if i > 0 && out[i] <= out[i-1] {
			return nil, it.fail(ErrSchema, "not sorted: %s comes after %s", show(out[i]), show(out[i-1]))
		}
	}
	return out, nil
}

// base64Key decodes canonical padded standard base64 of exactly n bytes.
func base64Key(s string, n int) ([]byte, string) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || base64.StdEncoding.EncodeToString(b) != s {
		return nil, "want padded standard base64, got " + show(s)
	}
	if len(b) != n {
		return nil, fmt.Sprintf("want %d bytes, got %d", n, len(b))
	}
	return b, ""
}

// parseDocument reads a canonical bundle document: the payload, its
// canonical bytes, and the signature. It checks every value on its own
// (types, forms, order of lists) but not the signature, the chain or the
// artifacts.
func parseDocument(canon []byte) (*Payload, []byte, []byte, *VerifyError) {
	tree, err := readTree(canon)
	if err != nil {
		return nil, nil, nil, fail("bundle", ErrSchema, "%v", err)
	}
	return parseRoot(value{node: tree})
}

func parseRoot(root value) (*Payload, []byte, []byte, *VerifyError) {
	top, err := root.object("payload", "signature")
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := parsePayload(top["payload"])
	if err != nil {
		return nil, nil, nil, err
	}
	sigv := top["signature"]
	s, err := sigv.string()
	if err != nil {
		return nil, nil, nil, err
	}
	sig, msg := base64Key(s, 64)
	if msg != "" {
		return nil, nil, nil, sigv.fail(ErrSchema, "%s", msg)
	}
	return p, top["payload"].raw, sig, nil
}

// parsePayload reads a canonical payload.
func parsePayload(v value) (*Payload, *VerifyError) {
	if !isObject(v.raw) {
		return nil, v.wrongType("an object")
	}
	// The schema first: a bundle of another version is reported as such,
	// not as a list of unknown fields.
	if sv, ok := v.member("schema"); ok {
		s, err := sv.string()
		if err != nil {
			return nil, err
		}
		if s != Schema {
			return nil, sv.fail(ErrSchema, "unsupported schema %s (want %q)", show(s), Schema)
		}
	}
	m, err := v.object("schema", "verdict", "timeline", "manifest", "provenance", "signer")
	if err != nil {
		return nil, err
	}
	p := &Payload{Schema: Schema}
	if !isObject(m["verdict"].raw) {
		return nil, m["verdict"].wrongType("an object")
	}
	p.Verdict = m["verdict"].raw
	if p.Timeline, err = parseTimeline(m["timeline"]); err != nil {
		return nil, err
	}
	if p.Manifest, err = parseManifest(m["manifest"]); err != nil {
		return nil, err
	}
	if p.Provenance, err = parseProvenance(m["provenance"]); err != nil {
		return nil, err
	}
	if p.Signer, err = parseSigner(m["signer"]); err != nil {
		return nil, err
	}
	return p, nil
}

func parseTimeline(v value) ([]Event, *VerifyError) {
	items, err := v.array()
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(items))
	for i, it := range items {
		m, err := it.object("seq", "time", "kind", "detail", "prev", "hash")
		if err != nil {
			return nil, err
		}
		e := &out[i]
		if e.Seq, err = m["seq"].integer(); err != nil {
			return nil, err
		}
		if e.Time, err = m["time"].checked(func(s string) string {
			if _, err := parseTime(s); err != nil {
				return err.Error()
			}
			return ""
		}); err != nil {
			return nil, err
		}
		if e.Kind, err = m["kind"].checked(checkKind); err != nil {
			return nil, err
		}
		if !isObject(m["detail"].raw) {
			return nil, m["detail"].wrongType("an object")
		}
		e.Detail = m["detail"].raw
		if e.Prev, err = m["prev"].checked(checkHex64); err != nil {
			return nil, err
		}
		if e.Hash, err = m["hash"].checked(checkHex64); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func parseManifest(v value) ([]Artifact, *VerifyError) {
	items, err := v.array()
	if err != nil {
		return nil, err
	}
	out := make([]Artifact, len(items))
	for i, it := range items {
		m, err := it.object("name", "sha256", "size")
		if err != nil {
			return nil, err
		}
		a := &out[i]
		if a.Name, err = m["name"].checked(checkName); err != nil {
			return nil, err
		}
		if i > 0 && a.Name <= out[i-1].Name {
			if a.Name == out[i-1].Name {
				return nil, m["name"].fail(ErrSchema, "duplicate name %s", show(a.Name))
			}
			return nil, m["name"].fail(ErrSchema, "not sorted: %s comes after %s", show(a.Name), show(out[i-1].Name))
		}
		if a.SHA256, err = m["sha256"].checked(checkHex64); err != nil {
			return nil, err
		}
		if a.Size, err = m["size"].integer(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// checkRecipeName says what is wrong with an agent recipe's name.
func checkRecipeName(s string) string {
	if len(s) == 0 || len(s) > 64 || strings.TrimLeft(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") != "" || s[0] == '.' || s[0] == '_' || s[0] == '-' {
		return "want 1-64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit"
	}
	return ""
}

func parseProvenance(v value) (Provenance, *VerifyError) {
	var p Provenance
	m, err := v.object("task_digest", "environment_digest", "agent", "proctor", "host")
	if err != nil {
		return p, err
	}
	if p.TaskDigest, err = m["task_digest"].checked(func(s string) string { return checkDigest(s, "sha256:") }); err != nil {
		return p, err
	}
	if p.EnvironmentDigest, err = m["environment_digest"].checked(func(s string) string {
		return checkDigest(s, "sha256:", "host-sha256:")
	}); err != nil {
		return p, err
	}

	agentKeys := []string{"command", "dir_digest", "env_names"}
	if _, ok := m["agent"].member("layer"); ok {
		agentKeys = append(agentKeys, "layer") // present only for an agent run from a recipe
	}
	agent, err := m["agent"].object(agentKeys...)
	if err != nil {
		return p, err
	}
	if lv, ok := agent["layer"]; ok {
		l, err := lv.object("recipe", "recipe_digest", "digest")
		if err != nil {
			return p, err
		}
		p.Agent.Layer = &AgentLayer{}
		if p.Agent.Layer.Recipe, err = l["recipe"].checked(checkRecipeName); err != nil {
			return p, err
		}
		if p.Agent.Layer.RecipeDigest, err = l["recipe_digest"].checked(func(s string) string { return checkDigest(s, "sha256:") }); err != nil {
			return p, err
		}
		if p.Agent.Layer.Digest, err = l["digest"].checked(func(s string) string { return checkDigest(s, "sha256:") }); err != nil {
			return p, err
		}
	}
	if p.Agent.Command, err = agent["command"].checked(nonEmpty); err != nil {
		return p, err
	}
	if p.Agent.DirDigest, err = agent["dir_digest"].checked(func(s string) string {
		if s == "" {
			return ""
		}
		return checkDigest(s, "sha256:")
	}); err != nil {
		return p, err
	}
	if p.Agent.EnvNames, err = agent["env_names"].sortedStrings(checkEnvName); err != nil {
		return p, err
	}

	build, err := m["proctor"].object("version", "revision", "go")
	if err != nil {
		return p, err
	}
	if p.Proctor.Version, err = build["version"].checked(nonEmpty); err != nil {
		return p, err
	}
	if p.Proctor.Revision, err = build["revision"].string(); err != nil {
		return p, err
	}
	if p.Proctor.Go, err = build["go"].checked(nonEmpty); err != nil {
		return p, err
	}

	host, err := m["host"].object("kernel", "platform", "isolation")
	if err != nil {
		return p, err
	}
	if p.Host.Kernel, err = host["kernel"].checked(nonEmpty); err != nil {
		return p, err
	}
	if p.Host.Platform, err = host["platform"].checked(checkPlatform); err != nil {
		return p, err
	}
	if p.Host.Isolation, err = host["isolation"].sortedStrings(checkFeature); err != nil {
		return p, err
	}
	return p, nil
}

func nonEmpty(s string) string {
	if s == "" {
		return "empty"
	}
	return ""
}

func parseSigner(v value) (Signer, *VerifyError) {
	var s Signer
	m, err := v.object("algorithm", "public_key", "fingerprint")
	if err != nil {
		return s, err
	}
	if s.Algorithm, err = m["algorithm"].string(); err != nil {
		return s, err
	}
	if s.Algorithm != Algorithm {
		return s, m["algorithm"].fail(ErrSchema, "unsupported algorithm %s (want %q)", show(s.Algorithm), Algorithm)
	}
	if s.PublicKey, err = m["public_key"].string(); err != nil {
		return s, err
	}
	pub, msg := base64Key(s.PublicKey, 32)
	if msg != "" {
		return s, m["public_key"].fail(ErrSchema, "%s", msg)
	}
	if s.Fingerprint, err = m["fingerprint"].checked(checkFingerprint); err != nil {
		return s, err
	}
	if want := Fingerprint(pub); s.Fingerprint != want {
		return s, m["fingerprint"].fail(ErrTampered, "%s is not the fingerprint of the public key, %s", s.Fingerprint, want)
	}
	return s, nil
}

// checkFingerprint: "SHA256:" + unpadded standard base64 of 32 bytes.
func checkFingerprint(s string) string {
	const prefix = "SHA256:"
	if len(s) == len(prefix)+43 && s[:len(prefix)] == prefix {
		b, err := base64.RawStdEncoding.Strict().DecodeString(s[len(prefix):])
		if err == nil && len(b) == 32 && base64.RawStdEncoding.EncodeToString(b) == s[len(prefix):] {
			return ""
		}
	}
	return "want \"SHA256:\" and 43 characters of unpadded base64, got " + show(s)
}

package bundle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode/utf16"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors from the generator (go test ./internal/bundle/ -run TestGenerateVectors -update)")

const vectorDir = "testdata/vectors"

// vectorCase is one row of testdata/vectors/vectors.json: verify File with
// these options and expect Want, naming Field.
type vectorCase struct {
	File        string   `json:"file"`
	Description string   `json:"description"`
	PublicKey   string   `json:"public_key,omitempty"` // a key file in the corpus: WithPublicKey
	Artifacts   string   `json:"artifacts,omitempty"`  // a directory in the corpus: WithArtifactDir
	Require     bool     `json:"require,omitempty"`    // WithRequireArtifacts
	Want        string   `json:"want"`                 // "ok" or an outcome of outcomes
	Field       string   `json:"field,omitempty"`      // the VerifyError's Field
	Missing     []string `json:"missing,omitempty"`    // artifacts reported missing
}

// outcomes maps each expected outcome to the sentinel it must match and
// those it must not (the more specific ones).
var outcomes = map[string]struct {
	is    error
	isNot []error
}{
	"schema":        {ErrSchema, []error{ErrTampered}},
	"tampered":      {ErrTampered, []error{ErrSchema, ErrBadSignature, ErrChain, ErrArtifact}},
	"bad-signature": {ErrBadSignature, []error{ErrSchema, ErrWrongKey, ErrChain, ErrArtifact}},
	"wrong-key":     {ErrWrongKey, []error{ErrSchema, ErrChain, ErrArtifact}},
	"chain":         {ErrChain, []error{ErrSchema, ErrBadSignature, ErrArtifact}},
	"artifact":      {ErrArtifact, []error{ErrSchema, ErrBadSignature, ErrChain}},
}

// generateVectors builds the whole corpus: file name → bytes, and the
// cases.
func generateVectors(tb testing.TB) (map[string][]byte, []vectorCase) {
	tb.Helper()
	files := map[string][]byte{}
	var cases []vectorCase
	add := func(name string, data []byte, c vectorCase) {
		if name != "" {
			if _, dup := files[name]; dup {
				tb.Fatalf("vector %s generated twice", name)
			}
			files[name] = data
		}
		cases = append(cases, c)
	}
	signerPub := signerKey.Public().(ed25519.PublicKey)
	otherPub := otherKey.Public().(ed25519.PublicKey)
	files["signer.pub"] = MarshalPublicKey(signerPub, "the signer of every vector")
	files["other.pub"] = MarshalPublicKey(otherPub, "a key that signed nothing here but resigned-other-key.json")

	arts := fixtureArtifacts()
	for name, data := range arts {
		files["valid.artifacts/"+name] = data
	}
	valid, err := Sign(fixturePayload(tb, 7, false, arts), signerKey)
	if err != nil {
		tb.Fatal(err)
	}
	key := "signer.pub"
	add("valid.json", valid, vectorCase{File: "valid.json", Description: "a valid bundle with its artifacts", PublicKey: key, Artifacts: "valid.artifacts", Require: true, Want: "ok"})
	add("", nil, vectorCase{File: "valid.json", Description: "a valid bundle, checked against the key it names", Want: "ok"})
	add("", nil, vectorCase{File: "valid.json", Description: "verified with another public key", PublicKey: "other.pub", Want: "wrong-key", Field: "payload.signer.public_key"})

	var re bytes.Buffer
	writeReordered(&re, decodeTree(tb, valid), "")
	add("reordered.json", re.Bytes(), vectorCase{File: "reordered.json", Description: "valid.json with keys reversed, CRLF and tab whitespace, every non-ASCII character and '/' escaped, integers written as N.0: the same canonical form, so it verifies", PublicKey: key, Artifacts: "valid.artifacts", Require: true, Want: "ok"})

	// Artifacts changed on disk.
	altered := map[string][]byte{}
	resized := map[string][]byte{}
	missing := map[string][]byte{}
	for name, data := range arts {
		altered[name], resized[name], missing[name] = data, data, data
	}
	altered["agent.log"] = bytes.Replace(arts["agent.log"], []byte("ok"), []byte("OK"), 1)
	resized["grader.log"] = append(append([]byte{}, arts["grader.log"]...), "PASS\n"...)
	delete(missing, "changeset.tar")
	for dir, m := range map[string]map[string][]byte{"altered.artifacts": altered, "resized.artifacts": resized, "missing.artifacts": missing} {
		for name, data := range m {
			files[dir+"/"+name] = data
		}
	}
	add("", nil, vectorCase{File: "valid.json", Description: "agent.log changed on disk, same size", PublicKey: key, Artifacts: "altered.artifacts", Want: "artifact", Field: "artifact agent.log"})
	add("", nil, vectorCase{File: "valid.json", Description: "grader.log grown on disk", PublicKey: key, Artifacts: "resized.artifacts", Want: "artifact", Field: "artifact grader.log"})
	add("", nil, vectorCase{File: "valid.json", Description: "changeset.tar missing, artifacts required", PublicKey: key, Artifacts: "missing.artifacts", Require: true, Want: "artifact", Field: "artifact changeset.tar"})
	add("", nil, vectorCase{File: "valid.json", Description: "changeset.tar missing, reported only", PublicKey: key, Artifacts: "missing.artifacts", Want: "ok", Missing: []string{"changeset.tar"}})

	// One value altered after signing, still well formed: the signature
	// fails, whatever the field.
	type alteration struct {
		name, path string
		value      any
		want       string
		field      string
	}
	otherSigner := signerOf(otherPub)
	alterations := []alteration{
		{"schema", "payload.schema", "proctor.bundle/v2", "schema", "payload.schema"},
		{"verdict-passed", "payload.verdict.passed", false, "", ""},
		{"verdict-reward", "payload.verdict.reward", json.Number("0.5"), "", ""},
		{"verdict-task", "payload.verdict.task.name", "hello-world-easy", "", ""},
		{"timeline-seq", "payload.timeline.2.seq", json.Number("3"), "", ""},
		{"timeline-time", "payload.timeline.2.time", "2026-01-02T03:04:08.123456788Z", "", ""},
		{"timeline-kind", "payload.timeline.2.kind", "note", "", ""},
		{"timeline-detail", "payload.timeline.2.detail.path", "README.md", "", ""},
		{"timeline-prev", "payload.timeline.2.prev", digestOf("prev"), "", ""},
		{"timeline-hash", "payload.timeline.2.hash", digestOf("hash"), "", ""},
		{"manifest-name", "payload.manifest.2.name", "grader.out", "", ""},
		{"manifest-sha256", "payload.manifest.0.sha256", digestOf("agent.log"), "", ""},
		{"manifest-size", "payload.manifest.0.size", json.Number("7"), "", ""},
		{"provenance-task_digest", "payload.provenance.task_digest", "sha256:" + digestOf("other task"), "", ""},
		{"provenance-environment_digest", "payload.provenance.environment_digest", "sha256:" + digestOf("environment"), "", ""},
		{"provenance-agent-command", "payload.provenance.agent.command", "cat /solution/solve.sh | sh", "", ""},
		{"provenance-agent-dir_digest", "payload.provenance.agent.dir_digest", "sha256:" + digestOf("scaffold"), "", ""},
		{"provenance-agent-env_names", "payload.provenance.agent.env_names", []any{"HOME", "PATH"}, "", ""},
		{"provenance-proctor-version", "payload.provenance.proctor.version", "v0.1.1", "", ""},
		{"provenance-proctor-revision", "payload.provenance.proctor.revision", "", "", ""},
		{"provenance-proctor-go", "payload.provenance.proctor.go", "go1.25.0", "", ""},
		{"provenance-host-kernel", "payload.provenance.host.kernel", "6.1.0-1-amd64", "", ""},
		{"provenance-host-platform", "payload.provenance.host.platform", "linux/arm64", "", ""},
		{"provenance-host-isolation", "payload.provenance.host.isolation", []any{"cgroup"}, "", ""},
		{"signer-algorithm", "payload.signer.algorithm", "ed448", "schema", "payload.signer.algorithm"},
		{"signer-public_key", "payload.signer", map[string]any{"algorithm": Algorithm, "public_key": otherSigner.PublicKey, "fingerprint": otherSigner.Fingerprint}, "", ""},
		{"signer-fingerprint", "payload.signer.fingerprint", otherSigner.Fingerprint, "tampered", "payload.signer.fingerprint"},
	}
	for _, a := range alterations {
		tree := decodeTree(tb, valid)
		set(tb, tree, a.path, a.value)
		if a.want == "" {
			a.want, a.field = "bad-signature", "signature"
		}
		name := "altered-" + a.name + ".json"
		add(name, encodeTree(tb, tree), vectorCase{File: name, Description: a.path + " changed after signing", Want: a.want, Field: a.field})
	}
	add("", nil, vectorCase{File: "altered-signer-public_key.json", Description: "the signer replaced, verified against the real signer's key", PublicKey: key, Want: "wrong-key", Field: "payload.signer.public_key"})
	{
		tree := decodeTree(tb, valid)
		sig := []byte(tree["signature"].(string))
		sig[10] ^= 'A' ^ 'B' // a letter for another: still base64 of 64 bytes
		if sig[10] == '=' || sig[10] == tree["signature"].(string)[10] {
			tb.Fatal("bad signature alteration")
		}
		tree["signature"] = string(sig)
		add("altered-signature.json", encodeTree(tb, tree), vectorCase{File: "altered-signature.json", Description: "one character of the signature changed", PublicKey: key, Want: "bad-signature", Field: "signature"})
	}

	// Re-signed with the signer's key after a change: the signature holds,
	// so the chain and the manifest must catch what is wrong.
	type resigned struct {
		name, description string
		edit              func(tree map[string]any)
		c                 vectorCase
	}
	events := func(tree map[string]any) []any { return get(tb, tree, "payload.timeline").([]any) }
	for _, r := range []resigned{
		{"timeline-seq", "event 2 numbered 5", func(t map[string]any) { set(tb, t, "payload.timeline.2.seq", json.Number("5")) },
			vectorCase{Want: "chain", Field: "payload.timeline[2].seq"}},
		{"timeline-dropped", "event 2 removed", func(t map[string]any) {
			ev := events(t)
			set(tb, t, "payload.timeline", append(append([]any{}, ev[:2]...), ev[3:]...))
		}, vectorCase{Want: "chain", Field: "payload.timeline[2].seq"}},
		{"timeline-prev", "event 2's prev changed", func(t map[string]any) { set(tb, t, "payload.timeline.2.prev", digestOf("prev")) },
			vectorCase{Want: "chain", Field: "payload.timeline[2].prev"}},
		{"timeline-genesis", "event 0's prev not the genesis value", func(t map[string]any) { set(tb, t, "payload.timeline.0.prev", digestOf("genesis")) },
			vectorCase{Want: "chain", Field: "payload.timeline[0].prev"}},
		{"timeline-hash", "event 2's hash changed", func(t map[string]any) { set(tb, t, "payload.timeline.2.hash", digestOf("hash")) },
			vectorCase{Want: "chain", Field: "payload.timeline[2].hash"}},
		{"timeline-detail", "event 2's detail changed, hashes kept", func(t map[string]any) { set(tb, t, "payload.timeline.2.detail.path", "README.md") },
			vectorCase{Want: "chain", Field: "payload.timeline[2].hash"}},
		{"timeline-time", "event 3's time changed, hashes kept", func(t map[string]any) {
			set(tb, t, "payload.timeline.3.time", "2026-01-02T03:04:09.623456780Z")
		}, vectorCase{Want: "chain", Field: "payload.timeline[3].hash"}},
		{"manifest-unsorted", "manifest entries 0 and 1 swapped", func(t map[string]any) {
			m := get(tb, t, "payload.manifest").([]any)
			m[0], m[1] = m[1], m[0]
		}, vectorCase{Want: "schema", Field: "payload.manifest[1].name"}},
		{"manifest-sha256", "agent.log's sha256 changed in the manifest", func(t map[string]any) { set(tb, t, "payload.manifest.0.sha256", digestOf("agent.log")) },
			vectorCase{PublicKey: key, Artifacts: "valid.artifacts", Want: "artifact", Field: "artifact agent.log"}},
	} {
		tree := decodeTree(tb, valid)
		r.edit(tree)
		resign(tb, tree, signerKey)
		name := "resigned-" + r.name + ".json"
		r.c.File, r.c.Description = name, r.description+", then signed again with the signer's key"
		if r.c.PublicKey == "" {
			r.c.PublicKey = key
		}
		add(name, encodeTree(tb, tree), r.c)
	}
	add("", nil, vectorCase{File: "resigned-manifest-sha256.json", Description: "a wrong manifest entry signed by the signer is consistent without the artifacts", PublicKey: key, Want: "ok"})
	{
		tree := decodeTree(tb, valid)
		set(tb, tree, "payload.signer", map[string]any{"algorithm": Algorithm, "public_key": otherSigner.PublicKey, "fingerprint": otherSigner.Fingerprint})
		resign(tb, tree, otherKey)
		data := encodeTree(tb, tree)
		add("resigned-other-key.json", data, vectorCase{File: "resigned-other-key.json", Description: "signed by another key: intact, but not the signer's", PublicKey: key, Want: "wrong-key", Field: "payload.signer.public_key"})
		add("", nil, vectorCase{File: "resigned-other-key.json", Description: "signed by another key, checked against the key it names: only WithPublicKey tells it apart", Want: "ok"})
	}

	// Malformed documents.
	edit := func(name, description, field string, f func(tree map[string]any)) {
		tree := decodeTree(tb, valid)
		f(tree)
		add(name, encodeTree(tb, tree), vectorCase{File: name, Description: description, PublicKey: key, Want: "schema", Field: field})
	}
	edit("unknown-field.json", "an extra payload field", "payload.comment", func(t map[string]any) { set(tb, t, "payload.comment", "hello") })
	edit("unknown-field-top.json", "an extra top-level field", "comment", func(t map[string]any) { t["comment"] = "hello" })
	edit("unknown-field-nested.json", "an extra field in provenance.host", "payload.provenance.host.arch", func(t map[string]any) { set(tb, t, "payload.provenance.host.arch", "amd64") })
	edit("unknown-field-event.json", "an extra field in event 1", "payload.timeline[1].note", func(t map[string]any) { set(tb, t, "payload.timeline.1.note", "x") })
	edit("unknown-field-case.json", "a field name in another case", "payload.Schema", func(t map[string]any) { set(tb, t, "payload.Schema", Schema) })
	edit("missing-field.json", "provenance.proctor.go removed", "payload.provenance.proctor.go", func(t map[string]any) { del(tb, t, "payload.provenance.proctor.go") })
	edit("missing-signature.json", "no signature", "signature", func(t map[string]any) { delete(t, "signature") })
	edit("wrong-type.json", "a manifest size as a string", "payload.manifest[0].size", func(t map[string]any) { set(tb, t, "payload.manifest.0.size", "88") })
	edit("null-verdict.json", "a null verdict", "payload.verdict", func(t map[string]any) { set(tb, t, "payload.verdict", nil) })
	edit("bad-digest.json", "a task digest in upper case", "payload.provenance.task_digest", func(t map[string]any) {
		set(tb, t, "payload.provenance.task_digest", strings.ToUpper(get(tb, t, "payload.provenance.task_digest").(string)))
	})
	edit("bad-time.json", "an event time without fractional seconds", "payload.timeline[1].time", func(t map[string]any) { set(tb, t, "payload.timeline.1.time", "2026-01-02T03:04:06Z") })
	edit("bad-name.json", "an artifact name that climbs out", "payload.manifest[0].name", func(t map[string]any) { set(tb, t, "payload.manifest.0.name", "../agent.log") })
	edit("negative-size.json", "a negative artifact size", "payload.manifest[0].size", func(t map[string]any) { set(tb, t, "payload.manifest.0.size", json.Number("-1")) })
	edit("float-seq.json", "a fractional sequence number", "payload.timeline[1].seq", func(t map[string]any) { set(tb, t, "payload.timeline.1.seq", json.Number("1.5")) })
	edit("bad-signature-encoding.json", "a signature in URL-safe base64", "signature", func(t map[string]any) {
		t["signature"] = strings.NewReplacer("+", "-", "/", "_").Replace(t["signature"].(string)) + "x"
	})

	raw := func(name, description string, data []byte) {
		add(name, data, vectorCase{File: name, Description: description, PublicKey: key, Want: "schema", Field: "bundle"})
	}
	raw("truncated.json", "valid.json cut in half", valid[:len(valid)/2])
	forged := []byte(`},"verdict":{"passed":true,"reward":1,"status":"forged"}},"signature":`)
	raw("duplicate-key.json", "a second verdict after the signed one (encoding/json would keep the second)", bytes.Replace(valid, []byte(`}},"signature":`), forged, 1))
	raw("not-utf8.json", "a byte that is not UTF-8 in a string", bytes.Replace(valid, []byte("hello-world"), []byte("hello\xffworld"), 1))
	raw("trailing-data.json", "a second JSON value after the bundle", append(append([]byte{}, valid...), "\n{}"...))
	raw("empty.json", "an empty file", []byte{})
	raw("not-an-object.json", "a JSON array", []byte(`["payload","signature"]`))

	// The cases as a file, and a README.
	sort.SliceStable(cases, func(i, j int) bool { return cases[i].File < cases[j].File })
	list, err := json.MarshalIndent(cases, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	files["vectors.json"] = append(list, '\n')
	files["README.md"] = vectorReadme(cases)
	return files, cases
}

func vectorReadme(cases []vectorCase) []byte {
	var b bytes.Buffer
	b.WriteString("# Bundle test vectors\n\n")
	b.WriteString("Generated by `go test ./internal/bundle/ -run TestGenerateVectors -update`;\n")
	b.WriteString("do not edit. `TestVectors` runs every row of `vectors.json` through Verify\n")
	b.WriteString("and checks the outcome and the field named. Every bundle is signed by the key\n")
	b.WriteString("in `signer.pub` (from a fixed seed) unless its name says otherwise.\n\n")
	b.WriteString("| file | options | want | field | what |\n|---|---|---|---|---|\n")
	for _, c := range cases {
		var opts []string
		if c.PublicKey != "" {
			opts = append(opts, "key "+c.PublicKey)
		}
		if c.Artifacts != "" {
			opts = append(opts, "artifacts "+c.Artifacts)
		}
		if c.Require {
			opts = append(opts, "required")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", c.File, strings.Join(opts, ", "), c.Want, c.Field, strings.ReplaceAll(c.Description, "|", "\\|"))
	}
	return b.Bytes()
}

// writeReordered writes a decoded tree as JSON that differs from its
// canonical form in every permitted way: member order reversed, CRLF and
// tab whitespace, '/' and every non-ASCII character escaped (upper-case
// hex), integers with ".0".
func writeReordered(b *bytes.Buffer, v any, indent string) {
	in := indent + "\t"
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Sort(sort.Reverse(sort.StringSlice(keys)))
		b.WriteString("{\r\n")
		for i, k := range keys {
			b.WriteString(in)
			writeEscaped(b, k)
			b.WriteString(" :\t")
			writeReordered(b, v[k], in)
			if i < len(keys)-1 {
				b.WriteByte(',')
			}
			b.WriteString("\r\n")
		}
		b.WriteString(indent + "}")
	case []any:
		b.WriteString("[ ")
		for i, e := range v {
			if i > 0 {
				b.WriteString(" , ")
			}
			writeReordered(b, e, in)
		}
		b.WriteString(" ]")
	case string:
		writeEscaped(b, v)
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			s += ".0"
		}
		b.WriteString(s)
	default:
		data, _ := json.Marshal(v)
		b.Write(data)
	}
}

func writeEscaped(b *bytes.Buffer, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '/':
			b.WriteString(`\/`)
		case r < 0x20 || r >= 0x7f:
			for _, u := range utf16.Encode([]rune{r}) {
				fmt.Fprintf(b, `\u%04X`, u)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// TestGenerateVectors checks that testdata/vectors is what the generator
// makes, or with -update rewrites it.
func TestGenerateVectors(t *testing.T) {
	files, _ := generateVectors(t)
	if *update {
		if err := os.RemoveAll(vectorDir); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, vectorDir, files)
		t.Logf("wrote %d files to %s", len(files), vectorDir)
		return
	}
	onDisk := map[string]bool{}
	err := filepath.WalkDir(vectorDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(vectorDir, p)
		onDisk[filepath.ToSlash(rel)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(vectorDir, name))
		if err != nil {
			t.Errorf("%s: %v (run go test ./internal/bundle/ -run TestGenerateVectors -update)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the generator makes (run go test ./internal/bundle/ -run TestGenerateVectors -update)", name)
		}
	}
	for name := range onDisk {
		if _, ok := files[name]; !ok {
			t.Errorf("%s: not made by the generator (run go test ./internal/bundle/ -run TestGenerateVectors -update)", name)
		}
	}
}

// loadVectors reads the corpus's case list.
func loadVectors(tb testing.TB) []vectorCase {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join(vectorDir, "vectors.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var cases []vectorCase
	if err := json.Unmarshal(data, &cases); err != nil {
		tb.Fatal(err)
	}
	if len(cases) < 50 {
		tb.Fatalf("only %d vectors", len(cases))
	}
	return cases
}

// TestVectors runs every vector of the corpus on disk through Verify.
func TestVectors(t *testing.T) {
	for i, c := range loadVectors(t) {
		t.Run(fmt.Sprintf("%02d-%s", i, strings.TrimSuffix(c.File, ".json")), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(vectorDir, c.File))
			if err != nil {
				t.Fatal(err)
			}
			var opts []VerifyOption
			if c.PublicKey != "" {
				pub, err := ReadPublicKey(filepath.Join(vectorDir, c.PublicKey))
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, WithPublicKey(pub))
			}
			var report ArtifactReport
			if c.Artifacts != "" {
				opts = append(opts, WithArtifactDir(filepath.Join(vectorDir, c.Artifacts)), WithArtifactReport(&report))
			}
			if c.Require {
				opts = append(opts, WithRequireArtifacts())
			}
			p, err := Verify(data, opts...)
			checkOutcome(t, c, p, err)
			if c.Want == "ok" && strings.Join(report.Missing, ",") != strings.Join(c.Missing, ",") {
				t.Errorf("missing artifacts %q, want %q", report.Missing, c.Missing)
			}
		})
	}
}

func checkOutcome(t *testing.T, c vectorCase, p *Payload, err error) {
	t.Helper()
	if c.Want == "ok" {
		if err != nil {
			t.Fatalf("%s: %v", c.Description, err)
		}
		if p == nil || Summary(p) == "" {
			t.Fatal("no payload")
		}
		return
	}
	if err == nil {
		t.Fatalf("%s: verified, want %s at %s", c.Description, c.Want, c.Field)
	}
	if p != nil {
		t.Error("a payload with an error")
	}
	t.Log(err)
	var verr *VerifyError
	if !errors.As(err, &verr) {
		t.Fatalf("error %T %v is not a *VerifyError", err, err)
	}
	if verr.Field != c.Field {
		t.Errorf("field %q, want %q (%v)", verr.Field, c.Field, err)
	}
	o, ok := outcomes[c.Want]
	if !ok {
		t.Fatalf("unknown outcome %q", c.Want)
	}
	if !errors.Is(err, o.is) {
		t.Errorf("%v: does not match %v", err, o.is)
	}
	for _, not := range o.isNot {
		if errors.Is(err, not) {
			t.Errorf("%v: matches %v too", err, not)
		}
	}
	if msg := err.Error(); strings.ContainsAny(msg, "\n\r") || !strings.HasPrefix(msg, c.Field+": ") {
		t.Errorf("message %q: not one line starting with the field", msg)
	}
}

package bundle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSignVerifyRoundTrip(t *testing.T) {
	data, dir := signedFixture(t)
	if data[len(data)-1] != '}' {
		t.Error("bundle.json ends with a newline or other trailing bytes")
	}
	if c, err := Canonicalize(data); err != nil || !bytes.Equal(c, data) {
		t.Fatalf("bundle.json is not in JCS form: %v", err)
	}
	var report ArtifactReport
	pub := signerKey.Public().(ed25519.PublicKey)
	p, err := Verify(data, WithPublicKey(pub), WithArtifactDir(dir), WithRequireArtifacts(), WithArtifactReport(&report))
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Checked) != 4 || len(report.Missing) != 0 {
		t.Errorf("report %+v", report)
	}
	if p.Signer.Fingerprint != Fingerprint(pub) || len(p.Timeline) != 7 || len(p.Manifest) != 4 {
		t.Errorf("payload %+v", p)
	}
	// What Verify returns signs to the same bytes.
	again, err := Sign(p, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, data) {
		t.Error("re-signing the verified payload gives other bytes")
	}
	// The payload is exactly the substring of bundle.json between the
	// fixed prefix and the signature, as docs/bundle.md says.
	payload := data[len(`{"payload":`):bytes.LastIndex(data, []byte(`,"signature":"`))]
	want := fixturePayload(t, 7, false, fixtureArtifacts())
	want.Signer = signerOf(pub)
	c, err := canonicalJSON(want)
	if err != nil || !bytes.Equal(c, payload) {
		t.Errorf("payload bytes differ from JCS of the payload: %v", err)
	}
	if !ed25519.Verify(pub, append([]byte("proctor-bundle-v1\x00"), payload...), sigOf(t, data)) {
		t.Error("the signature is not over the documented message")
	}
}

// sigOf extracts the raw signature of a bundle.
func sigOf(t *testing.T, data []byte) []byte {
	_, _, sig, err := parseDocument(data)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func TestSignRefuses(t *testing.T) {
	arts := fixtureArtifacts()
	for _, tc := range []struct {
		name  string
		edit  func(p *Payload)
		field string
	}{
		{"schema", func(p *Payload) { p.Schema = "proctor.bundle/v0" }, "payload.schema"},
		{"no verdict", func(p *Payload) { p.Verdict = nil }, "payload.verdict"},
		{"array verdict", func(p *Payload) { p.Verdict = json.RawMessage(`[1]`) }, "payload.verdict"},
		{"broken chain", func(p *Payload) { p.Timeline[3].Kind = "other" }, "payload.timeline[3].hash"},
		{"reordered events", func(p *Payload) { p.Timeline[1], p.Timeline[2] = p.Timeline[2], p.Timeline[1] }, "payload.timeline[1].seq"},
		{"bad kind", func(p *Payload) {
			var tl Timeline
			tl.Append("Bad Kind", nil, fixedStart)
			p.Timeline = tl.Events()
		}, "payload.timeline[0].kind"},
		{"year 10000", func(p *Payload) {
			var tl Timeline
			tl.Append("x", nil, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
			p.Timeline = tl.Events()
		}, "payload.timeline[0].time"},
		{"unsorted manifest", func(p *Payload) { p.Manifest[0], p.Manifest[3] = p.Manifest[3], p.Manifest[0] }, "payload.manifest[1].name"},
		{"duplicate artifact", func(p *Payload) { p.Manifest[1] = p.Manifest[0] }, "payload.manifest[1].name"},
		{"artifact path", func(p *Payload) { p.Manifest[0].Name = "a/b" }, "payload.manifest[0].name"},
		{"artifact dot", func(p *Payload) { p.Manifest[0].Name = ".hidden" }, "payload.manifest[0].name"},
		{"negative size", func(p *Payload) { p.Manifest[0].Size = -1 }, "payload.manifest[0].size"},
		{"huge size", func(p *Payload) { p.Manifest[0].Size = 1 << 53 }, "payload.manifest[0].size"},
		{"short sha256", func(p *Payload) { p.Manifest[0].SHA256 = "abc" }, "payload.manifest[0].sha256"},
		{"task digest", func(p *Payload) { p.Provenance.TaskDigest = "sha1:abc" }, "payload.provenance.task_digest"},
		{"host digest for task", func(p *Payload) { p.Provenance.TaskDigest = p.Provenance.EnvironmentDigest }, "payload.provenance.task_digest"},
		{"empty command", func(p *Payload) { p.Provenance.Agent.Command = "" }, "payload.provenance.agent.command"},
		{"layer recipe", func(p *Payload) {
			p.Provenance.Agent.Layer = &AgentLayer{Recipe: "Claude Code", RecipeDigest: fixtureDigest, Digest: fixtureDigest}
		}, "payload.provenance.agent.layer.recipe"},
		{"layer digest", func(p *Payload) {
			p.Provenance.Agent.Layer = &AgentLayer{Recipe: "x", RecipeDigest: fixtureDigest, Digest: "sha256:00"}
		}, "payload.provenance.agent.layer.digest"},
		{"layer recipe digest", func(p *Payload) {
			p.Provenance.Agent.Layer = &AgentLayer{Recipe: "x", RecipeDigest: "md5:x", Digest: fixtureDigest}
		}, "payload.provenance.agent.layer.recipe_digest"},
		{"dir digest", func(p *Payload) { p.Provenance.Agent.DirDigest = "sha256:" }, "payload.provenance.agent.dir_digest"},
		{"unsorted env", func(p *Payload) { p.Provenance.Agent.EnvNames = []string{"PATH", "HOME"} }, "payload.provenance.agent.env_names[1]"},
		{"env value", func(p *Payload) { p.Provenance.Agent.EnvNames = []string{"TOKEN=secret"} }, "payload.provenance.agent.env_names[0]"},
		{"duplicate feature", func(p *Payload) { p.Provenance.Host.Isolation = []string{"a", "a"} }, "payload.provenance.host.isolation[1]"},
		{"no version", func(p *Payload) { p.Provenance.Proctor.Version = "" }, "payload.provenance.proctor.version"},
		{"no go", func(p *Payload) { p.Provenance.Proctor.Go = "" }, "payload.provenance.proctor.go"},
		{"no kernel", func(p *Payload) { p.Provenance.Host.Kernel = "" }, "payload.provenance.host.kernel"},
		{"platform", func(p *Payload) { p.Provenance.Host.Platform = "Linux" }, "payload.provenance.host.platform"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fixturePayload(t, 7, false, arts)
			tc.edit(p)
			_, err := Sign(p, signerKey)
			var verr *VerifyError
			if !errors.As(err, &verr) || verr.Field != tc.field {
				t.Fatalf("Sign: %v, want an error at %s", err, tc.field)
			}
		})
	}
	p := fixturePayload(t, 7, false, arts)
	if _, err := Sign(p, signerKey[:10]); err == nil {
		t.Error("signed with a short key")
	}
	bad := append(ed25519.PrivateKey{}, signerKey...)
	copy(bad[32:], otherKey[32:])
	if _, err := Sign(p, bad); err == nil {
		t.Error("signed with a key whose public half is another's")
	}
	if _, err := Sign(nil, signerKey); err == nil {
		t.Error("signed nil")
	}
	// Empty lists are fine, and nil lists are signed as empty ones.
	p.Timeline, p.Manifest, p.Provenance.Agent.EnvNames, p.Provenance.Host.Isolation = nil, nil, nil, nil
	data, err := Sign(p, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"timeline":[]`)) || !bytes.Contains(data, []byte(`"env_names":[]`)) {
		t.Errorf("nil lists not signed as []: %s", data)
	}
	if _, err := Verify(data); err != nil {
		t.Error(err)
	}
}

func TestTimelineAppend(t *testing.T) {
	var tl Timeline
	e0 := tl.Append("a", nil, fixedStart.In(time.FixedZone("X", 3600)))
	if e0.Seq != 0 || e0.Prev != Genesis || string(e0.Detail) != "{}" || e0.Time != "2026-01-02T03:04:05.123456789Z" {
		t.Errorf("first event %+v", e0)
	}
	if !e0.At().Equal(fixedStart) {
		t.Errorf("At = %v", e0.At())
	}
	e1 := tl.Append("b", "just a string", fixedStart)
	e2 := tl.Append("c", math.NaN(), fixedStart)
	e3 := tl.Append("d", json.RawMessage(` {"z": 1, "a": [true]} `), fixedStart)
	e4 := tl.Append("e", map[string]any{"ch": make(chan int)}, fixedStart)
	for _, tc := range []struct {
		e    Event
		want string
	}{
		{e1, `{"value":"just a string"}`},
		{e3, `{"a":[true],"z":1}`},
	} {
		if string(tc.e.Detail) != tc.want {
			t.Errorf("detail %s, want %s", tc.e.Detail, tc.want)
		}
	}
	for _, e := range []Event{e2, e4} {
		if !bytes.HasPrefix(e.Detail, []byte(`{"unencodable":`)) {
			t.Errorf("unencodable detail recorded as %s", e.Detail)
		}
	}
	if e1.Prev != e0.Hash || e4.Seq != 4 {
		t.Error("not chained")
	}
	events := tl.Events()
	if err := checkChain(events); err != nil {
		t.Fatal(err)
	}
	events[0].Kind = "changed"
	if tl.Events()[0].Kind != "a" {
		t.Error("Events shares its slice with the timeline")
	}

	// Concurrent appends keep one chain.
	var wg sync.WaitGroup
	var par Timeline
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				par.Append("tick", map[string]int{"i": i}, fixedStart)
			}
		}()
	}
	wg.Wait()
	if par.Len() != 400 {
		t.Fatalf("%d events", par.Len())
	}
	if err := checkChain(par.Events()); err != nil {
		t.Fatal(err)
	}
}

func TestArtifacts(t *testing.T) {
	data, dir := signedFixture(t)
	pub := signerKey.Public().(ed25519.PublicKey)

	// Extra files in the directory are ignored.
	writeFiles(t, dir, map[string][]byte{"bundle.json": data, "other.txt": []byte("x")})
	if _, err := Verify(data, WithArtifactDir(dir), WithRequireArtifacts()); err != nil {
		t.Fatal(err)
	}

	// A symbolic link to the right content is refused, not followed.
	link := t.TempDir()
	for _, name := range []string{"changeset.tar", "grader.log", "verdict.json"} {
		writeFiles(t, link, map[string][]byte{name: fixtureArtifacts()[name]})
	}
	if err := os.Symlink(filepath.Join(dir, "agent.log"), filepath.Join(link, "agent.log")); err != nil {
		t.Skip("symbolic links: ", err)
	}
	_, err := Verify(data, WithPublicKey(pub), WithArtifactDir(link))
	var verr *VerifyError
	if !errors.As(err, &verr) || verr.Field != "artifact agent.log" || !errors.Is(err, ErrArtifact) {
		t.Errorf("symlinked artifact: %v", err)
	}
	if _, err := HashArtifacts(link, "agent.log"); err == nil {
		t.Error("HashArtifacts followed a symbolic link")
	}

	// A directory where a file should be.
	os.Remove(filepath.Join(link, "agent.log"))
	if err := os.Mkdir(filepath.Join(link, "agent.log"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(data, WithArtifactDir(link)); !errors.Is(err, ErrArtifact) {
		t.Errorf("directory as artifact: %v", err)
	}

	// HashArtifacts makes the fixture's manifest.
	m, err := HashArtifacts(dir, "verdict.json", "agent.log", "grader.log", "changeset.tar")
	if err != nil {
		t.Fatal(err)
	}
	if want := fixturePayload(t, 7, false, fixtureArtifacts()).Manifest; !reflect.DeepEqual(m, want) {
		t.Errorf("manifest %+v, want %+v", m, want)
	}
	for _, names := range [][]string{{"../x"}, {".hidden"}, {"a/b"}, {"a\\b"}, {""}, {"x\n"}, {strings.Repeat("a", 256)}, {"agent.log", "agent.log"}, {"absent"}} {
		if _, err := HashArtifacts(dir, names...); err == nil {
			t.Errorf("HashArtifacts(%q) accepted", names)
		}
	}
	if _, err := HashArtifacts(filepath.Join(dir, "nowhere")); err == nil {
		t.Error("HashArtifacts of a missing directory")
	}
}

func TestVerifyOptions(t *testing.T) {
	data, _ := signedFixture(t)
	var verr *VerifyError
	for name, opts := range map[string][]VerifyOption{
		"short key":       {WithPublicKey(ed25519.PublicKey{1, 2})},
		"require alone":   {WithRequireArtifacts()},
		"missing dir":     {WithArtifactDir(filepath.Join(t.TempDir(), "none"))},
		"dir is not dir.": {WithArtifactDir("bundle_test.go")},
	} {
		_, err := Verify(data, opts...)
		if err == nil || errors.As(err, &verr) {
			t.Errorf("%s: %v, want a plain error", name, err)
		}
	}
}

func TestVerifyLimits(t *testing.T) {
	big := make([]byte, MaxSize+1)
	_, err := Verify(big)
	var verr *VerifyError
	if !errors.As(err, &verr) || verr.Field != "bundle" || !errors.Is(err, ErrSchema) {
		t.Errorf("oversized: %v", err)
	}
	deep := []byte(strings.Repeat("[", 20000) + strings.Repeat("]", 20000))
	if _, err := Verify(deep); !errors.Is(err, ErrSchema) {
		t.Errorf("deep nesting: %v", err)
	}
	for _, in := range []string{"", "null", "{}", `{"payload":{},"signature":""}`, `{"payload":null,"signature":null}`, "[]", `"x"`, "1e999"} {
		if _, err := Verify([]byte(in)); !errors.As(err, &verr) {
			t.Errorf("%q: %v", in, err)
		}
	}
}

// TestVerifyEveryByte changes each byte of a valid bundle in turn: no
// change verifies unless it leaves the canonical form as it was.
func TestVerifyEveryByte(t *testing.T) {
	data, dir := signedFixture(t)
	pub := signerKey.Public().(ed25519.PublicKey)
	m := make([]byte, len(data))
	for i := range data {
		// Flip the lowest bit (a digit or letter for another, a quote or
		// brace for something else) or, every other byte, the case bit.
		mask := byte(0x01)
		if i%2 == 1 {
			mask = 0x20
		}
		copy(m, data)
		m[i] ^= mask
		if _, err := Verify(m, WithPublicKey(pub), WithArtifactDir(dir)); err == nil {
			if c, _ := Canonicalize(m); !bytes.Equal(c, data) {
				t.Fatalf("byte %d ^ %#x verifies: %q", i, mask, m[max(0, i-20):min(len(m), i+20)])
			}
		}
	}
	// Every truncation fails.
	for n := range data {
		if _, err := Verify(data[:n]); err == nil {
			t.Fatalf("truncated to %d bytes verifies", n)
		}
	}
}

func TestSummary(t *testing.T) {
	data, _ := signedFixture(t)
	p, err := Verify(data)
	if err != nil {
		t.Fatal(err)
	}
	s := Summary(p)
	for _, want := range []string{"passed (status clean, reward 1)", "hello-world " + p.Provenance.TaskDigest, p.Signer.Fingerprint, p.Provenance.Agent.Command, "7 timeline events, 4 artifacts"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
	p.Verdict = json.RawMessage(`{"passed":false,"task":{"name":"\u001b[31mred"}}`)
	p.Provenance.Agent.Command = "sh -c 'x'\n\u202eevil" + strings.Repeat("a", 300)
	s = Summary(p)
	if strings.ContainsAny(s, "\x1b\u202e") || strings.Count(s, "\n") != 6 {
		t.Errorf("summary passes control characters through:\n%s", s)
	}
	if !strings.Contains(s, "failed (status ?, reward ?)") || !strings.Contains(s, "…") {
		t.Errorf("summary:\n%s", s)
	}
	if Summary(nil) != "" {
		t.Error("Summary(nil)")
	}
}

func TestThisBuild(t *testing.T) {
	b := ThisBuild()
	if b.Version == "" || !strings.HasPrefix(b.Go, "go") {
		t.Errorf("%+v", b)
	}
	if checkPlatform(ThisPlatform()) != "" {
		t.Errorf("platform %q", ThisPlatform())
	}
}

func TestVerifyErrorMatching(t *testing.T) {
	for _, tc := range []struct {
		err   error
		is    []error
		isNot []error
	}{
		{ErrWrongKey, []error{ErrWrongKey, ErrBadSignature, ErrTampered}, []error{ErrSchema, ErrChain}},
		{ErrBadSignature, []error{ErrTampered}, []error{ErrWrongKey, ErrSchema}},
		{ErrChain, []error{ErrTampered}, []error{ErrBadSignature}},
		{ErrArtifact, []error{ErrTampered}, []error{ErrChain}},
		{ErrSchema, nil, []error{ErrTampered}},
	} {
		err := fail("f", tc.err, "x")
		for _, s := range tc.is {
			if !errors.Is(err, s) {
				t.Errorf("%v is not %v", err, s)
			}
		}
		for _, s := range tc.isNot {
			if errors.Is(err, s) {
				t.Errorf("%v is %v", err, s)
			}
		}
	}
	e := &VerifyError{Field: "a\nb", Err: errors.New("c\rd")}
	if strings.ContainsAny(e.Error(), "\n\r") {
		t.Errorf("%q", e.Error())
	}
}

// TestDuplicateKeys shows why Verify cannot use encoding/json alone: it
// reads the forged second verdict of duplicate-key.json without a word.
func TestDuplicateKeys(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(vectorDir, "duplicate-key.json"))
	if err != nil {
		t.Fatal(err)
	}
	var naive struct {
		Payload struct {
			Verdict struct{ Status string } `json:"verdict"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(data, &naive); err != nil || naive.Payload.Verdict.Status != "forged" {
		t.Fatalf("encoding/json: %v, status %q", err, naive.Payload.Verdict.Status)
	}
	_, err = Verify(data)
	var verr *VerifyError
	if !errors.As(err, &verr) || verr.Field != "bundle" || !strings.Contains(err.Error(), `duplicate key: "verdict"`) {
		t.Errorf("Verify: %v", err)
	}
}

// An agent run from a recipe names its layer in the provenance; the layer
// is signed like the rest and checked in form.
func TestAgentLayerProvenance(t *testing.T) {
	p := fixturePayload(t, 3, false, nil)
	d := "sha256:" + strings.Repeat("ab", 32)
	p.Provenance.Agent.Layer = &AgentLayer{Recipe: "claude-code", RecipeDigest: d, Digest: d}
	data, err := Sign(p, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Verify(data)
	if err != nil {
		t.Fatal(err)
	}
	if l := got.Provenance.Agent.Layer; l == nil || *l != *p.Provenance.Agent.Layer {
		t.Fatalf("layer %+v", l)
	}
	// Without a layer the member is absent, as in bundles made before.
	p.Provenance.Agent.Layer = nil
	data, _ = Sign(p, signerKey)
	if bytes.Contains(data, []byte(`"layer"`)) {
		t.Error("a bundle without a layer names one")
	}
}

var fixtureDigest = "sha256:" + strings.Repeat("cd", 32)

package bundle

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"
)

// typicalBundle is a typical trial's bundle: a verdict of about 2 KB, 20
// timeline events, 4 artifacts.
func typicalBundle(b *testing.B) (*Payload, []byte) {
	b.Helper()
	p := fixturePayload(b, 20, true, fixtureArtifacts())
	data, err := Sign(p, signerKey)
	if err != nil {
		b.Fatal(err)
	}
	if n := len(p.Verdict); n < 1800 || n > 2400 {
		b.Fatalf("verdict is %d bytes, want about 2 KB", n)
	}
	return p, data
}

func BenchmarkCanonicalize(b *testing.B) {
	_, data := typicalBundle(b)
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		b.Fatal(err)
	}
	indented, _ := json.MarshalIndent(v, "", "  ")
	b.SetBytes(int64(len(indented)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Canonicalize(indented); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSign(b *testing.B) {
	p, data := typicalBundle(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Sign(p, signerKey); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	_, data := typicalBundle(b)
	pub := signerKey.Public().(ed25519.PublicKey)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Verify(data, WithPublicKey(pub)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSignVerify is the whole round: canonicalize and sign a typical
// payload, then verify the bundle, its chain and its 4 artifacts on disk.
func BenchmarkSignVerify(b *testing.B) {
	arts := fixtureArtifacts()
	dir := b.TempDir()
	writeFiles(b, dir, arts)
	p := fixturePayload(b, 20, true, arts)
	pub := signerKey.Public().(ed25519.PublicKey)
	b.ReportAllocs()
	for b.Loop() {
		data, err := Sign(p, signerKey)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Verify(data, WithPublicKey(pub), WithArtifactDir(dir), WithRequireArtifacts()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTimelineAppend(b *testing.B) {
	var tl Timeline
	detail := map[string]any{"host": "pypi.org", "allowed": false}
	b.ReportAllocs()
	for b.Loop() {
		tl.Append("proxy.decision", detail, fixedStart)
	}
}

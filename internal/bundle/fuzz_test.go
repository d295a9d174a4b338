package bundle

import (
	"bytes"
	"crypto/ed25519"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"strings"
	"testing"
)

//go:embed testdata/jcs/input/*.json testdata/jcs/invalid/*.json testdata/vectors/*.json
var seeds embed.FS

// seedFiles returns the embedded seed files under dir; the corpus must not
// be empty.
func seedFiles(f *testing.F, pattern string) [][]byte {
	f.Helper()
	names, err := fs.Glob(seeds, pattern)
	if err != nil {
		f.Fatal(err)
	}
	var out [][]byte
	for _, n := range names {
		if strings.HasSuffix(n, "vectors.json") {
			continue
		}
		data, err := seeds.ReadFile(n)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, data)
	}
	if len(out) == 0 {
		f.Fatalf("the seed corpus %s is empty", pattern)
	}
	return out
}

// FuzzCanonicalize: whatever Canonicalize accepts is valid JSON, and its
// output canonicalizes to itself (parse → canonicalize → parse →
// canonicalize gives identical bytes), agrees with the independent
// reference canonicalizer, and is read by readTree.
func FuzzCanonicalize(f *testing.F) {
	for _, pattern := range []string{"testdata/jcs/input/*.json", "testdata/jcs/invalid/*.json", "testdata/vectors/*.json"} {
		for _, data := range seedFiles(f, pattern) {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c1, err := Canonicalize(data)
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error %q is not one line", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		c2, err := Canonicalize(c1)
		if err != nil {
			t.Fatalf("canonical output rejected: %v\n%q", err, c1)
		}
		if !bytes.Equal(c1, c2) {
			t.Fatalf("not a fixed point:\n%q\n%q", c1, c2)
		}
		ref, err := refCanonical(data)
		if err != nil {
			t.Fatalf("reference rejects what Canonicalize accepts: %v\n%q", err, data)
		}
		if !bytes.Equal(ref, c1) {
			t.Fatalf("reference differs:\n%q\n%q", ref, c1)
		}
		if _, err := readTree(c1); err != nil {
			t.Fatalf("readTree: %v\n%q", err, c1)
		}
	})
}

// FuzzVerify: Verify never panics, fails only with one-line *VerifyErrors
// and, checked against the test signer's key, accepts nothing but the
// bundles that key signed: any input it accepts has the canonical form of
// one of those.
func FuzzVerify(f *testing.F) {
	pub := signerKey.Public().(ed25519.PublicKey)
	signed := map[string]bool{}
	for _, data := range seedFiles(f, "testdata/vectors/*.json") {
		f.Add(data)
		if _, err := Verify(data, WithPublicKey(pub)); err == nil {
			c, _ := Canonicalize(data)
			signed[string(c)] = true
		}
	}
	if len(signed) < 2 {
		f.Fatalf("only %d distinct valid bundles among the seeds", len(signed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = Verify(data) // must not panic either
		p, err := Verify(data, WithPublicKey(pub))
		if err != nil {
			var verr *VerifyError
			if !errors.As(err, &verr) || verr.Field == "" {
				t.Fatalf("error %T %v is not a *VerifyError with a field", err, err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error %q is not one line", err)
			}
			if strings.Contains(err.Error(), errNotCanonical.Error()) {
				t.Fatalf("canonical form not read back: %v", err)
			}
			return
		}
		c, _ := Canonicalize(data)
		if !signed[string(c)] {
			t.Fatalf("verified a bundle the key never signed:\n%q", data)
		}
		_ = Summary(p)
		// Without the key, anything self-consistent verifies; it must
		// still be a payload Sign accepts.
		if _, err := Sign(p, signerKey); err != nil {
			t.Fatalf("a verified payload does not sign: %v", err)
		}
	})
}

package bundle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"
)

// Sign sets p.Signer to describe priv, checks p as Verify would (every
// field, the order of the lists, the timeline's hash chain) and returns the
// bundle.json bytes: the JCS form of {"payload": P, "signature": S}, with no
// trailing newline. Nil lists are signed as empty lists. It signs nothing
// that Verify would reject.
func Sign(p *Payload, priv ed25519.PrivateKey) ([]byte, error) {
	if p == nil {
		return nil, errors.New("signing the bundle: no payload")
	}
	if err := checkPrivateKey(priv); err != nil {
		return nil, fmt.Errorf("signing the bundle: %w", err)
	}
	pub := priv.Public().(ed25519.PublicKey)
	p.Signer = signerOf(pub)

	q := *p
	q.Timeline = nonNil(q.Timeline)
	q.Manifest = nonNil(q.Manifest)
	q.Provenance.Agent.EnvNames = nonNil(q.Provenance.Agent.EnvNames)
	q.Provenance.Host.Isolation = nonNil(q.Provenance.Host.Isolation)
	canon, err := canonicalJSON(&q)
	if err != nil {
		return nil, fmt.Errorf("signing the bundle: encoding the payload: %w", err)
	}
	// Check what is signed exactly as Verify will read it.
	tree, err := readTree(canon)
	if err != nil {
		return nil, fmt.Errorf("signing the bundle: reading the payload: %w", err)
	}
	parsed, verr := parsePayload(value{node: tree, path: "payload"})
	if verr == nil {
		verr = checkChain(parsed.Timeline)
	}
	if verr != nil {
		return nil, fmt.Errorf("signing the bundle: %w", verr)
	}
	return assemble(canon, ed25519.Sign(priv, message(canon))), nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// message is what the signature covers: SignatureContext || JCS(payload).
func message(canonPayload []byte) []byte {
	m := make([]byte, 0, len(SignatureContext)+len(canonPayload))
	return append(append(m, SignatureContext...), canonPayload...)
}

// assemble writes {"payload":P,"signature":"S"}, which is already in JCS
// form: the keys are in order, P is canonical, and base64 needs no escape.
func assemble(canonPayload, sig []byte) []byte {
	var b bytes.Buffer
	b.Grow(len(canonPayload) + 120)
	b.WriteString(`{"payload":`)
	b.Write(canonPayload)
	b.WriteString(`,"signature":"`)
	b.WriteString(base64.StdEncoding.EncodeToString(sig))
	b.WriteString(`"}`)
	return b.Bytes()
}

// checkPrivateKey checks that priv is a whole ed25519 key whose public half
// belongs to its seed (ed25519.Sign panics on a short key and signs
// uselessly with a mismatched one).
func checkPrivateKey(priv ed25519.PrivateKey) error {
	if len(priv) != ed25519.PrivateKeySize {
		return fmt.Errorf("private key is %d bytes, want %d", len(priv), ed25519.PrivateKeySize)
	}
	if !bytes.Equal(ed25519.NewKeyFromSeed(priv.Seed()), priv) {
		return errors.New("private key's public half does not match its seed")
	}
	return nil
}

// VerifyOption changes what Verify checks.
type VerifyOption func(*verifyConfig)

type verifyConfig struct {
	pub      ed25519.PublicKey
	dir      string
	require  bool
	report   *ArtifactReport
	optError error
}

// WithPublicKey makes Verify require that the bundle was signed by pub.
// Without it Verify checks the signature against the key the bundle names,
// which proves the bundle is intact but not who made it: compare the
// signer's fingerprint with one you trust.
func WithPublicKey(pub ed25519.PublicKey) VerifyOption {
	return func(c *verifyConfig) {
		if len(pub) != ed25519.PublicKeySize {
			c.optError = fmt.Errorf("WithPublicKey: key is %d bytes, want %d", len(pub), ed25519.PublicKeySize)
			return
		}
		c.pub = pub
	}
}

// WithArtifactDir makes Verify check every artifact of the manifest that is
// in dir: a regular file (not a symbolic link) of the manifest's size and
// SHA-256. Files in dir that the manifest does not name are ignored; an
// artifact missing from dir is reported (WithArtifactReport) but is not an
// error unless WithRequireArtifacts is given.
func WithArtifactDir(dir string) VerifyOption {
	return func(c *verifyConfig) { c.dir = dir }
}

// WithRequireArtifacts makes an artifact missing from the WithArtifactDir
// directory an error. It needs WithArtifactDir.
func WithRequireArtifacts() VerifyOption {
	return func(c *verifyConfig) { c.require = true }
}

// WithArtifactReport makes Verify fill r with what it found in the
// artifact directory.
func WithArtifactReport(r *ArtifactReport) VerifyOption {
	return func(c *verifyConfig) { c.report = r }
}

// Verify checks a bundle.json and returns its payload. In order, the first
// failure ends it:
//
//  1. the document: at most MaxSize bytes of UTF-8 JSON, one value, no
//     duplicate member names, numbers in the range of a double;
//  2. the form: exactly the keys payload and signature; every payload field
//     present, of its type and form, and no other; lists in order; the
//     signer's fingerprint that of its key;
//  3. the signer: the key given with WithPublicKey, if any;
//  4. the signature: ed25519 over SignatureContext || JCS(payload), so a
//     file with its keys re-ordered or its whitespace changed verifies, and
//     any changed value does not;
//  5. the timeline's hash chain;
//  6. the artifacts, with WithArtifactDir.
//
// A failing bundle gives a *VerifyError naming the field at fault; a bad
// option gives a plain error. Verify never panics and never writes.
func Verify(data []byte, opts ...VerifyOption) (*Payload, error) {
	var c verifyConfig
	for _, o := range opts {
		o(&c)
	}
	if c.optError != nil {
		return nil, c.optError
	}
	if c.require && c.dir == "" {
		return nil, errors.New("WithRequireArtifacts needs WithArtifactDir")
	}

	if len(data) > MaxSize {
		return nil, fail("bundle", ErrSchema, "%d bytes, more than the limit of %d", len(data), MaxSize)
	}
	if !utf8.Valid(data) {
		return nil, fail("bundle", ErrSchema, "not valid UTF-8")
	}
	canon, err := Canonicalize(data)
	if err != nil {
		return nil, fail("bundle", ErrSchema, "%v", err)
	}
	p, canonPayload, sig, verr := parseDocument(canon)
	if verr != nil {
		return nil, verr
	}
	pub, _ := base64.StdEncoding.DecodeString(p.Signer.PublicKey) // checked by parseDocument
	if c.pub != nil && !bytes.Equal(c.pub, pub) {
		return nil, fail("payload.signer.public_key", ErrWrongKey, "%s, not the given key %s",
			p.Signer.Fingerprint, Fingerprint(c.pub))
	}
	if !ed25519.Verify(pub, message(canonPayload), sig) {
		return nil, fail("signature", ErrBadSignature, "does not verify over the payload with the key %s", p.Signer.Fingerprint)
	}
	if verr := checkChain(p.Timeline); verr != nil {
		return nil, verr
	}
	if c.dir != "" {
		r, err := CheckArtifacts(p, c.dir, c.require)
		if c.report != nil {
			*c.report = r
		}
		if err != nil {
			return nil, err
		}
	}
	return p, nil
}

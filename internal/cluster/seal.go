package cluster

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/proctor-sandbox/proctor/internal/bundle"
)

// Trial messages and Done messages are signed: a trial by its suite's
// coordinator, a Done by the worker that ran it. Anyone who can write to
// the NATS server can publish; only a holder of a trusted key can make a
// worker run a trial (and spend its model keys and its signature) or a
// coordinator take a result.
//
// The signature is ed25519 over sealDomain(kind) followed by the message's
// JSON as this package encodes it with Key and Sig empty. A message with
// fields this version does not know re-encodes otherwise and fails, as it
// should: nothing unsigned is acted on.

// ErrUnsigned is matched by every error of a message not signed by a
// trusted key.
var ErrUnsigned = errors.New("not signed by a trusted key")

func sealDomain(kind string) []byte { return []byte("proctor-cluster-" + kind + "-v1\x00") }

func sealBytes(kind string, v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(sealDomain(kind), data...), nil
}

// seal signs v (whose Key and Sig are empty) and returns the two fields.
func seal(kind string, v any, priv ed25519.PrivateKey) (key, sig string, err error) {
	msg, err := sealBytes(kind, v)
	if err != nil {
		return "", "", err
	}
	pub := priv.Public().(ed25519.PublicKey)
	return base64.StdEncoding.EncodeToString(pub), base64.StdEncoding.EncodeToString(ed25519.Sign(priv, msg)), nil
}

// unseal checks that v (with Key and Sig emptied) is signed as key and sig
// say, by one of trusted, and returns that key.
func unseal(kind string, v any, key, sig string, trusted []ed25519.PublicKey) (ed25519.PublicKey, error) {
	if key == "" || sig == "" {
		return nil, fmt.Errorf("%w: unsigned", ErrUnsigned)
	}
	pub, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: malformed key", ErrUnsigned)
	}
	var found ed25519.PublicKey
	for _, k := range trusted {
		if k.Equal(ed25519.PublicKey(pub)) {
			found = k
		}
	}
	if found == nil {
		return nil, fmt.Errorf("%w: signed by %s", ErrUnsigned, bundle.Fingerprint(pub))
	}
	s, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return nil, fmt.Errorf("%w: malformed signature", ErrUnsigned)
	}
	msg, err := sealBytes(kind, v)
	if err != nil {
		return nil, err
	}
	if !ed25519.Verify(found, msg, s) {
		return nil, fmt.Errorf("%w: the signature of %s does not match", ErrUnsigned, bundle.Fingerprint(found))
	}
	return found, nil
}

// Sign signs the trial with the coordinator's key.
func (m *TrialMsg) Sign(priv ed25519.PrivateKey) error {
	m.Key, m.Sig = "", ""
	key, sig, err := seal("trial", m, priv)
	m.Key, m.Sig = key, sig
	return err
}

// SignedBy returns the key of trusted that signed the trial, or an error
// matching ErrUnsigned.
func (m TrialMsg) SignedBy(trusted []ed25519.PublicKey) (ed25519.PublicKey, error) {
	key, sig := m.Key, m.Sig
	m.Key, m.Sig = "", ""
	return unseal("trial", m, key, sig, trusted)
}

// Sign signs the Done with the worker's key.
func (d *Done) Sign(priv ed25519.PrivateKey) error {
	d.Key, d.Sig = "", ""
	key, sig, err := seal("done", d, priv)
	d.Key, d.Sig = key, sig
	return err
}

// SignedBy returns the key of trusted that signed the Done, or an error
// matching ErrUnsigned.
func (d Done) SignedBy(trusted []ed25519.PublicKey) (ed25519.PublicKey, error) {
	key, sig := d.Key, d.Sig
	d.Key, d.Sig = "", ""
	return unseal("done", d, key, sig, trusted)
}

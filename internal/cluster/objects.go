package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// DigestPrefix starts every archive digest.
const DigestPrefix = "sha256:"

// ArchiveDigest returns the digest of an archive's bytes, "sha256:" and
// the hex SHA-256 of everything r yields.
func ArchiveDigest(r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return DigestPrefix + hex.EncodeToString(h.Sum(nil)), nil
}

// checkDigest returns the 32 bytes digest names, or ErrBadDigest.
func checkDigest(digest string) ([]byte, error) {
	hexPart, ok := strings.CutPrefix(digest, DigestPrefix)
	if !ok || len(hexPart) != 2*sha256.Size || strings.ToLower(hexPart) != hexPart {
		return nil, fmt.Errorf("%q: %w", digest, ErrBadDigest)
	}
	sum, err := hex.DecodeString(hexPart)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", digest, ErrBadDigest)
	}
	return sum, nil
}

// natsDigest is how the object store writes a SHA-256 in ObjectInfo.Digest.
func natsDigest(sum []byte) string {
	return "SHA-256=" + base64.URLEncoding.EncodeToString(sum)
}

// verifier passes r's bytes through, hashing them; at the end of r it
// returns a *TamperedError instead of io.EOF unless they hash to want.
type verifier struct {
	r    io.Reader
	h    hash.Hash
	name string
	want []byte
}

func newVerifier(r io.Reader, name string, want []byte) *verifier {
	return &verifier{r: r, h: sha256.New(), name: name, want: want}
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		if got := v.h.Sum(nil); string(got) != string(v.want) {
			return n, v.tampered(got)
		}
	}
	return n, err
}

func (v *verifier) tampered(got []byte) *TamperedError {
	return &TamperedError{Name: v.name, Want: DigestPrefix + hex.EncodeToString(v.want), Got: DigestPrefix + hex.EncodeToString(got)}
}

// PutTask stores the archive under its digest. The bytes must hash to
// digest, or nothing is stored and the error is a *TamperedError. Storing a
// digest that is already there reads archive to check it and stores
// nothing; if the stored object is not what digest names, PutTask returns
// ErrConflict and leaves it for GetTask to refuse.
//
// Two PutTask calls for a new digest racing each other both write; the
// second replaces the first with the same bytes.
func (c *Conn) PutTask(ctx context.Context, digest string, archive io.Reader) error {
	want, err := checkDigest(digest)
	if err != nil {
		return fmt.Errorf("storing task archive: %w", err)
	}
	v := newVerifier(archive, digest, want)
	info, err := c.tasks.GetInfo(ctx, digest)
	switch {
	case err == nil:
		if _, err := io.Copy(io.Discard, v); err != nil {
			return fmt.Errorf("storing task archive %s: %w", digest, err)
		}
		if info.Digest != natsDigest(want) {
			return fmt.Errorf("storing task archive %s: %w", digest, ErrConflict)
		}
		return nil
	case !errors.Is(err, jetstream.ErrObjectNotFound):
		return fmt.Errorf("storing task archive %s: %w", digest, err)
	}
	// On a read error, the verifier's included, Put removes the chunks it
	// has written and stores no object.
	if _, err := c.tasks.Put(ctx, jetstream.ObjectMeta{Name: digest}, v); err != nil {
		return fmt.Errorf("storing task archive %s: %w", digest, err)
	}
	return nil
}

// GetTask writes the archive stored under digest to w, hashing it on the
// way. If the store's object does not hash to digest, GetTask returns a
// *TamperedError, having written some or all of it to w: write to a
// temporary file and use it only when GetTask returns nil.
func (c *Conn) GetTask(ctx context.Context, digest string, w io.Writer) error {
	want, err := checkDigest(digest)
	if err != nil {
		return fmt.Errorf("fetching task archive: %w", err)
	}
	res, err := c.tasks.Get(ctx, digest)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return fmt.Errorf("fetching task archive %s: %w", digest, ErrNotFound)
		}
		return fmt.Errorf("fetching task archive %s: %w", digest, err)
	}
	defer res.Close()
	info, err := res.Info()
	if err != nil {
		return fmt.Errorf("fetching task archive %s: %w", digest, err)
	}
	v := newVerifier(res, digest, want)
	// Refuse early what the store itself says is something else.
	if info.Digest != natsDigest(want) {
		got := ""
		if s, ok := strings.CutPrefix(info.Digest, "SHA-256="); ok {
			if b, err := base64.URLEncoding.DecodeString(s); err == nil {
				got = DigestPrefix + hex.EncodeToString(b)
			}
		}
		return &TamperedError{Name: digest, Want: digest, Got: got}
	}
	if _, err := io.Copy(w, v); err != nil {
		if errors.Is(err, jetstream.ErrDigestMismatch) {
			return &TamperedError{Name: digest, Want: digest}
		}
		var te *TamperedError
		if errors.As(err, &te) {
			return te
		}
		return fmt.Errorf("fetching task archive %s: %w", digest, err)
	}
	return nil
}

// resultName is the object name of a trial's result.
func resultName(trialID, name string) (string, error) {
	if (TrialMsg{ID: trialID}).checkID() != nil || name == "" {
		return "", fmt.Errorf("result %q of trial %q: %w: trial ID must be non-empty without '/', spaces or control characters, and name non-empty", name, trialID, ErrBadTrial)
	}
	return trialID + "/" + name, nil
}

// PutResult stores r as the result name of trial trialID, replacing any
// earlier one (a redelivered trial run twice writes twice).
func (c *Conn) PutResult(ctx context.Context, trialID, name string, r io.Reader) error {
	obj, err := resultName(trialID, name)
	if err != nil {
		return fmt.Errorf("storing result: %w", err)
	}
	if _, err := c.results.Put(ctx, jetstream.ObjectMeta{Name: obj}, r); err != nil {
		return fmt.Errorf("storing result %s: %w", obj, err)
	}
	return nil
}

// GetResult writes the result name of trial trialID to w. The object
// store checks its own digest of the content; an error means w may hold a
// partial copy.
func (c *Conn) GetResult(ctx context.Context, trialID, name string, w io.Writer) error {
	obj, err := resultName(trialID, name)
	if err != nil {
		return fmt.Errorf("fetching result: %w", err)
	}
	res, err := c.results.Get(ctx, obj)
	if err != nil {
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return fmt.Errorf("fetching result %s: %w", obj, ErrNotFound)
		}
		return fmt.Errorf("fetching result %s: %w", obj, err)
	}
	defer res.Close()
	if _, err := io.Copy(w, res); err != nil {
		return fmt.Errorf("fetching result %s: %w", obj, err)
	}
	return nil
}

// DeleteResult removes the result name of trial trialID, once its
// coordinator has recorded it; one that is not there is no error.
func (c *Conn) DeleteResult(ctx context.Context, trialID, name string) error {
	obj, err := resultName(trialID, name)
	if err != nil {
		return fmt.Errorf("removing result: %w", err)
	}
	if err := c.results.Delete(ctx, obj); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("removing result %s: %w", obj, err)
	}
	return nil
}

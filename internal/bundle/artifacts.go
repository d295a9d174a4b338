package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
)

// ArtifactReport is what CheckArtifacts found: the names of the manifest's
// artifacts that matched and of those that were not in the directory, each
// in manifest order.
type ArtifactReport struct {
	Checked []string
	Missing []string
}

// CheckArtifacts checks the manifest of p against the files in dir. Every
// artifact that is there must be a regular file (a symbolic link is not
// followed) of the manifest's size and SHA-256; one that is not there is
// listed in Missing, and is an error only if require is set. Files are
// opened only beneath dir (os.Root), by names the manifest has already
// been checked to hold (plain names, no separators).
//
// A mismatch is a *VerifyError with Field "artifact NAME" matching
// ErrArtifact; a directory that cannot be opened or a read that fails is a
// plain error.
func CheckArtifacts(p *Payload, dir string, require bool) (ArtifactReport, error) {
	var r ArtifactReport
	if p == nil {
		return r, errors.New("checking artifacts: no payload")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return r, fmt.Errorf("opening the artifact directory: %w", err)
	}
	defer root.Close()
	for _, a := range p.Manifest {
		field := "artifact " + a.Name
		if msg := checkName(a.Name); msg != "" {
			return r, fail(field, ErrSchema, "%s", msg)
		}
		ok, err := checkArtifact(root, a)
		if err != nil {
			var verr *VerifyError
			if errors.As(err, &verr) {
				verr.Field = field
				return r, verr
			}
			return r, fmt.Errorf("checking artifact %s: %w", show(a.Name), err)
		}
		if !ok {
			if require {
				return r, fail(field, ErrArtifact, "not in %s", show(dir))
			}
			r.Missing = append(r.Missing, a.Name)
			continue
		}
		r.Checked = append(r.Checked, a.Name)
	}
	return r, nil
}

// checkArtifact reports whether a is in root and, if so, whether it
// matches: a *VerifyError (its Field to be set) when it does not.
func checkArtifact(root *os.Root, a Artifact) (bool, error) {
	st, err := root.Lstat(a.Name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !st.Mode().IsRegular() {
		return true, fail("", ErrArtifact, "not a regular file (%s)", st.Mode().Type())
	}
	if st.Size() != a.Size {
		return true, fail("", ErrArtifact, "size is %d, the manifest says %d", st.Size(), a.Size)
	}
	f, err := root.Open(a.Name)
	if err != nil {
		return true, err
	}
	defer f.Close()
	fst, err := f.Stat()
	if err != nil {
		return true, err
	}
	if !os.SameFile(st, fst) {
		return true, fail("", ErrArtifact, "replaced while being checked")
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, a.Size+1))
	if err != nil {
		return true, err
	}
	if n != a.Size {
		return true, fail("", ErrArtifact, "size is %d, the manifest says %d", n, a.Size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != a.SHA256 {
		return true, fail("", ErrArtifact, "sha256 is %s, the manifest says %s", got, a.SHA256)
	}
	return true, nil
}

// HashArtifacts returns the manifest of the named files in dir, sorted by
// name. Each must be a valid artifact name (CheckArtifactName) of a regular
// file beneath dir; a symbolic link is refused, not followed.
func HashArtifacts(dir string, names ...string) ([]Artifact, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("opening the artifact directory: %w", err)
	}
	defer root.Close()
	seen := make(map[string]bool, len(names))
	out := make([]Artifact, 0, len(names))
	for _, name := range names {
		if err := CheckArtifactName(name); err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, fmt.Errorf("artifact %s named twice", show(name))
		}
		seen[name] = true
		a, err := hashArtifact(root, name)
		if err != nil {
			return nil, fmt.Errorf("hashing artifact %s: %w", show(name), err)
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func hashArtifact(root *os.Root, name string) (Artifact, error) {
	st, err := root.Lstat(name)
	if err != nil {
		return Artifact{}, err
	}
	if !st.Mode().IsRegular() {
		return Artifact{}, fmt.Errorf("not a regular file (%s)", st.Mode().Type())
	}
	f, err := root.Open(name)
	if err != nil {
		return Artifact{}, err
	}
	defer f.Close()
	fst, err := f.Stat()
	if err != nil {
		return Artifact{}, err
	}
	if !os.SameFile(st, fst) {
		return Artifact{}, errors.New("replaced while being hashed")
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return Artifact{}, err
	}
	if n > maxSafeInt {
		return Artifact{}, fmt.Errorf("%d bytes, more than 2^53-1", n)
	}
	return Artifact{Name: name, SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

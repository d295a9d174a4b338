package image

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// normalise returns a reference in the form docker shows: registry, full
// repository and tag ("busybox" → "docker.io/library/busybox:latest"), or
// "repo@sha256:…" for a digest reference.
func normalise(ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("parsing image reference %q: %w", ref, err)
	}
	reg := r.Context().RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	repo := reg + "/" + r.Context().RepositoryStr()
	switch r := r.(type) {
	case name.Tag:
		return repo + ":" + r.TagStr(), nil
	case name.Digest:
		return repo + "@" + r.DigestStr(), nil
	}
	return "", fmt.Errorf("parsing image reference %q: neither tag nor digest", ref)
}

// refDigest returns the digest part of a normalised "repo@sha256:…" reference.
func refDigest(norm string) (string, bool) {
	_, d, ok := strings.Cut(norm, "@")
	return d, ok
}

package image

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Annotations naming an image in an OCI layout's index.json.
const (
	annotationRefName        = "org.opencontainers.image.ref.name"
	annotationContainerdName = "io.containerd.image.name"
)

// Import unpacks the image in a docker-save archive (a file) or an OCI image
// layout (a directory) and records its names: the archive's RepoTags, or the
// layout's io.containerd.image.name or org.opencontainers.image.ref.name
// annotation when that is a full reference (a bare tag such as "latest" names
// no repository and is not recorded).
//
// A docker-save archive must hold one image. Its manifest digest is computed
// from the archive's config and layers as stored there, so it equals the
// registry's digest only when the archive keeps the registry's compressed
// layers.
func (s *Store) Import(p string) (*Image, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("importing image: %w", err)
	}
	var img v1.Image
	var refs []string
	if fi.IsDir() {
		img, refs, err = fromLayout(p)
	} else {
		img, refs, err = fromArchive(p)
	}
	if err != nil {
		return nil, fmt.Errorf("importing %s: %w", p, err)
	}
	return s.add(img, refs)
}

// fromArchive reads a docker-save archive holding exactly one image.
func fromArchive(p string) (v1.Image, []string, error) {
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(p) })
	if err != nil {
		return nil, nil, fmt.Errorf("reading docker-save manifest.json: %w", err)
	}
	if len(m) != 1 {
		var names []string
		for _, d := range m {
			names = append(names, strings.Join(d.RepoTags, ","))
		}
		return nil, nil, fmt.Errorf("archive holds %d images (%s): save and import one at a time", len(m), strings.Join(names, "; "))
	}
	img, err := tarball.ImageFromPath(p, nil)
	if err != nil {
		return nil, nil, err
	}
	var refs []string
	for _, t := range m[0].RepoTags {
		n, err := normalise(t)
		if err != nil {
			return nil, nil, fmt.Errorf("RepoTags: %w", err)
		}
		refs = append(refs, n)
	}
	return img, refs, nil
}

// fromLayout reads an OCI image layout: the index's single image, or, if it
// lists several, the one for the host platform (linux/GOARCH).
func fromLayout(p string) (v1.Image, []string, error) {
	ii, err := layout.ImageIndexFromPath(p)
	if err != nil {
		return nil, nil, err
	}
	desc, err := pick(ii)
	if err != nil {
		return nil, nil, err
	}
	var refs []string
	name := desc.Annotations[annotationContainerdName]
	if name == "" {
		name = desc.Annotations[annotationRefName]
	}
	if strings.ContainsAny(name, "/:") {
		if n, err := normalise(name); err == nil {
			refs = append(refs, n)
		}
	}
	for {
		if desc.MediaType.IsImage() {
			img, err := ii.Image(desc.Digest)
			return img, refs, err
		}
		if !desc.MediaType.IsIndex() {
			return nil, nil, fmt.Errorf("index entry %s has media type %s, not an image", desc.Digest, desc.MediaType)
		}
		if ii, err = ii.ImageIndex(desc.Digest); err != nil {
			return nil, nil, err
		}
		if desc, err = pick(ii); err != nil {
			return nil, nil, err
		}
	}
}

// pick chooses the one manifest of an index: the only one, or the only one
// for the host platform.
func pick(ii v1.ImageIndex) (v1.Descriptor, error) {
	im, err := ii.IndexManifest()
	if err != nil {
		return v1.Descriptor{}, err
	}
	var all, host []v1.Descriptor
	for _, d := range im.Manifests {
		if !d.MediaType.IsImage() && !d.MediaType.IsIndex() {
			continue
		}
		if d.Platform != nil && (d.Platform.OS == "unknown" || d.Platform.Architecture == "unknown") {
			continue // attestations
		}
		all = append(all, d)
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			host = append(host, d)
		}
	}
	switch {
	case len(all) == 1:
		return all[0], nil
	case len(host) == 1:
		return host[0], nil
	case len(all) == 0:
		return v1.Descriptor{}, fmt.Errorf("index lists no image")
	}
	return v1.Descriptor{}, fmt.Errorf("index lists %d images, %d for linux/%s: cannot choose one", len(all), len(host), runtime.GOARCH)
}

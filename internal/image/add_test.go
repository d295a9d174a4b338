package image

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// An image added over a stored base clones the base's rootfs and applies
// only its new layers: the result is the image's whole filesystem, the
// base is left as it was (a file the new layer replaces or deletes is
// still the base's in the base), the layers' rules hold for the new ones,
// and the provenance is kept.
func TestAddOverBase(t *testing.T) {
	requireRoot(t)
	s := openStore(t)
	baseImg := imageOf(t, layerOf(t, dir("etc/", 0o755), file("etc/f", "base"), file("etc/g", "gone soon"),
		withOwner(file("etc/owned", "o"), 7, 8), dir("opq/", 0o755), file("opq/old", "old")))
	base, err := s.Import(writeArchive(t, baseImg, "example.com/base:1"))
	if err != nil {
		t.Fatal(err)
	}
	top := layerOf(t, file("etc/f", "new"), file("etc/.wh.g", ""), file("opq/.wh..wh..opq", ""), file("opq/fresh", "fresh"), file("added", "a"))
	img, err := mutate.AppendLayers(baseImg, top)
	if err != nil {
		t.Fatal(err)
	}
	built, err := s.Add(img, []string{"example.com/built:1"}, base, &BuildInfo{Dockerfile: "environment/Dockerfile", ContextDigest: "sha256:00"})
	if err != nil {
		t.Fatal(err)
	}
	read := func(root, p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	for p, want := range map[string]string{"etc/f": "new", "added": "a", "opq/fresh": "fresh", "etc/owned": "o"} {
		if got := read(built.Rootfs, p); got != want {
			t.Errorf("built %s = %q, want %q", p, got, want)
		}
	}
	for _, p := range []string{"etc/g", "opq/old"} {
		if _, err := os.Lstat(filepath.Join(built.Rootfs, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("built %s: %v, want removed", p, err)
		}
	}
	for p, want := range map[string]string{"etc/f": "base", "etc/g": "gone soon", "opq/old": "old"} {
		if got := read(base.Rootfs, p); got != want {
			t.Errorf("the base's %s = %q after the build, want %q", p, got, want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(built.Rootfs, "etc/owned")); err != nil || fi.Sys().(*syscall.Stat_t).Uid != 7 {
		t.Errorf("owner of a cloned file: %v", err)
	}
	if built.Build == nil || built.Build.Dockerfile != "environment/Dockerfile" || len(built.Refs) != 1 {
		t.Errorf("built: refs %v, build %+v", built.Refs, built.Build)
	}
	if m, c, err := s.Raw(built); err != nil || len(m) == 0 || len(c) == 0 {
		t.Errorf("Raw: %v", err)
	}

	// A base that is not the image's base is refused.
	other, err := s.Import(writeArchive(t, imageOf(t, layerOf(t, file("x", "x"))), "example.com/other:1"))
	if err != nil {
		t.Fatal(err)
	}
	img2, _ := mutate.AppendLayers(baseImg, layerOf(t, file("y", "y")))
	if _, err := s.Add(img2, nil, other, nil); err == nil {
		t.Errorf("Add over a base that is not the image's: no error")
	}
}

package testcorpus

import (
	"path/filepath"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/rootimage"
)

// Layer is one layer an image adds over its base (rootimage.Layer).
type Layer = rootimage.Layer

// DebianImage writes a docker-save archive of an image whose first layer
// is the Debian root at root (made by DebianRoot, owners, modes, hard
// links and symlinks kept as a debootstrap-based base image has them; its
// device nodes left out, as image builders leave /dev empty), with the
// layers over it, a config with the usual PATH and workdir, tagged tag. It
// returns the archive's path, under a fresh temporary directory.
func DebianImage(t testing.TB, root, tag, workdir string, layers ...Layer) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "image.tar")
	err := rootimage.Write(root, out, rootimage.Options{Tag: tag, Workdir: workdir, Cmd: []string{"/bin/bash"}, KeepOwners: true, Layers: layers})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

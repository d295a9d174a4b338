package image

import (
	"archive/tar"
	"compress/gzip"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImportLarge imports a 500 MB image (5 layers of 100 files of 1 MiB of
// random bytes, stored gzip so decompression costs little) from an OCI
// layout and logs the time.
func TestImportLarge(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("500 MB import: not in -short")
	}
	const layers, files, fileSize = 5, 100, 1 << 20
	tmp := t.TempDir()
	rng := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, fileSize)
	var ls []v1.Layer
	for l := range layers {
		p := filepath.Join(tmp, fmt.Sprintf("layer%d.tar", l))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		tw := tar.NewWriter(f)
		dirName := fmt.Sprintf("l%d/", l)
		if err := tw.WriteHeader(&tar.Header{Name: dirName, Typeflag: tar.TypeDir, Mode: 0o755, ModTime: mtime}); err != nil {
			t.Fatal(err)
		}
		for i := range files {
			_, _ = rng.Read(buf)
			h := &tar.Header{Name: fmt.Sprintf("%sf%03d", dirName, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: fileSize, ModTime: mtime}
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(buf); err != nil {
				t.Fatal(err)
			}
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		layer, err := tarball.LayerFromFile(p, tarball.WithCompressionLevel(gzip.NoCompression))
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, layer)
	}
	lay := writeLayout(t, imageOf(t, ls...), "example.com/large:1")
	s := openStore(t)
	start := time.Now()
	im, err := s.Import(lay)
	if err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	if im.Size != layers*files*fileSize {
		t.Errorf("size %d", im.Size)
	}
	t.Logf("import of a %d MB image (%d layers, %d files) from an OCI layout: %v (%.0f MB/s)",
		im.Size/1e6, layers, layers*files, d.Round(time.Millisecond), float64(im.Size)/1e6/d.Seconds())
	start = time.Now()
	if _, err := s.Import(lay); err != nil {
		t.Fatal(err)
	}
	t.Logf("second import of the same image (no unpack): %v", time.Since(start).Round(time.Millisecond))
}

package image

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// requireRoot skips a test that needs root (unpacking sets file owners).
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: unpacking sets file owners")
	}
}

var mtime = time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)

// ent is one tar entry of a test layer.
type ent struct {
	name string
	typ  byte
	body string // file content
	link string // symlink or hard link target
	mode int64
	uid  int
	gid  int
	pax  map[string]string
}

func dir(n string, mode int64) ent { return ent{name: n, typ: tar.TypeDir, mode: mode} }
func file(n, body string) ent      { return ent{name: n, typ: tar.TypeReg, body: body, mode: 0o644} }
func symlink(n, target string) ent {
	return ent{name: n, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hardlink(n, target string) ent {
	return ent{name: n, typ: tar.TypeLink, link: target, mode: 0o644}
}
func withOwner(e ent, uid, gid int) ent { e.uid, e.gid = uid, gid; return e }
func withMode(e ent, m int64) ent       { e.mode = m; return e }

// tarBytes writes entries as a tar stream.
func tarBytes(t testing.TB, ents ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode,
			Uid: e.uid, Gid: e.gid, ModTime: mtime, Format: tar.FormatPAX, PAXRecords: e.pax}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("writing header %q: %v", e.name, err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func layerOf(t testing.TB, ents ...ent) v1.Layer {
	t.Helper()
	b := tarBytes(t, ents...)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageOf builds an image from layers, with a config a caller can check.
func imageOf(t testing.TB, layers ...v1.Layer) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/bin"}
	cf.Config.Cmd = []string{"/bin/sh"}
	cf.Config.WorkingDir = "/work"
	cf.Config.User = "1000:1000"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func writeArchive(t testing.TB, img v1.Image, tag string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "image.tar")
	ref, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(p, ref, img); err != nil {
		t.Fatal(err)
	}
	return p
}

func writeLayout(t testing.TB, img v1.Image, refName string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "layout")
	lp, err := layout.Write(p, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	var opts []layout.Option
	if refName != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{annotationRefName: refName}))
	}
	if err := lp.AppendImage(img, opts...); err != nil {
		t.Fatal(err)
	}
	return p
}

// pushToRegistry starts an in-process registry on loopback, pushes img as
// repo:tag and returns the reference.
func pushToRegistry(t testing.TB, img v1.Image, repoTag string) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/" + repoTag
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	return ref
}

func openStore(t testing.TB, opts ...Option) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "images"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// names lists a directory's entries, sorted.
func names(t testing.TB, p string) []string {
	t.Helper()
	ents, err := os.ReadDir(p)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func writeTwo(t testing.TB, p string) error {
	a, _ := name.NewTag("example.com/a:1")
	b, _ := name.NewTag("example.com/b:1")
	return tarball.MultiWriteToFile(p, map[name.Tag]v1.Image{
		a: imageOf(t, layerOf(t, file("a", "a"))),
		b: imageOf(t, layerOf(t, file("b", "b"))),
	})
}

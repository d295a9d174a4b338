package rootimage

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// A root's tree becomes the image's first layer as an image builder
// leaves it: modes, symlinks and hard links kept, owners kept or made
// root's, /dev's entries and special files left out; a layer over it
// writes its files and whiteouts; the config has the tag, workdir and
// command.
func TestWrite(t *testing.T) {
	root := t.TempDir()
	for name, body := range map[string]string{"bin/tool": "#!/bin/sh\n", "etc/shadow": "root:*:\n", "dev/null": ""} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	must(t, os.Link(filepath.Join(root, "bin/tool"), filepath.Join(root, "bin/tool2")))
	must(t, os.Symlink("tool", filepath.Join(root, "bin/link")))
	must(t, syscall.Mkfifo(filepath.Join(root, "fifo"), 0o600))
	owner := os.Geteuid() == 0
	if owner {
		must(t, os.Chown(filepath.Join(root, "etc/shadow"), 0, 42))
	}
	for _, keep := range []bool{false, true} {
		out := filepath.Join(t.TempDir(), "image.tar")
		err := Write(root, out, Options{Tag: "example/root:1", Workdir: "/app", KeepOwners: keep,
			Layers: []Layer{{Files: map[string]string{"app/a.txt": "a"}, Deletes: []string{"etc/shadow"}}}})
		must(t, err)
		img, err := tarball.ImageFromPath(out, nil)
		must(t, err)
		cf, err := img.ConfigFile()
		must(t, err)
		if cf.Config.WorkingDir != "/app" || len(cf.Config.Cmd) != 1 || cf.Config.Cmd[0] != "/bin/sh" {
			t.Errorf("config %+v", cf.Config)
		}
		layers, err := img.Layers()
		must(t, err)
		if len(layers) != 2 {
			t.Fatalf("%d layers", len(layers))
		}
		got := entries(t, layers[0])
		if _, ok := got["dev/null"]; ok {
			t.Errorf("keep=%v: /dev's entry is in the layer", keep)
		}
		if _, ok := got["fifo"]; ok {
			t.Errorf("keep=%v: the fifo is in the layer", keep)
		}
		if h := got["bin/tool2"]; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "bin/tool" {
			t.Errorf("keep=%v: bin/tool2 %+v, want a hard link to bin/tool", keep, h)
		}
		if h := got["bin/link"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "tool" {
			t.Errorf("keep=%v: bin/link %+v", keep, h)
		}
		if h := got["etc/shadow"]; h == nil || h.Mode&0o777 != 0o640 || owner && h.Gid != map[bool]int{false: 0, true: 42}[keep] {
			t.Errorf("keep=%v: etc/shadow %+v", keep, h)
		}
		over := entries(t, layers[1])
		if over["app/a.txt"] == nil || over["etc/.wh.shadow"] == nil {
			t.Errorf("the layer over it: %v", over)
		}
	}
}

func entries(t *testing.T, l interface {
	Uncompressed() (io.ReadCloser, error)
}) map[string]*tar.Header {
	t.Helper()
	rc, err := l.Uncompressed()
	must(t, err)
	defer rc.Close()
	m := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return m
		}
		must(t, err)
		m[h.Name] = h
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

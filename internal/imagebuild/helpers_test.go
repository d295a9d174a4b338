package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/proctor-sandbox/proctor/internal/image"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.InitCommand {
		os.Exit(sandbox.RunInit(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// requireRoot skips a test that needs root (overlays, sandboxes, owners),
// or fails it under CI, where a skipped test is a failure.
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" || os.Getenv("PROCTOR_NO_SKIP") != "" {
		t.Fatal("cannot run here: needs root (under CI a skipped test is a failure)")
	}
	t.Skip("needs root: overlays, sandboxes and file owners")
}

// fixture is a store, a build cache and an in-process registry on
// loopback, so that FROM is really pulled.
type fixture struct {
	store *image.Store
	cache string
	reg   string // host:port of the registry
	dir   string
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	requireRoot(t)
	dir := t.TempDir()
	st, err := image.Open(filepath.Join(dir, "images"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	f := &fixture{store: st, cache: filepath.Join(dir, "build"), reg: strings.TrimPrefix(srv.URL, "http://"), dir: dir}
	return f
}

// push writes img to the fixture's registry as repo:tag and returns the
// reference.
func (f *fixture) push(t testing.TB, repoTag string, img v1.Image) string {
	t.Helper()
	ref := f.reg + "/" + repoTag
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("pushing %s: %v", ref, err)
	}
	return ref
}

// busybox is a small base image: static busybox and its applets, a
// passwd with root and app (1000), a group file, an empty /tmp.
func (f *fixture) busybox(t testing.TB) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal("needs busybox (busybox-static)")
	}
	body, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mt := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	hdr := func(h *tar.Header) {
		h.ModTime = mt
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin/", "etc/", "root/", "usr/", "usr/bin/", "var/"} {
		hdr(&tar.Header{Name: d, Typeflag: tar.TypeDir, Mode: 0o755})
	}
	hdr(&tar.Header{Name: "tmp/", Typeflag: tar.TypeDir, Mode: 0o1777})
	hdr(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(body))})
	tw.Write(body)
	for _, app := range strings.Fields(string(out)) {
		if app != "busybox" {
			hdr(&tar.Header{Name: "bin/" + app, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
		}
	}
	for n, c := range map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1000:app:/home/app:/bin/sh\n",
		"etc/group":  "root:x:0:\napp:x:1000:\nstaff:x:50:app\n",
	} {
		hdr(&tar.Header{Name: n, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(c))})
		io.WriteString(tw, c)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/bin:/usr/bin"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	return f.push(t, "busybox:1", img)
}

// files writes a tree: "name": content, "name/": a directory, "name":
// "->target" a symlink.
func files(t testing.TB, dir string, m map[string]string) {
	t.Helper()
	for n, c := range m {
		p := filepath.Join(dir, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case strings.HasSuffix(n, "/"):
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(c, "->"):
			os.Remove(p)
			if err := os.Symlink(c[2:], p); err != nil {
				t.Fatal(err)
			}
		default:
			if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// build builds the Dockerfile dockerfile with the context files.
func (f *fixture) build(t testing.TB, dockerfile string, ctxFiles map[string]string, o Options) (*Result, error) {
	t.Helper()
	dir := filepath.Join(f.dir, "ctx")
	if o.Context == "" {
		os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		files(t, dir, ctxFiles)
		if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644); err != nil {
			t.Fatal(err)
		}
		o.Context = dir
	}
	if o.Name == "" {
		o.Name = "environment/Dockerfile"
	}
	o.Store, o.CacheDir = f.store, f.cache
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	return Build(context.Background(), o)
}

// mustBuild is build that fails the test on error.
func (f *fixture) mustBuild(t testing.TB, dockerfile string, ctxFiles map[string]string, o Options) *Result {
	t.Helper()
	res, err := f.build(t, dockerfile, ctxFiles, o)
	if err != nil {
		if res != nil && res.Log != "" {
			b, _ := os.ReadFile(res.Log)
			t.Logf("build log:\n%s", b)
		}
		t.Fatalf("build: %v", err)
	}
	return res
}

// read returns a file of an image's rootfs, or fails.
func read(t testing.TB, img *image.Image, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(img.Rootfs, p))
	if err != nil {
		t.Fatalf("reading %s in the image: %v", p, err)
	}
	return string(b)
}

// stat returns an entry of an image's rootfs (not followed).
func stat(t testing.TB, img *image.Image, p string) os.FileInfo {
	t.Helper()
	fi, err := os.Lstat(filepath.Join(img.Rootfs, p))
	if err != nil {
		t.Fatalf("stat %s in the image: %v", p, err)
	}
	return fi
}

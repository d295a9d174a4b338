package imagebuild

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

// An upper directory as overlayfs leaves it becomes an OCI layer: a 0:0
// character device is a ".wh.NAME" whiteout, a directory marked opaque
// gets a ".wh..wh..opq" entry, hard links stay links, owners and set-id
// bits are kept, and overlayfs's other xattrs are not carried.
func TestWriteLayerWhiteouts(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "etc/opq"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "etc/opq/new"), []byte("n"), 0o644))
	must(unix.Setxattr(filepath.Join(dir, "etc/opq"), "trusted.overlay.opaque", []byte("y"), 0))
	must(unix.Mknod(filepath.Join(dir, "etc/gone"), unix.S_IFCHR, 0))
	must(os.WriteFile(filepath.Join(dir, "suid"), []byte("s"), 0o755))
	must(unix.Chmod(filepath.Join(dir, "suid"), 0o4755))
	must(os.Link(filepath.Join(dir, "suid"), filepath.Join(dir, "suid2")))
	must(os.Symlink("/etc/passwd", filepath.Join(dir, "link")))
	must(os.Chown(filepath.Join(dir, "etc/opq/new"), 7, 8))

	var buf bytes.Buffer
	diffID, size, err := writeLayer(dir, &buf)
	must(err)
	if size != int64(buf.Len()) || !strings.HasPrefix(diffID, "sha256:") {
		t.Errorf("diff ID %s, size %d of %d", diffID, size, buf.Len())
	}
	got := map[string]*tar.Header{}
	var names []string
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(err)
		got[h.Name] = h
		names = append(names, h.Name)
	}
	if !sort.StringsAreSorted(names[:2]) {
		t.Errorf("entries not in order: %v", names)
	}
	for _, want := range []string{"etc/", "etc/.wh.gone", "etc/opq/", "etc/opq/.wh..wh..opq", "etc/opq/new", "link", "suid", "suid2"} {
		if got[want] == nil {
			t.Errorf("no entry %q in %v", want, names)
		}
	}
	if h := got["etc/opq/new"]; h != nil && (h.Uid != 7 || h.Gid != 8) {
		t.Errorf("owner %d:%d", h.Uid, h.Gid)
	}
	if h := got["suid"]; h != nil && h.Mode&0o4000 == 0 {
		t.Errorf("set-uid bit lost: %o", h.Mode)
	}
	if h := got["suid2"]; h != nil && (h.Typeflag != tar.TypeLink || h.Linkname != "suid") {
		t.Errorf("hard link: %c %q", h.Typeflag, h.Linkname)
	}
	if h := got["link"]; h != nil && (h.Typeflag != tar.TypeSymlink || h.Linkname != "/etc/passwd") {
		t.Errorf("symlink: %c %q", h.Typeflag, h.Linkname)
	}
	if h := got["etc/.wh.gone"]; h != nil && (h.Typeflag != tar.TypeReg || h.Size != 0) {
		t.Errorf("whiteout: %c size %d", h.Typeflag, h.Size)
	}
	// The same directory gives the same bytes.
	var again bytes.Buffer
	d2, _, err := writeLayer(dir, &again)
	must(err)
	if d2 != diffID {
		t.Errorf("layer digest not stable: %s, %s", diffID, d2)
	}
}

// A RUN step's upper belongs to the sandbox's host ids: normalize shifts
// them back to the image's, keeps set-id bits that chown clears, drops
// overlayfs's private xattrs but the opaque marker, and refuses an owner
// outside the sandbox's ids.
func TestNormalizeShift(t *testing.T) {
	requireRoot(t)
	base := uint32(sandbox.IDMapBase)
	dir := t.TempDir()
	f := filepath.Join(dir, "bin/su")
	if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(f, []byte("x"), 0o755)
	os.Chown(filepath.Dir(f), int(base), int(base))
	os.Chown(f, int(base), int(base)+42)
	unix.Chmod(f, 0o4755)
	unix.Setxattr(filepath.Dir(f), "trusted.overlay.origin", []byte("x"), 0)
	unix.Setxattr(filepath.Dir(f), "trusted.overlay.opaque", []byte("y"), 0)
	unix.Mknod(filepath.Join(dir, "bin/gone"), unix.S_IFCHR, 0)
	empty, err := normalize(dir, base)
	if err != nil || empty {
		t.Fatalf("normalize = %v, %v", empty, err)
	}
	fi, _ := os.Lstat(f)
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 0 || st.Gid != 42 || fi.Mode()&os.ModeSetuid == 0 {
		t.Errorf("bin/su: %d:%d %v, want 0:42 with set-uid", st.Uid, st.Gid, fi.Mode())
	}
	buf := make([]byte, 16)
	if _, err := unix.Getxattr(filepath.Dir(f), "trusted.overlay.origin", buf); !errors.Is(err, unix.ENODATA) {
		t.Errorf("trusted.overlay.origin kept: %v", err)
	}
	if n, err := unix.Getxattr(filepath.Dir(f), "trusted.overlay.opaque", buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("opaque marker lost: %v", err)
	}

	os.WriteFile(filepath.Join(dir, "host-owned"), nil, 0o644) // owned by the host's root
	if _, err := normalize(dir, base); err == nil || !strings.Contains(err.Error(), "outside the sandbox") {
		t.Errorf("an entry owned by a host id: %v", err)
	}
	if empty, err := normalize(t.TempDir(), base); err != nil || !empty {
		t.Errorf("an empty upper: %v, %v", empty, err)
	}
}

// The context index: .dockerignore applies (with exceptions), ignored
// files change nothing in the digest, a content or mode change does.
func TestContextIgnore(t *testing.T) {
	dir := t.TempDir()
	files(t, dir, map[string]string{
		".dockerignore": "*.log\n!keep.log\nsecret/\n**/node_modules\n",
		"Dockerfile":    "FROM scratch\n", "a.txt": "a", "x.log": "x", "keep.log": "k",
		"secret/key": "s", "sub/node_modules/m": "m", "sub/b": "b",
	})
	c, err := openContext(dir, filepath.Join(dir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for p, want := range map[string]bool{"a.txt": true, "keep.log": true, "x.log": false, "secret/key": false, "secret": false,
		"sub/node_modules/m": false, "sub/b": true, "Dockerfile": true} {
		if got := c.entries[p] != nil; got != want {
			t.Errorf("%s indexed: %v, want %v", p, got, want)
		}
	}
	d1 := c.digest
	reopen := func() string {
		c2, err := openContext(dir, filepath.Join(dir, "Dockerfile"))
		if err != nil {
			t.Fatal(err)
		}
		defer c2.close()
		return c2.digest
	}
	os.WriteFile(filepath.Join(dir, "x.log"), []byte("changed"), 0o644)
	os.WriteFile(filepath.Join(dir, "secret/key"), []byte("changed"), 0o644)
	if d := reopen(); d != d1 {
		t.Errorf("an ignored file changed the context digest")
	}
	os.WriteFile(filepath.Join(dir, "sub/b"), []byte("B"), 0o644)
	d2 := reopen()
	if d2 == d1 {
		t.Errorf("a changed file left the context digest alone")
	}
	os.Chmod(filepath.Join(dir, "sub/b"), 0o755)
	if d := reopen(); d == d2 {
		t.Errorf("a mode change left the context digest alone")
	}
}

// Source paths resolve through symlinks inside the context only: an
// absolute symlink, one that climbs out, or a path with ".." is refused
// as an escape; in an image's root the same symlinks resolve inside it.
func TestResolveEscapes(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	files(t, dir, map[string]string{
		"ok/file": "f", "in": "->ok/file", "abs": "->/etc/passwd", "up": "->../outside", "deep/up": "->../../x",
		"viadir": "->ok", "loop": "->loop",
	})
	c, err := openContext(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for _, tc := range []struct {
		src    string
		escape bool
		rel    string
	}{
		{"in", false, "ok/file"}, {"viadir/file", false, "ok/file"}, {"abs", true, ""}, {"up", true, ""},
		{"deep/up", true, ""}, {"../x", true, ""}, {"ok/../../x", true, ""},
	} {
		rel, err := cleanSource(tc.src)
		var e *entry
		if err == nil {
			e, err = resolve(c, rel)
		}
		if tc.escape {
			if !errors.Is(err, ErrEscape) {
				t.Errorf("%s: %v, want ErrEscape", tc.src, err)
			}
			continue
		}
		if err != nil || e == nil || e.rel != tc.rel {
			t.Errorf("%s: %+v, %v; want %s", tc.src, e, err, tc.rel)
		}
	}
	if _, err := resolve(c, "loop"); err == nil || !strings.Contains(err.Error(), "too many levels") {
		t.Errorf("a symlink loop: %v", err)
	}
	root, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(root)
	os.MkdirAll(filepath.Join(dir, "etc"), 0o755)
	os.WriteFile(filepath.Join(dir, "etc/passwd"), []byte("inside"), 0o644)
	if e, err := resolve(&dirTree{root: root}, "abs"); err != nil || e == nil || e.rel != "etc/passwd" {
		t.Errorf("an absolute symlink in an image root: %+v, %v", e, err)
	}
}

package image

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// roundTripImage has two layers exercising ownership, modes, links,
// whiteouts and an opaque directory.
func roundTripLayers() [2][]ent {
	lower := []ent{
		dir("etc/", 0o755),
		file("etc/passwd", "root:x:0:0::/root:/bin/sh\n"),
		dir("bin/", 0o755),
		withMode(file("bin/su", "su"), 0o4755),
		withMode(file("bin/sg", "sg"), 0o2711),
		symlink("bin/sh", "busybox"),
		hardlink("bin/su2", "bin/su"),
		withMode(dir("tmp/", 0o755), 0o1777),
		withOwner(dir("home/u/", 0o700), 1000, 1000),
		withOwner(withMode(file("home/u/f", "mine"), 0o640), 1000, 100),
		dir("gone/", 0o755),
		file("gone/x", "x"),
		dir("opq/", 0o755),
		file("opq/lower", "lower"),
		dir("opq/sub/", 0o755),
		file("opq/sub/lowerfile", "lower"),
		file("keep", "replaced later"),
		file("wh", "whited out"),
		{name: "run/fifo", typ: tar.TypeFifo, mode: 0o620},
	}
	upper := []ent{
		file("keep", "upper"),
		{name: ".wh.wh", typ: tar.TypeReg},
		{name: ".wh.gone", typ: tar.TypeReg},
		dir("opq/", 0o750),
		file("opq/new", "before marker"),
		{name: "opq/.wh..wh..opq", typ: tar.TypeReg},
		file("opq/after", "after marker"),
		file("opq/sub/new2", "new2"),
		file("same", "same layer"),
		{name: ".wh.same", typ: tar.TypeReg},
	}
	return [2][]ent{lower, upper}
}

func TestRoundTrip(t *testing.T) {
	requireRoot(t)
	ls := roundTripLayers()
	img := imageOf(t, layerOf(t, ls[0]...), layerOf(t, ls[1]...))
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	archive := writeArchive(t, img, "example.com/rt:1")
	lay := writeLayout(t, img, "example.com/rt:2")
	ref := pushToRegistry(t, img, "rt:3")

	got := map[string]*Image{}
	for name, f := range map[string]func() (*Image, error){
		"archive": func() (*Image, error) { return s.Import(archive) },
		"layout":  func() (*Image, error) { return s.Import(lay) },
		"pull":    func() (*Image, error) { return s.Pull(context.Background(), ref) },
	} {
		im, err := f()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if im.Digest != want.String() {
			t.Errorf("%s: digest %s, want %s", name, im.Digest, want)
		}
		got[name] = im
	}
	im, err := s.Resolve(want.String())
	if err != nil {
		t.Fatal(err)
	}
	wantRefs := []string{"example.com/rt:1", "example.com/rt:2", normaliseT(t, ref)}
	slices.Sort(wantRefs)
	if !slices.Equal(im.Refs, wantRefs) {
		t.Errorf("refs %q, want %q", im.Refs, wantRefs)
	}
	if im.Config.User != "1000:1000" || im.Config.WorkingDir != "/work" || !slices.Equal(im.Config.Cmd, []string{"/bin/sh"}) {
		t.Errorf("config %+v", im.Config)
	}
	checkRootfs(t, im.Rootfs)
}

func normaliseT(t *testing.T, ref string) string {
	n, err := normalise(ref)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func checkRootfs(t *testing.T, root string) {
	t.Helper()
	read := func(p string) string {
		b, err := os.ReadFile(filepath.Join(root, p))
		if err != nil {
			t.Error(err)
		}
		return string(b)
	}
	lstat := func(p string) *unix.Stat_t {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, p), &st); err != nil {
			t.Errorf("lstat %s: %v", p, err)
		}
		return &st
	}
	absent := func(p string) {
		if _, err := os.Lstat(filepath.Join(root, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: want absent, got %v", p, err)
		}
	}
	if got := read("etc/passwd"); got != "root:x:0:0::/root:/bin/sh\n" {
		t.Errorf("etc/passwd = %q", got)
	}
	for p, mode := range map[string]uint32{
		"bin/su": unix.S_IFREG | 0o4755, "bin/sg": unix.S_IFREG | 0o2711, "tmp": unix.S_IFDIR | 0o1777,
		"home/u": unix.S_IFDIR | 0o700, "home/u/f": unix.S_IFREG | 0o640, "run/fifo": unix.S_IFIFO | 0o620,
		"opq": unix.S_IFDIR | 0o750, "run": unix.S_IFDIR | 0o755,
	} {
		if st := lstat(p); st.Mode != mode {
			t.Errorf("%s: mode %o, want %o", p, st.Mode, mode)
		}
	}
	if st := lstat("home/u"); st.Uid != 1000 || st.Gid != 1000 {
		t.Errorf("home/u owned %d:%d", st.Uid, st.Gid)
	}
	if st := lstat("home/u/f"); st.Uid != 1000 || st.Gid != 100 {
		t.Errorf("home/u/f owned %d:%d", st.Uid, st.Gid)
	}
	if l, err := os.Readlink(filepath.Join(root, "bin/sh")); err != nil || l != "busybox" {
		t.Errorf("bin/sh -> %q, %v", l, err)
	}
	if a, b := lstat("bin/su"), lstat("bin/su2"); a.Ino != b.Ino || a.Nlink != 2 {
		t.Errorf("bin/su2 not a hard link of bin/su: ino %d %d nlink %d", a.Ino, b.Ino, a.Nlink)
	}
	for _, p := range []string{"etc/passwd", "etc", "bin/sh", "home/u"} {
		if st := lstat(p); st.Mtim.Sec != mtime.Unix() {
			t.Errorf("%s: mtime %d, want %d", p, st.Mtim.Sec, mtime.Unix())
		}
	}
	if got := read("keep"); got != "upper" {
		t.Errorf("keep = %q", got)
	}
	absent("wh")
	absent("gone")
	absent(".wh.wh")
	if got := read("same"); got != "same layer" {
		t.Errorf("same = %q (a whiteout applies to lower layers only)", got)
	}
	if got, want := names(t, filepath.Join(root, "opq")), []string{"after", "new", "sub"}; !slices.Equal(got, want) {
		t.Errorf("opq holds %q, want %q", got, want)
	}
	if got, want := names(t, filepath.Join(root, "opq/sub")), []string{"new2"}; !slices.Equal(got, want) {
		t.Errorf("opq/sub holds %q, want %q", got, want)
	}
}

// TestImportTwiceReuses checks that a known digest is not unpacked again.
func TestImportTwiceReuses(t *testing.T) {
	requireRoot(t)
	img := imageOf(t, layerOf(t, file("a", "a")))
	s := openStore(t)
	first, err := s.Import(writeArchive(t, img, "example.com/a:1"))
	if err != nil {
		t.Fatal(err)
	}
	s.hook = func(int64) error { t.Error("unpacked a second time"); return nil }
	second, err := s.Import(writeLayout(t, img, "example.com/a:2"))
	if err != nil {
		t.Fatal(err)
	}
	if first.Digest != second.Digest || !first.Created.Equal(second.Created) || len(second.Refs) != 2 {
		t.Errorf("first %+v second %+v", first, second)
	}
}

func TestResolveListRemove(t *testing.T) {
	requireRoot(t)
	s := openStore(t)
	a, err := s.Import(writeArchive(t, imageOf(t, layerOf(t, file("a", "a"))), "busybox"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Import(writeLayout(t, imageOf(t, layerOf(t, file("b", "b"))), "ghcr.io/x/y:tag"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ref, want string }{
		{"busybox", a.Digest},
		{"busybox:latest", a.Digest},
		{"library/busybox", a.Digest},
		{"docker.io/library/busybox:latest", a.Digest},
		{"index.docker.io/library/busybox", a.Digest},
		{a.Digest, a.Digest},
		{a.Digest[:19], a.Digest},
		{"busybox@" + a.Digest, a.Digest},
		{"ghcr.io/x/y:tag", b.Digest},
	} {
		t.Run(tc.ref, func(t *testing.T) {
			im, err := s.Resolve(tc.ref)
			if err != nil {
				t.Fatal(err)
			}
			if im.Digest != tc.want {
				t.Errorf("got %s, want %s", im.Digest, tc.want)
			}
			if _, err := os.Stat(filepath.Join(im.Rootfs, "a")); (err == nil) != (tc.want == a.Digest) {
				t.Errorf("rootfs %s: %v", im.Rootfs, err)
			}
		})
	}
	for _, ref := range []string{"busybox:1", "ghcr.io/x/y", "alpine", "sha256:000000000000"} {
		if _, err := s.Resolve(ref); !errors.Is(err, ErrNotFound) {
			t.Errorf("Resolve(%q) = %v, want ErrNotFound", ref, err)
		}
	}
	list, err := s.List()
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %v, %v", list, err)
	}
	if err := s.Remove("busybox"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(a.Digest); !errors.Is(err, ErrNotFound) {
		t.Errorf("after Remove, Resolve(digest) = %v", err)
	}
	if _, err := os.Stat(a.Rootfs); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rootfs left after Remove: %v", err)
	}
	if err := s.Remove("busybox"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Remove = %v", err)
	}
	if err := s.Remove(b.Digest); err != nil {
		t.Fatal(err)
	}
	if list, err := s.List(); err != nil || len(list) != 0 {
		t.Errorf("List = %v, %v", list, err)
	}
}

// TestInjectedFailure stops an unpack after a few entries: no image, no temp dir.
func TestInjectedFailure(t *testing.T) {
	requireRoot(t)
	s := openStore(t)
	s.hook = func(n int64) error {
		if n == 3 {
			return errors.New("injected")
		}
		return nil
	}
	img := imageOf(t, layerOf(t, file("a", "a"), file("b", "b"), file("c", "c"), file("d", "d")))
	if _, err := s.Import(writeArchive(t, img, "example.com/x:1")); err == nil {
		t.Fatal("import succeeded")
	}
	if _, err := s.Resolve("example.com/x:1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Resolve = %v", err)
	}
	if got := names(t, filepath.Join(s.dir, "tmp")); len(got) != 0 {
		t.Errorf("tmp holds %q", got)
	}
	if got := names(t, filepath.Join(s.dir, "sha256")); len(got) != 0 {
		t.Errorf("sha256 holds %q", got)
	}
}

// TestCrashMidUnpack kills a process in the middle of an unpack; the next
// Open removes its temp dir and no image is visible.
func TestCrashMidUnpack(t *testing.T) {
	requireRoot(t)
	if os.Getenv("PROCTOR_IMAGE_CRASH_STORE") != "" {
		s, err := Open(os.Getenv("PROCTOR_IMAGE_CRASH_STORE"))
		if err != nil {
			os.Exit(2)
		}
		s.hook = func(n int64) error {
			if n == 3 {
				os.Exit(3) // a crash: no deferred cleanup runs
			}
			return nil
		}
		_, _ = s.Import(os.Getenv("PROCTOR_IMAGE_CRASH_SRC"))
		os.Exit(0)
	}
	img := imageOf(t, layerOf(t, file("a", "a"), file("b", "b"), file("c", "c"), file("d", "d")))
	src := writeArchive(t, img, "example.com/crash:1")
	dir := filepath.Join(t.TempDir(), "images")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashMidUnpack$")
	cmd.Env = append(os.Environ(), "PROCTOR_IMAGE_CRASH_STORE="+dir, "PROCTOR_IMAGE_CRASH_SRC="+src)
	err := cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).ExitStatus() != 3 {
		t.Fatalf("helper: %v", err)
	}
	if got := names(t, filepath.Join(dir, "tmp")); len(got) != 1 {
		t.Fatalf("after the crash tmp holds %q, want one abandoned unpack", got)
	}
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, filepath.Join(dir, "tmp")); len(got) != 0 {
		t.Errorf("Open left %q in tmp", got)
	}
	if _, err := s.Resolve("example.com/crash:1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Resolve = %v", err)
	}
	if list, err := s.List(); err != nil || len(list) != 0 {
		t.Errorf("List = %v, %v", list, err)
	}
	if _, err := s.Import(src); err != nil {
		t.Errorf("import after the crash: %v", err)
	}
}

func TestMultiImageArchiveRefused(t *testing.T) {
	// No root needed: refused before unpacking.
	s := openStore(t)
	s2 := filepath.Join(t.TempDir(), "two.tar")
	if err := writeTwo(t, s2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(s2); err == nil {
		t.Error("multi-image archive imported")
	} else {
		t.Log(err)
	}
}

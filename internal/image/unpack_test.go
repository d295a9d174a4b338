package image

import (
	"archive/tar"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// TestHostileLayers imports images built to write outside the rootfs. Each
// must fail naming the entry, and nothing may appear outside the store: the
// canary directory stays empty, the victim file unchanged, and the store
// holds no image and no temp dir.
func TestHostileLayers(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	canary := filepath.Join(base, "canary")
	victimDir := filepath.Join(base, "victim")
	victim := filepath.Join(victimDir, "x")
	for _, d := range []string{canary, victimDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(victim, []byte("intact"), 0o644); err != nil {
		t.Fatal(err)
	}
	var passwd syscall.Stat_t
	if err := syscall.Stat("/etc/passwd", &passwd); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("d/", 2100) + "x"

	for _, tc := range []struct {
		name   string
		layers [][]ent
		entry  string // the entry the error must name
	}{
		{"absolute", [][]ent{{file(canary+"/x", "pwned")}}, canary + "/x"},
		{"dotdot", [][]ent{{file("../x", "pwned")}}, "../x"},
		{"inner dotdot", [][]ent{{file("a/../../x", "pwned")}}, "a/../../x"},
		{"harmless dotdot", [][]ent{{file("a/../x", "pwned")}}, "a/../x"},
		{"too long", [][]ent{{file(long, "x")}}, long},
		{"symlink to canary then write", [][]ent{{symlink("l", canary), file("l/pwned", "pwned")}}, "l/pwned"},
		{"symlink to canary then mkdir", [][]ent{{symlink("l", canary), dir("l/d/", 0o755)}}, "l/d/"},
		{"symlink to canary then symlink", [][]ent{{symlink("l", canary), symlink("l/s", "/etc")}}, "l/s"},
		{"symlink to canary, next layer writes", [][]ent{{symlink("l", canary)}, {file("l/pwned", "pwned")}}, "l/pwned"},
		{"relative symlink up then write", [][]ent{{symlink("l", ".."), file("l/x", "pwned")}}, "l/x"},
		{"deep relative symlink up", [][]ent{{dir("a/", 0o755), symlink("a/l", "../../../../.."), file("a/l/x", "pwned")}}, "a/l/x"},
		{"hard link to /etc/passwd", [][]ent{{hardlink("h", "/etc/passwd")}}, "h"},
		{"hard link to ../x", [][]ent{{hardlink("h", "../x")}}, "h"},
		{"hard link through symlink", [][]ent{{symlink("l", victimDir), hardlink("h", "l/x")}}, "h"},
		{"hard link to missing", [][]ent{{hardlink("h", "nothing")}}, "h"},
		{"whiteout dotdot", [][]ent{{file(".wh...", "")}}, ".wh..."},
		{"whiteout of a dir through dotdot", [][]ent{{file("a/.wh..", "")}}, "a/.wh.."},
		{"whiteout through symlink", [][]ent{{symlink("l", victimDir)}, {file("l/.wh.x", "")}}, "l/.wh.x"},
		{"opaque through symlink", [][]ent{{symlink("l", victimDir)}, {file("l/.wh..wh..opq", "")}}, "l/.wh..wh..opq"},
		{"root not a dir", [][]ent{{file(".", "")}}, "."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t)
			var layers []v1.Layer
			for _, l := range tc.layers {
				layers = append(layers, layerOf(t, l...))
			}
			_, err := s.Import(writeArchive(t, imageOf(t, layers...), "example.com/hostile:1"))
			if err == nil {
				t.Fatal("import succeeded")
			}
			var ue *UnsafeEntryError
			if !errors.As(err, &ue) || ue.Entry != tc.entry || !strings.HasPrefix(ue.Layer, "sha256:") {
				t.Errorf("error %v: want an UnsafeEntryError naming %q", err, tc.entry)
			}
			if got := names(t, canary); len(got) != 0 {
				t.Errorf("canary holds %q", got)
			}
			if got := names(t, victimDir); !slices.Equal(got, []string{"x"}) {
				t.Errorf("victim dir holds %q", got)
			}
			if b, err := os.ReadFile(victim); err != nil || string(b) != "intact" {
				t.Errorf("victim: %q, %v", b, err)
			}
			var st syscall.Stat_t
			if err := syscall.Stat("/etc/passwd", &st); err != nil || st.Nlink != passwd.Nlink {
				t.Errorf("/etc/passwd nlink %d, was %d (%v)", st.Nlink, passwd.Nlink, err)
			}
			for _, d := range []string{"tmp", "sha256"} {
				if got := names(t, filepath.Join(s.dir, d)); len(got) != 0 {
					t.Errorf("store %s holds %q", d, got)
				}
			}
			// Nothing outside the store and the canary/victim dirs.
			_ = filepath.WalkDir(filepath.Dir(s.dir), func(p string, d fs.DirEntry, err error) error {
				if err == nil && d.Name() == "x" || d != nil && d.Name() == "pwned" {
					t.Errorf("found %s", p)
				}
				return nil
			})
		})
	}
}

// TestDeviceDropped checks that device nodes are listed, never created, and
// that xattrs (file capabilities) are dropped.
func TestDeviceDropped(t *testing.T) {
	requireRoot(t)
	s := openStore(t)
	capFile := file("bin/ping", "ping")
	capFile.pax = map[string]string{"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00"}
	im, err := s.Import(writeArchive(t, imageOf(t, layerOf(t,
		dir("dev/", 0o755),
		ent{name: "dev/sda", typ: tar.TypeBlock, mode: 0o666},
		ent{name: "dev/mem", typ: tar.TypeChar, mode: 0o666},
		capFile,
	)), "example.com/dev:1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, filepath.Join(im.Rootfs, "dev")); len(got) != 0 {
		t.Errorf("dev holds %q", got)
	}
	want := []string{"/bin/ping: xattr security.capability", "/dev/mem: device", "/dev/sda: device"}
	got := slices.Sorted(slices.Values(im.Dropped))
	if !slices.Equal(got, want) {
		t.Errorf("Dropped %q, want %q", got, want)
	}
	if sz, err := syscall.Getxattr(filepath.Join(im.Rootfs, "bin/ping"), "security.capability", nil); err == nil {
		t.Errorf("security.capability kept (%d bytes)", sz)
	}
}

// TestLimits refuses a layer over the size cap and one over the entry cap.
func TestLimits(t *testing.T) {
	requireRoot(t)
	big := strings.Repeat("\x00", 2<<20) // compresses to a few KiB
	var many []ent
	for i := range 20 {
		many = append(many, file(strings.Repeat("f", i+1), ""))
	}
	for _, tc := range []struct {
		name string
		opt  Option
		ents []ent
	}{
		{"bytes", WithMaxBytes(1 << 20), []ent{file("bomb", big)}},
		{"bytes across files", WithMaxBytes(1 << 20), []ent{file("a", big[:600<<10]), file("b", big[:600<<10])}},
		{"entries", WithMaxEntries(10), many},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, tc.opt)
			_, err := s.Import(writeArchive(t, imageOf(t, layerOf(t, tc.ents...)), "example.com/bomb:1"))
			if !errors.Is(err, ErrLimit) {
				t.Fatalf("err = %v, want ErrLimit", err)
			}
			if got := names(t, filepath.Join(s.dir, "tmp")); len(got) != 0 {
				t.Errorf("tmp holds %q", got)
			}
		})
	}
}

// tamperedLayer serves other content than its diff ID says.
type tamperedLayer struct {
	v1.Layer
	content []byte
}

func (l tamperedLayer) Uncompressed() (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(string(l.content))), nil
}

func TestTamperedLayer(t *testing.T) {
	requireRoot(t)
	good := layerOf(t, file("a", "good"))
	img := imageOf(t, tamperedLayer{good, tarBytes(t, file("a", "evil"))})
	root := t.TempDir()
	_, _, err := unpackImage(img, root, limits{maxBytes: 1 << 20, maxEntries: 100}, nil)
	var te *TamperedError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want TamperedError", err)
	}
}

// TestBusyboxImage unpacks a busybox image and runs its shell in it.
func TestBusyboxImage(t *testing.T) {
	requireRoot(t)
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skip("needs /bin/busybox (Debian busybox-static)")
	}
	ents := []ent{dir("bin/", 0o755), withMode(file("bin/busybox", string(bb)), 0o755)}
	for _, n := range []string{"sh", "ls", "wc", "echo"} {
		ents = append(ents, symlink("bin/"+n, "busybox"))
	}
	s := openStore(t)
	ref := pushToRegistry(t, imageOf(t, layerOf(t, ents...)), "busybox:latest")
	im, err := s.Pull(t.Context(), ref)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", "echo hello from $(ls /bin | wc -l) tools")
	cmd.Path = "/bin/sh"
	cmd.SysProcAttr = &syscall.SysProcAttr{Chroot: im.Rootfs}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("running /bin/sh in the rootfs: %v: %s", err, out)
	}
	t.Logf("%s", out)
	if !strings.HasPrefix(string(out), "hello from") {
		t.Errorf("output %q", out)
	}
}

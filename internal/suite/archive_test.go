package suite

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/task"
)

// A task packed on one machine unpacks elsewhere to the same Merkle
// digest; an archive altered in any byte, or bound to another tree, is
// refused and leaves nothing behind.
func TestPackUnpackTree(t *testing.T) {
	src := filepath.Join("..", "..", "examples", "tasks", "py-bugfix")
	want, err := task.Digest(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	path, digest, err := PackTreeFile(src, tmp)
	if err != nil {
		t.Fatal(err)
	}
	again, digest2, err := PackTreeFile(src, tmp)
	if err != nil || digest2 != digest {
		t.Fatalf("packing twice: %s then %s (%v)", digest, digest2, err)
	}
	if a, b := mustRead(t, path), mustRead(t, again); !bytes.Equal(a, b) {
		t.Fatal("two packings of one tree differ")
	}
	dst := filepath.Join(tmp, "out")
	if err := UnpackTree(path, digest, want, dst); err != nil {
		t.Fatal(err)
	}
	if got, _ := task.Digest(dst); got != want {
		t.Fatalf("unpacked tree %s, want %s", got, want)
	}
	if err := UnpackTree(path, digest, want, dst); err == nil {
		t.Fatal("unpacked over an existing directory")
	}

	other := strings.Replace(want, want[len(want)-4:], "0000", 1)
	if err := UnpackTree(path, digest, other, filepath.Join(tmp, "o2")); err == nil || !strings.Contains(err.Error(), "unpacks to the tree") {
		t.Fatalf("bound to another tree: %v", err)
	}
	data := mustRead(t, path)
	i := bytes.Index(data, []byte("def "))
	if i < 0 {
		t.Fatal("no code in the archive")
	}
	data[i] = 'D'
	bad := filepath.Join(tmp, "bad.tar")
	os.WriteFile(bad, data, 0o644)
	if err := UnpackTree(bad, digest, want, filepath.Join(tmp, "o3")); err == nil || !strings.Contains(err.Error(), "digest") {
		t.Fatalf("altered archive: %v", err)
	}
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".unpack-") || e.Name() == "o2" || e.Name() == "o3" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// A tree holding fifos, sockets and devices (a rootfs) travels whole: it
// unpacks to the same Merkle digest, and a corrupted archive of it is
// refused and leaves nothing behind.
func TestPackTreeCarriesSpecialFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("cannot run here: needs root (under CI a skipped test is a failure)")
		}
		t.Skip("needs root: device nodes")
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a"), []byte("x"), 0o644)
	if err := unix.Mkfifo(filepath.Join(dir, "p"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(dir, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	want, err := treeDigest(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	path, digest, err := PackTreeFile(dir, tmp)
	if err != nil {
		t.Fatal(err)
	}
	if err := VerifyTree(path, digest, want); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(tmp, "out")
	if err := UnpackTree(path, digest, want, dst); err != nil {
		t.Fatal(err)
	}
	if got, _ := treeDigest(dst); got != want {
		t.Fatalf("unpacked tree %s, want %s", got, want)
	}
	data := mustRead(t, path)
	data = data[:len(data)-5]
	bad := filepath.Join(tmp, "bad.tar")
	os.WriteFile(bad, data, 0o644)
	if err := UnpackTree(bad, digest, want, filepath.Join(tmp, "o4")); err == nil {
		t.Fatal("a truncated archive was unpacked")
	}
	if err := VerifyTree(bad, digest, want); err == nil {
		t.Fatal("a truncated archive was verified")
	}
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".unpack-") || e.Name() == "o4" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A trial's output comes from a worker: unpacked on the coordinator, it may
// hold only directories and plain files of the coordinator's own, never a
// set-id program, a device, a fifo or a hard link.
func TestResultsArePlainFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("cannot run here: needs root (under CI a skipped test is a failure)")
		}
		t.Skip("needs root: device nodes, owners")
	}
	plant := map[string]func(dir string) error{
		"a set-id program": func(dir string) error {
			os.WriteFile(filepath.Join(dir, "agent.log"), []byte("x"), 0o755)
			return os.Chmod(filepath.Join(dir, "agent.log"), 0o755|os.ModeSetuid)
		},
		"a device": func(dir string) error {
			return unix.Mknod(filepath.Join(dir, "disk"), unix.S_IFBLK|0o666, int(unix.Mkdev(8, 0)))
		},
		"a fifo": func(dir string) error { return unix.Mkfifo(filepath.Join(dir, "p"), 0o644) },
		"a hard link": func(dir string) error {
			return os.Link(filepath.Join(dir, "verdict.json"), filepath.Join(dir, "bundle.json"))
		},
		"a sticky dir": func(dir string) error {
			os.Mkdir(filepath.Join(dir, "d"), 0o755)
			return os.Chmod(filepath.Join(dir, "d"), 0o777|os.ModeSticky)
		},
		"nothing wrong": func(dir string) error { return os.Chown(filepath.Join(dir, "verdict.json"), 1234, 1234) },
	}
	for name, f := range plant {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "verdict.json"), []byte("{}"), 0o644)
			if err := f(dir); err != nil {
				t.Fatal(err)
			}
			tmp := t.TempDir()
			path, digest, err := PackTreeFile(dir, tmp)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(tmp, "out")
			err = unpackResult(path, digest, out)
			if name == "nothing wrong" {
				var st unix.Stat_t
				if err != nil || unix.Stat(filepath.Join(out, "verdict.json"), &st) != nil || st.Uid != 0 {
					t.Fatalf("plain files: %v (owner %d, want the caller's)", err, st.Uid)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "only directories and plain files") {
				t.Fatalf("unpackResult = %v, want a refusal", err)
			}
			if _, err := os.Lstat(out); err == nil {
				t.Error("the refused output was left in place")
			}
		})
	}
}

//go:build unix

package task

import (
	"crypto/sha256"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestDigestSpecialFiles(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, p string)
		kind string
	}{
		{"fifo", func(t *testing.T, p string) {
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "fifo"},
		{"socket", func(t *testing.T, p string) {
			l, err := net.Listen("unix", p)
			if err != nil {
				t.Skipf("unix sockets unavailable: %v", err)
			}
			t.Cleanup(func() { l.Close() })
		}, "socket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sampleTree(t, dir)
			p := filepath.Join(dir, "environment", "empty", "special")
			tt.make(t, p)
			_, err := Digest(dir)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrSpecialFile) {
				t.Fatalf("Digest = %v, want an *Error matching ErrSpecialFile", err)
			}
			if e.File != p {
				t.Errorf("File = %q, want %q", e.File, p)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.kind) || strings.Contains(msg, "\n") {
				t.Errorf("message %q does not name %s on one line", msg, tt.kind)
			}
		})
	}
}

// A file that cannot be read fails the digest rather than being skipped.
func TestDigestUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("skipping: root reads files whatever their mode")
	}
	dir := t.TempDir()
	sampleTree(t, dir)
	p := filepath.Join(dir, "instruction.md")
	if err := os.Chmod(p, 0); err != nil {
		t.Fatal(err)
	}
	_, err := Digest(dir)
	var e *Error
	if !errors.As(err, &e) || e.File != p {
		t.Fatalf("Digest = %v, want an *Error naming %s", err, p)
	}
}

// A rootfs directory may hold devices, fifos and sockets (debootstrap
// makes /dev/null, /dev/console…): below the directories DigestTree is
// told of, they are digested by kind, mode and device number, never
// opened, and listed; the same tree elsewhere is still refused.
func TestDigestTreeSpecialAllowed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: needs root to make device nodes")
	}
	dir := t.TempDir()
	sampleTree(t, dir)
	rootfs := filepath.Join(dir, "environment", "rootfs")
	if err := os.MkdirAll(filepath.Join(rootfs, "dev"), 0o755); err != nil {
		t.Fatal(err)
	}
	mk := func(rel string, mode uint32, dev int) {
		t.Helper()
		if err := syscall.Mknod(filepath.Join(rootfs, rel), mode, dev); err != nil {
			t.Fatal(err)
		}
	}
	mk("dev/null", syscall.S_IFCHR|0o666, 1<<8|3)
	mk("dev/sda", syscall.S_IFBLK|0o660, 8<<8|0)
	mk("dev/fifo", syscall.S_IFIFO|0o600, 0)
	l, err := net.Listen("unix", filepath.Join(rootfs, "dev", "sock"))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	if _, err := Digest(dir); !errors.Is(err, ErrSpecialFile) {
		t.Fatalf("Digest = %v, want ErrSpecialFile", err)
	}
	if _, err := DigestTree(dir, DigestOptions{Special: []string{"environment/workspace"}}); !errors.Is(err, ErrSpecialFile) {
		t.Fatalf("DigestTree with another directory allowed = %v, want ErrSpecialFile", err)
	}
	o := DigestOptions{Special: []string{"environment/rootfs"}, Subtrees: []string{"environment/rootfs", "nope"}}
	d1, err := DigestTree(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range d1.Special {
		got = append(got, s.Path)
	}
	if want := "environment/rootfs/dev/fifo environment/rootfs/dev/null environment/rootfs/dev/sda environment/rootfs/dev/sock"; strings.Join(got, " ") != want {
		t.Errorf("special files %q, want %q", got, want)
	}
	sub, err := DigestTree(rootfs, DigestOptions{Special: []string{"."}})
	if err != nil {
		t.Fatal(err)
	}
	if d1.Subtrees["environment/rootfs"] != sub.Digest {
		t.Errorf("subtree digest %s, the directory's own %s", d1.Subtrees["environment/rootfs"], sub.Digest)
	}
	if _, ok := d1.Subtrees["nope"]; ok {
		t.Error("a subtree that does not exist has a digest")
	}
	again, _ := DigestTree(dir, o)
	if again.Digest != d1.Digest {
		t.Fatal("digest not stable")
	}
	// Each of kind, device number and mode moves the digest.
	for i, change := range []func(){
		func() { os.Remove(filepath.Join(rootfs, "dev/null")); mk("dev/null", syscall.S_IFCHR|0o666, 1<<8|5) },
		func() { os.Remove(filepath.Join(rootfs, "dev/null")); mk("dev/null", syscall.S_IFBLK|0o666, 1<<8|5) },
		func() { os.Chmod(filepath.Join(rootfs, "dev/null"), 0o600) },
		func() { os.Remove(filepath.Join(rootfs, "dev/fifo")); mk("dev/fifo", syscall.S_IFREG|0o600, 0) },
	} {
		prev := d1.Digest
		change()
		d, err := DigestTree(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		if d.Digest == prev {
			t.Errorf("change %d left the digest at %s", i, prev)
		}
		d1 = d
	}
}

// A TreeHasher fed a tree's entries depth first, in name order, gives the
// tree's Digest: every kind of entry, empty directories included.
func TestTreeHasherMatchesDigest(t *testing.T) {
	dir := t.TempDir()
	sampleTree(t, dir)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "empty", "deeper"), 0o700))
	must(os.Symlink("../nowhere", filepath.Join(dir, "empty", "dangling")))
	must(syscall.Mkfifo(filepath.Join(dir, "empty", "fifo"), 0o640))
	if os.Geteuid() == 0 {
		must(syscall.Mknod(filepath.Join(dir, "empty", "null"), syscall.S_IFCHR|0o666, 1<<8|3))
		must(syscall.Mknod(filepath.Join(dir, "empty", "sda"), syscall.S_IFBLK|0o660, 8<<8|1))
	}
	want, err := DigestTree(dir, DigestOptions{Special: []string{"."}})
	must(err)
	h := NewTreeHasher()
	var walk func(p string)
	walk = func(p string) {
		ents, err := os.ReadDir(p) // sorted by name
		must(err)
		for _, e := range ents {
			c := filepath.Join(p, e.Name())
			fi, err := os.Lstat(c)
			must(err)
			st := fi.Sys().(*syscall.Stat_t)
			mode := uint32(st.Mode & 0o7777)
			switch fi.Mode().Type() {
			case 0:
				b, err := os.ReadFile(c)
				must(err)
				h.File(e.Name(), mode, sha256.Sum256(b))
			case os.ModeDir:
				h.Enter(e.Name(), mode)
				walk(c)
				if !h.Leave() {
					t.Fatal("Leave at the root")
				}
			case os.ModeSymlink:
				target, err := os.Readlink(c)
				must(err)
				h.Symlink(e.Name(), target)
			case os.ModeNamedPipe:
				h.Fifo(e.Name(), false, mode)
			case os.ModeDevice | os.ModeCharDevice, os.ModeDevice:
				h.Device(e.Name(), fi.Mode()&os.ModeCharDevice == 0, mode, uint64(st.Rdev>>8), uint64(st.Rdev&0xff))
			}
		}
	}
	walk(dir)
	if got := h.Sum(); got != want.Digest {
		t.Fatalf("TreeHasher %s, DigestTree %s", got, want.Digest)
	}
}

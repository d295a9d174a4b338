package diskfs

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("PROCTOR_NO_SKIP") != "" || os.Getenv("CI") == "true" {
		t.Fatal("cannot run here: needs root (loop devices, mounts; under CI a skipped test is a failure)")
	}
	t.Skip("needs root (loop devices, mounts)")
}

// mountT mounts a filesystem of size bytes in a fresh directory and
// unmounts it when the test ends.
func mountT(t *testing.T, size int64) *FS {
	t.Helper()
	requireRoot(t)
	base := t.TempDir()
	dir := filepath.Join(base, "mnt")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := Mount(dir, Options{SizeBytes: size, TemplateDir: filepath.Join(base, "templates")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Unmount()
		waitNoLoop(t, base)
	})
	return f
}

// boundUnder lists the loop devices whose image was made under dir.
func boundUnder(t *testing.T, dir string) []string {
	t.Helper()
	found, err := Attached(dir)
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// waitNoLoop fails unless every loop device with an image under dir
// detaches within a few seconds (AUTOCLEAR runs from a work queue).
func waitNoLoop(t *testing.T, dir string) {
	t.Helper()
	// The kernel lets a loop device go once its last reference does: a
	// moment after the unmount, longer under heavy I/O (seen here: over
	// 5 s, with 32 MiB just written and synced, while other tests ran).
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		left := boundUnder(t, dir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("loop devices left bound to images under %s: %v", dir, left)
			return
		}
	}
}

// The filesystem offers at least what was asked, whatever the size.
func TestCapacity(t *testing.T) {
	for _, mb := range []int64{1, 64, 4096, 10240} {
		t.Run(fmt.Sprint(mb, "MB"), func(t *testing.T) {
			f := mountT(t, mb<<20)
			u, err := f.Usage()
			if err != nil {
				t.Fatal(err)
			}
			if u.AvailBytes < mb<<20 {
				t.Errorf("asked for %d MiB, files may use %d MiB", mb, u.AvailBytes>>20)
			}
			if u.AvailBytes > mb<<20+mb<<20/50+64<<20 {
				t.Errorf("asked for %d MiB, files may use %d MiB: far more", mb, u.AvailBytes>>20)
			}
			if u.Full() {
				t.Errorf("a fresh filesystem is full: %+v", u)
			}
			var st unix.Stat_t
			if err := unix.Stat(f.Dir(), &st); err != nil || st.Mode&0o777 != 0o755 || st.Uid != 0 {
				t.Errorf("root directory: mode %o uid %d (%v)", st.Mode&0o777, st.Uid, err)
			}
		})
	}
}

// A writer that meets ENOSPC leaves the filesystem Full, however it
// wrote; one that stops short of it does not.
func TestFullAfterENOSPC(t *testing.T) {
	cases := []struct {
		name     string
		script   string
		enospc   bool
		wantFull bool
	}{
		{"dd 1M blocks", `dd if=/dev/zero of=big bs=1M count=200 conv=fsync`, true, true},
		{"dd 4k blocks", `dd if=/dev/zero of=big bs=4k count=60000`, true, true},
		{"one 200 MiB write", `head -c 209715200 /dev/zero > big`, true, true},
		{"fallocate", `fallocate -l 200M big`, true, true},
		// Space to spare, inodes not: the filesystem holds about 12,000.
		{"many files", `i=0; while [ $i -lt 40000 ]; do : > f$i || exit 1; i=$((i+1)); done`, true, true},
		{"half", `dd if=/dev/zero of=big bs=1M count=32 conv=fsync`, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "fallocate" {
				if _, err := exec.LookPath("fallocate"); err != nil {
					t.Skip("no fallocate(1)")
				}
			}
			f := mountT(t, 64<<20)
			cmd := exec.Command("sh", "-c", tc.script)
			cmd.Dir = f.Dir()
			out, err := cmd.CombinedOutput()
			if tc.enospc && (err == nil || !strings.Contains(string(out), "No space left")) {
				t.Fatalf("want ENOSPC, got %v: %s", err, out)
			}
			if !tc.enospc && err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			u, err := f.Usage()
			if err != nil {
				t.Fatal(err)
			}
			if u.Full() != tc.wantFull {
				t.Errorf("Full() = %v, want %v (%+v)", u.Full(), tc.wantFull, u)
			}
			t.Logf("left: %d KiB, %d inodes", u.AvailBytes>>10, u.FreeInodes)
		})
	}
}

// Writes reach the image: a file's data reads back after the page cache
// is dropped, and the image holds it (its blocks are allocated).
func TestWritesReachTheImage(t *testing.T) {
	f := mountT(t, 64<<20)
	p := filepath.Join(f.Dir(), "data")
	want := strings.Repeat("proctor", 100000)
	if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	unix.Fsync(int(fd.Fd()))
	unix.Fadvise(int(fd.Fd()), 0, 0, unix.FADV_DONTNEED)
	fd.Close()
	got, err := os.ReadFile(p)
	if err != nil || string(got) != want {
		t.Fatalf("read back %d bytes (%v), want %d", len(got), err, len(want))
	}
}

// Nothing is left once a filesystem is unmounted: no loop device, no
// image (it never had a name), nothing in its directory's parent but the
// directory.
func TestNothingLeft(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	dir := filepath.Join(base, "mnt")
	os.Mkdir(dir, 0o700)
	f, err := Mount(dir, Options{SizeBytes: 64 << 20, TemplateDir: filepath.Join(t.TempDir(), "t")})
	if err != nil {
		t.Fatal(err)
	}
	if len(boundUnder(t, base)) != 1 {
		t.Fatalf("mounted: loop devices under %s: %v, want one", base, boundUnder(t, base))
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := f.Unmount(); err != nil {
		t.Fatal(err)
	}
	waitNoLoop(t, base)
	des, _ := os.ReadDir(base)
	if len(des) != 1 || des[0].Name() != "mnt" {
		t.Errorf("left in %s: %v", base, des)
	}
	if des, _ := os.ReadDir(dir); len(des) != 0 {
		t.Errorf("left in the mount point: %v", des)
	}
}

// A process killed while its filesystem is mounted leaves the mount;
// Remove takes it away, and its loop device and image with it.
func TestRemoveAfterKill(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	dir := filepath.Join(base, "mnt")
	os.Mkdir(dir, 0o700)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperMount$")
	cmd.Env = append(os.Environ(), "DISKFS_HELPER_DIR="+dir, "DISKFS_HELPER_TEMPLATES="+filepath.Join(t.TempDir(), "t"))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := out.Read(buf)
	if !strings.Contains(string(buf[:n]), "mounted") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper: %q", buf[:n])
	}
	cmd.Process.Kill()
	cmd.Wait()
	if len(boundUnder(t, base)) != 1 {
		t.Fatalf("after the kill: loop devices %v, want the killed process's one", boundUnder(t, base))
	}
	if err := Remove(dir); err != nil {
		t.Fatal(err)
	}
	waitNoLoop(t, base)
	if des, _ := os.ReadDir(base); len(des) != 0 {
		t.Errorf("left in %s: %v", base, des)
	}
}

// TestHelperMount is TestRemoveAfterKill's victim: it mounts, writes,
// says so and waits to be killed.
func TestHelperMount(t *testing.T) {
	dir := os.Getenv("DISKFS_HELPER_DIR")
	if dir == "" {
		t.Skip("a helper process for TestRemoveAfterKill")
	}
	f, err := Mount(dir, Options{SizeBytes: 64 << 20, TemplateDir: os.Getenv("DISKFS_HELPER_TEMPLATES")})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(f.Dir(), "x"), make([]byte, 1<<20), 0o644)
	fmt.Println("mounted")
	time.Sleep(time.Minute)
}

// An image is never put on a filesystem held in memory.
func TestRefusesMemory(t *testing.T) {
	requireRoot(t)
	base := t.TempDir()
	if err := unix.Mount("tmpfs", base, "tmpfs", 0, "size=8m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(base, unix.MNT_DETACH)
	dir := filepath.Join(base, "mnt")
	os.Mkdir(dir, 0o700)
	_, err := Mount(dir, Options{SizeBytes: 64 << 20, TemplateDir: filepath.Join(t.TempDir(), "t")})
	var nd *NotOnDiskError
	if !errors.As(err, &nd) || nd.FSType != "tmpfs" {
		t.Fatalf("Mount on a tmpfs: %v, want a NotOnDiskError", err)
	}
}

// Every template of a size is alike: formatted with the same identity.
func TestTemplateReused(t *testing.T) {
	requireRoot(t)
	dir := t.TempDir()
	p1, err := template(dir, imageSize(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	fi1, _ := os.Stat(p1)
	p2, err := template(dir, imageSize(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(p2)
	if p1 != p2 || !os.SameFile(fi1, fi2) {
		t.Errorf("a second template was made: %s, %s", p1, p2)
	}
	des, _ := os.ReadDir(dir)
	if len(des) != 1 {
		t.Errorf("template dir holds %d entries, want 1", len(des))
	}
}

// BenchmarkScratch is what a sandbox's scratch space costs, made and taken
// away: a disk of Terminal-Bench's default 10 GiB (template cached), and
// the tmpfs it replaces. bench/storage.sh prints it beside whole trials.
func BenchmarkScratch(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root (loop devices, mounts)")
	}
	const size = 10240 << 20
	base := b.TempDir()
	templates := filepath.Join(base, "templates")
	if _, err := template(templates, imageSize(size)); err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(base, "mnt")
	b.Run("disk", func(b *testing.B) {
		for b.Loop() {
			if err := os.Mkdir(dir, 0o700); err != nil {
				b.Fatal(err)
			}
			f, err := Mount(dir, Options{SizeBytes: size, TemplateDir: templates})
			if err != nil {
				b.Fatal(err)
			}
			if err := f.Unmount(); err != nil {
				b.Fatal(err)
			}
			if err := os.Remove(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tmpfs", func(b *testing.B) {
		for b.Loop() {
			if err := os.Mkdir(dir, 0o700); err != nil {
				b.Fatal(err)
			}
			if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=10240m"); err != nil {
				b.Fatal(err)
			}
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				b.Fatal(err)
			}
			if err := os.Remove(dir); err != nil {
				b.Fatal(err)
			}
		}
	})
}

//go:build linux

package trapfs

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// inPrivateMountNS runs fn on a thread of its own in a new, private mount
// namespace, with clone i of f attached at a fresh directory, passed to fn.
// The thread ends with fn, and its namespace and mount with it: the host's
// mount table never changes.
func inPrivateMountNS(tb testing.TB, f *FS, i int, fn func(target string) error) error {
	tb.Helper()
	target := filepath.Join(tb.TempDir(), "trap")
	if err := os.Mkdir(target, 0o755); err != nil {
		return err
	}
	clone, err := f.Clone(i)
	if err != nil {
		return err
	}
	defer clone.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			done <- fmt.Errorf("unshare: %w", err)
			return
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			done <- fmt.Errorf("making / private: %w", err)
			return
		}
		if err := unix.MoveMount(int(clone.Fd()), "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			done <- fmt.Errorf("attaching: %w", err)
			return
		}
		done <- fn(target)
	}()
	return <-done
}

// TestOwnProcessRecorded: accesses by the process serving the trap are
// recorded like any other.
func TestOwnProcessRecorded(t *testing.T) {
	f, r := mountT(t, trapNodes)
	var tid int
	err := inPrivateMountNS(t, f, 0, func(target string) error {
		tid = unix.Gettid()
		var st unix.Stat_t
		if err := unix.Stat(target+"/mine", &st); err != unix.ENOENT {
			return fmt.Errorf("stat: %v, want ENOENT", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got := r.all()
	if len(got) != 1 || got[0].Op != "lookup" || got[0].Path != "/tests/mine" || got[0].PID != tid {
		t.Errorf("records %+v, want one lookup of /tests/mine by %d", got, tid)
	}
}

// BenchmarkLookupRoundTrip is the cost of one recorded access: stat of a
// missing name in a trap directory, a full kernel → trap → kernel round
// trip plus the queued record.
func BenchmarkLookupRoundTrip(b *testing.B) {
	requireFUSE(b)
	f, err := Mount(trapNodes, func(Access) {})
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	err = inPrivateMountNS(b, f, 0, func(target string) error {
		path := target + "/test_outputs.py"
		var st unix.Stat_t
		b.ResetTimer()
		for range b.N {
			if err := unix.Stat(path, &st); err != unix.ENOENT {
				return fmt.Errorf("stat: %v", err)
			}
		}
		b.StopTimer()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if d := f.Dropped(); d != 0 {
		b.Logf("%d records dropped", d)
	}
}

// BenchmarkStatOutsideTrap is the same stat on an ordinary directory, for
// comparison.
func BenchmarkStatOutsideTrap(b *testing.B) {
	path := filepath.Join(b.TempDir(), "test_outputs.py")
	var st unix.Stat_t
	for b.Loop() {
		if err := unix.Stat(path, &st); err != unix.ENOENT {
			b.Fatal(err)
		}
	}
}

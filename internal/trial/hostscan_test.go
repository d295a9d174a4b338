package trial

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The scan finds every file others cannot read and every directory they
// cannot enter, never follows a symlink, and sees what a directory gains
// after it was cached.
func TestRestrictedPaths(t *testing.T) {
	root := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	a := filepath.Join(root, "a")
	for _, d := range []string{"a", "a/sub/deep", "a/priv", "a/pub"} {
		must(os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	must(os.Chmod(filepath.Join(a, "priv"), 0o700))
	must(os.WriteFile(filepath.Join(a, "pub", "f"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(a, "sec"), []byte("x"), 0o600))
	must(os.WriteFile(filepath.Join(a, "priv", "inner"), []byte("x"), 0o644))
	must(os.WriteFile(filepath.Join(a, "sub", "deep", "key"), []byte("x"), 0o640))
	must(os.Symlink("/etc/shadow", filepath.Join(a, "link")))
	cache := filepath.Join(t.TempDir(), "hostscan")

	got, err := restrictedPaths([]string{a, filepath.Join(root, "missing")}, cache)
	must(err)
	want := []string{filepath.Join(a, "priv"), filepath.Join(a, "sec"), filepath.Join(a, "sub", "deep", "key")}
	if !slices.Equal(got, want) {
		t.Fatalf("first scan: %v, want %v", got, want)
	}

	// A restricted file appears deep down: its directory changed.
	time.Sleep(10 * time.Millisecond)
	must(os.WriteFile(filepath.Join(a, "sub", "deep", "new"), []byte("x"), 0o600))
	got, err = restrictedPaths([]string{a}, cache)
	must(err)
	want = append(want, filepath.Join(a, "sub", "deep", "new"))
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("after a new secret: %v, want %v", got, want)
	}

	// A cache file that is not one is ignored, and rewritten.
	must(os.WriteFile(cache, []byte("garbage"), 0o600))
	got, err = restrictedPaths([]string{a}, cache)
	must(err)
	if !slices.Equal(got, want) {
		t.Fatalf("with a garbage cache: %v, want %v", got, want)
	}
}

// restrictedPaths is scanHost with its cache saved: what a trial does in
// prepare and digest together, for the tests of the scan alone.
func restrictedPaths(dirs []string, cacheFile string) ([]string, error) {
	s, out, err := scanHost(dirs, cacheFile)
	if err != nil {
		return nil, err
	}
	if s.changed || len(s.now) != len(s.old) {
		if err := s.save(cacheFile); err != nil {
			return nil, err
		}
	}
	return out, nil
}

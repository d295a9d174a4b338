package trial

import (
	"os"
	"path/filepath"
	"testing"
)

// The host view's digest: stable when nothing changes, moved by any change
// of a name or a content its directory records, and blind to what masked
// files hold.
func TestHostDigest(t *testing.T) {
	root := t.TempDir()
	a := filepath.Join(root, "a")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(a, "sub"), 0o755))
	must(os.WriteFile(filepath.Join(a, "sub", "f"), []byte("one"), 0o644))
	must(os.WriteFile(filepath.Join(a, "secret"), []byte("A"), 0o600))
	must(os.Symlink("sub/f", filepath.Join(a, "link")))
	cacheDir := t.TempDir()
	digest := func() string {
		t.Helper()
		file := filepath.Join(cacheDir, "hostscan")
		s, _, err := scanHost([]string{a}, file)
		must(err)
		d, err := hostDigest(s, []string{a}, filepath.Join(cacheDir, "hashes"), file)
		must(err)
		return d
	}
	d1 := digest()
	if d2 := digest(); d2 != d1 {
		t.Fatalf("digest moved without a change: %s, then %s", d1, d2)
	}
	// A new file: its directory changes, so does the digest.
	must(os.WriteFile(filepath.Join(a, "sub", "g"), []byte("two"), 0o644))
	d3 := digest()
	if d3 == d1 {
		t.Fatal("a new file did not change the digest")
	}
	// The masked file's content is never part of it: change it, and make
	// its directory be read again (a file added and removed).
	must(os.WriteFile(filepath.Join(a, "secret"), []byte("B, a different secret"), 0o600))
	must(os.WriteFile(filepath.Join(a, "tmp"), nil, 0o644))
	must(os.Remove(filepath.Join(a, "tmp")))
	if d4 := digest(); d4 != d3 {
		t.Fatalf("the masked file's content changed the digest: %s, then %s", d3, d4)
	}
	// The same tree from scratch (no cache) gives the same digest.
	cacheDir = t.TempDir()
	if d5 := digest(); d5 != d3 {
		t.Fatalf("a cold digest differs from the cached one: %s vs %s", d5, d3)
	}
}

// A directory that vanishes between the scan of its parent and the walk
// into it (the host changing under a trial) is left out, not an error.
func TestHostDigestToleratesAVanishedDirectory(t *testing.T) {
	root := t.TempDir()
	a := filepath.Join(root, "a")
	if err := os.MkdirAll(filepath.Join(a, "gone"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "hostscan")
	s, _, err := scanHost([]string{a}, file)
	if err != nil {
		t.Fatal(err)
	}
	// Drop the vanished directory's entry as a racing walk would have.
	var kept []scanEntry
	for _, e := range s.now {
		if e.Path != filepath.Join(a, "gone") {
			kept = append(kept, e)
		}
	}
	s.now = kept
	if _, err := hostDigest(s, []string{a}, filepath.Join(t.TempDir(), "hashes"), file); err != nil {
		t.Fatalf("hostDigest: %v", err)
	}
}

// A directory the scan found and that is removed before its own entries
// are digested (another process cleaning up under /etc, say) is digested
// as gone, not an error.
func TestHostDigestToleratesADirectoryRemovedAfterTheScan(t *testing.T) {
	root := t.TempDir()
	a := filepath.Join(root, "a")
	gone := filepath.Join(a, "gone")
	if err := os.MkdirAll(gone, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(gone, "k"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "hostscan")
	s, _, err := scanHost([]string{a}, file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(gone); err != nil {
		t.Fatal(err)
	}
	if _, err := hostDigest(s, []string{a}, filepath.Join(t.TempDir(), "hashes"), file); err != nil {
		t.Fatalf("hostDigest: %v", err)
	}
}

package task

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A cached digest equals the uncached one, follows every change of content
// (even one that keeps size and modification time), and survives a reload.
func TestDigestCached(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "a")
	if err := os.WriteFile(f, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(f, old, old); err != nil {
		t.Fatal(err)
	}
	cachePath := filepath.Join(t.TempDir(), "hashes")
	c, err := OpenHashCache(cachePath)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Digest(dir)
	if got, err := DigestCached(dir, c); err != nil || got != want {
		t.Fatalf("DigestCached = %s, %v; want %s", got, err, want)
	}
	// The file was changed within the racy window (its ctime is now): it
	// must not be remembered yet.
	if len(c.m) != 0 {
		t.Fatalf("a file changed %v ago was cached", time.Since(old))
	}
	c.m = nil
	c, _ = OpenHashCache(cachePath)
	// Pretend the ctime is old by caching under the real key directly.
	fi, _ := os.Lstat(f)
	k, _ := keyOf(fi)
	c.m[k] = [32]byte{1}
	c.dirty = true
	if err := c.Save(); err != nil {
		t.Fatal(err)
	}
	c2, err := OpenHashCache(cachePath)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := DigestCached(dir, c2); got == want {
		t.Fatal("a reloaded cache entry was not used")
	}
	// Rewriting the content with the same size and mtime moves the ctime:
	// the stale entry no longer matches.
	if err := os.WriteFile(f, []byte("two"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(f, old, old); err != nil {
		t.Fatal(err)
	}
	want2, _ := Digest(dir)
	if got, _ := DigestCached(dir, c2); got != want2 || got == want {
		t.Fatalf("after a same-size rewrite: %s, want %s", got, want2)
	}
}

func TestOpenHashCacheRefusesForeignFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hashes")
	if err := os.WriteFile(p, []byte("SQLite format 3\x00..."), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := OpenHashCache(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a proctor hash cache") {
		t.Fatalf("OpenHashCache: %v", err)
	}
	if b, _ := os.ReadFile(p); !strings.HasPrefix(string(b), "SQLite") {
		t.Fatal("the foreign file was overwritten")
	}
}

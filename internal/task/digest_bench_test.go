package task

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchTree makes a tree of n files of size bytes in dirs of 100.
func benchTree(b *testing.B, n, size int) string {
	b.Helper()
	root := b.TempDir()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i)
	}
	for i := 0; i < n; i++ {
		dir := filepath.Join(root, fmt.Sprintf("d%04d", i/100))
		if i%100 == 0 {
			if err := os.Mkdir(dir, 0o755); err != nil {
				b.Fatal(err)
			}
		}
		data[0] = byte(i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i%100)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// BenchmarkDigest50k digests a 50,000-file tree (4 KiB files): cold (every
// byte read and hashed) and cached (the file hashes come from a HashCache
// whose entries match, so a digest is a walk and a stat per entry).
func BenchmarkDigest50k(b *testing.B) {
	root := benchTree(b, 50_000, 4096)
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			if _, err := Digest(root); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		c, err := OpenHashCache(filepath.Join(b.TempDir(), "hashes"))
		if err != nil {
			b.Fatal(err)
		}
		// Fill the cache as if the files were older than the racy window.
		if _, err := DigestCached(root, c); err != nil {
			b.Fatal(err)
		}
		fillCache(b, root, c)
		for b.Loop() {
			if _, err := DigestCached(root, c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// fillCache stores every file's hash as if it had been hashed long after
// its last change.
func fillCache(b *testing.B, root string, c *HashCache) {
	b.Helper()
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return err
		}
		k, ok := keyOf(fi)
		if ok {
			c.m[k] = [32]byte{}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
}

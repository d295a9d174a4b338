package gitbase

import (
	"os"
	"path/filepath"
	"testing"
)

// The reader of reftable tables never panics, never reads past its input
// and never loops, whatever the bytes; seeded with tables real git wrote.
func FuzzReftableFind(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "reftable", "*.ref"))
	if len(seeds) == 0 {
		f.Fatal("no seed tables")
	}
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "refs/heads/main")
		f.Add(b, "HEAD")
		f.Add(b, "refs/tags/v1.0")
	}
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		for _, hexLen := range []int{40, 64} {
			reftableFind(data, name, hexLen)
		}
	})
}

// The seed tables read as git wrote them: HEAD a symbolic ref to main, the
// deleted branch a deletion record.
func TestReftableSeeds(t *testing.T) {
	dir := filepath.Join("testdata", "reftable")
	b, err := os.ReadFile(filepath.Join(dir, "0x000000000001-0x000000000006-f717ef14.ref"))
	if err != nil {
		t.Fatal(err)
	}
	rec, ok, err := reftableFind(b, "HEAD", 40)
	if err != nil || !ok || rec.kind != 3 || string(rec.value) != "refs/heads/main" {
		t.Errorf("HEAD: %+v %v %v", rec, ok, err)
	}
	rec, ok, err = reftableFind(b, "refs/tags/v1.0", 40)
	if err != nil || !ok || rec.kind != 2 || len(rec.value) != 40 {
		t.Errorf("annotated tag: %+v %v %v", rec, ok, err)
	}
	if _, ok, err := reftableFind(b, "refs/tags/v9", 40); ok || err != nil {
		t.Errorf("a missing tag: %v %v", ok, err)
	}
	b, _ = os.ReadFile(filepath.Join(dir, "0x000000000007-0x000000000007-7cf9034c.ref"))
	if rec, ok, err := reftableFind(b, "refs/heads/side", 40); err != nil || !ok || rec.kind != 0 {
		t.Errorf("deleted branch: %+v %v %v", rec, ok, err)
	}
	for _, cut := range []int{0, 10, 30, 60, len(b) - 1} {
		reftableFind(b[:cut], "refs/heads/side", 40) // truncated: no panic
	}
}

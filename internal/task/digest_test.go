package task

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// refDigest recomputes a digest straight from the encoding documented on
// Digest, sequentially and with none of Digest's code, so that the two can
// be checked against each other.
func refDigest(t testing.TB, dir string) string {
	t.Helper()
	var tree func(p string) [32]byte
	tree = func(p string) [32]byte {
		ents, err := os.ReadDir(p)
		if err != nil {
			t.Fatal(err)
		}
		names := make([]string, 0, len(ents))
		for _, e := range ents {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		var buf bytes.Buffer
		buf.WriteString("proctor-tree-v1\x00")
		for _, n := range names {
			cp := filepath.Join(p, n)
			fi, err := os.Lstat(cp)
			if err != nil {
				t.Fatal(err)
			}
			var kind byte
			var h [32]byte
			mode := uint32(fi.Mode().Perm())
			if fi.Mode()&fs.ModeSetuid != 0 {
				mode |= 0o4000
			}
			if fi.Mode()&fs.ModeSetgid != 0 {
				mode |= 0o2000
			}
			if fi.Mode()&fs.ModeSticky != 0 {
				mode |= 0o1000
			}
			switch {
			case fi.Mode().IsRegular():
				kind = 'f'
				data, err := os.ReadFile(cp)
				if err != nil {
					t.Fatal(err)
				}
				h = sha256.Sum256(data)
			case fi.IsDir():
				kind = 'd'
				h = tree(cp)
			case fi.Mode()&fs.ModeSymlink != 0:
				kind = 'l'
				mode = 0
				target, err := os.Readlink(cp)
				if err != nil {
					t.Fatal(err)
				}
				h = sha256.Sum256([]byte(target))
			default:
				t.Fatalf("refDigest: special file %s", cp)
			}
			buf.WriteByte(kind)
			buf.Write(binary.BigEndian.AppendUint32(nil, mode))
			buf.Write(binary.BigEndian.AppendUint64(nil, uint64(len(n))))
			buf.WriteString(n)
			buf.Write(h[:])
		}
		return sha256.Sum256(buf.Bytes())
	}
	h := tree(dir)
	return "sha256:" + hex.EncodeToString(h[:])
}

// sampleTree writes a small tree with every kind of entry and fixed modes.
func sampleTree(t testing.TB, dir string) {
	t.Helper()
	writeTree(t, dir, files{
		"task.toml":            "[agent]\ntimeout_sec = 10\n",
		"instruction.md":       "Do it.\n",
		"tests/test.sh":        "#!/bin/sh\nexit 0\n",
		"environment/empty/":   "",
		"environment/link":     "->../tests/test.sh",
		"environment/dangling": "->/nowhere",
		"z/ñame with space":    "x",
	})
	for p, m := range map[string]fs.FileMode{
		".": 0o755, "task.toml": 0o644, "instruction.md": 0o600, "tests": 0o755, "tests/test.sh": 0o755,
		"environment": 0o750, "environment/empty": 0o700, "z": 0o755, "z/ñame with space": 0o444,
	} {
		if err := os.Chmod(filepath.Join(dir, p), m); err != nil {
			t.Fatal(err)
		}
	}
}

// goldenSample is Digest of sampleTree, also computed by a separate Python
// script written from Digest's documentation alone. It pins the encoding: if
// it changes, every recorded digest changes with it, so bump treeTag and say
// so.
const goldenSample = "sha256:f45dbd2df356d708c1919dacdb2965c9511f06c8829890eee4cafa9856f6737e"

func TestDigestEncoding(t *testing.T) {
	dir := t.TempDir()
	sampleTree(t, dir)
	got, err := Digest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if ref := refDigest(t, dir); got != ref {
		t.Errorf("Digest = %s, the documented encoding gives %s", got, ref)
	}
	if got != goldenSample {
		t.Errorf("Digest = %s, want the recorded %s", got, goldenSample)
	}

	t.Run("empty directory", func(t *testing.T) {
		got, err := Digest(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte("proctor-tree-v1\x00"))
		if want := "sha256:" + hex.EncodeToString(sum[:]); got != want {
			t.Errorf("Digest(empty) = %s, want %s", got, want)
		}
	})

	t.Run("many files", func(t *testing.T) {
		dir := t.TempDir()
		fs := files{}
		for i := range 300 {
			fs[fmt.Sprintf("d%d/f%d", i%7, i)] = strings.Repeat(fmt.Sprint(i), i*37)
		}
		writeTree(t, dir, fs)
		got, err := Digest(dir)
		if err != nil {
			t.Fatal(err)
		}
		if ref := refDigest(t, dir); got != ref {
			t.Errorf("Digest = %s, reference %s", got, ref)
		}
	})
}

func TestDigestChanges(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, dir string)
	}{
		{"one byte", func(t *testing.T, dir string) { write(t, filepath.Join(dir, "instruction.md"), "Do it!\n") }},
		{"appended byte", func(t *testing.T, dir string) { write(t, filepath.Join(dir, "instruction.md"), "Do it.\n\n") }},
		{"executable bit", func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, "task.toml"), 0o744) }},
		{"read bit", func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, "instruction.md"), 0o400) }},
		{"setuid bit", func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, "tests/test.sh"), 0o755|fs.ModeSetuid) }},
		{"directory mode", func(t *testing.T, dir string) { chmod(t, filepath.Join(dir, "environment/empty"), 0o755) }},
		{"file name", func(t *testing.T, dir string) {
			rename(t, filepath.Join(dir, "instruction.md"), filepath.Join(dir, "instruction.MD"))
		}},
		{"directory name", func(t *testing.T, dir string) { rename(t, filepath.Join(dir, "z"), filepath.Join(dir, "y")) }},
		{"file moved to another directory", func(t *testing.T, dir string) {
			rename(t, filepath.Join(dir, "instruction.md"), filepath.Join(dir, "tests/instruction.md"))
		}},
		{"symlink target", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "environment/link")
			remove(t, p)
			symlink(t, "../tests/test.sh ", p)
		}},
		{"symlink for file with the same content", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "environment/link")
			remove(t, p)
			write(t, p, "../tests/test.sh")
		}},
		{"new empty directory", func(t *testing.T, dir string) { mkdir(t, filepath.Join(dir, "environment/empty/new")) }},
		{"new empty file", func(t *testing.T, dir string) { write(t, filepath.Join(dir, "new"), "") }},
		{"removed empty directory", func(t *testing.T, dir string) { remove(t, filepath.Join(dir, "environment/empty")) }},
	}
	base := t.TempDir()
	sampleTree(t, base)
	before, err := Digest(base)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := Digest(base); err != nil || again != before {
		t.Fatalf("second Digest = %s, %v; want %s", again, err, before)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			sampleTree(t, dir)
			if d, err := Digest(dir); err != nil || d != before {
				t.Fatalf("fresh copy: Digest = %s, %v; want %s", d, err, before)
			}
			tt.change(t, dir)
			after, err := Digest(dir)
			if err != nil {
				t.Fatal(err)
			}
			if after == before {
				t.Errorf("digest unchanged: %s", after)
			}
			if ref := refDigest(t, dir); after != ref {
				t.Errorf("Digest = %s, reference %s", after, ref)
			}
		})
	}
}

func TestDigestIgnoresTimesAndOrder(t *testing.T) {
	a := t.TempDir()
	sampleTree(t, a)
	// The second copy is made later, with its files written in another
	// order and given other times.
	b := t.TempDir()
	sampleTree(t, b)
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	err := filepath.WalkDir(b, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		return os.Chtimes(p, old, old)
	})
	if err != nil {
		t.Fatal(err)
	}
	da, err := Digest(a)
	if err != nil {
		t.Fatal(err)
	}
	db, err := Digest(b)
	if err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Errorf("copies differ: %s and %s", da, db)
	}
	// Through a symlink to the root, the same.
	link := filepath.Join(t.TempDir(), "link")
	symlink(t, a, link)
	if dl, err := Digest(link); err != nil || dl != da {
		t.Errorf("Digest(link to root) = %s, %v; want %s", dl, err, da)
	}
}

func TestDigestErrors(t *testing.T) {
	tmp := t.TempDir()
	write(t, filepath.Join(tmp, "file"), "x")
	tests := []struct {
		name string
		dir  string
		is   error
	}{
		{"missing", filepath.Join(tmp, "nope"), ErrMissing},
		{"a file", filepath.Join(tmp, "file"), ErrNotDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Digest(tt.dir)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, tt.is) {
				t.Fatalf("Digest(%q) = %v, want an *Error matching %v", tt.dir, err, tt.is)
			}
		})
	}
}

func BenchmarkDigest(b *testing.B) {
	dir := b.TempDir()
	chunk := bytes.Repeat([]byte("proctor "), 1<<17) // 1 MiB
	var total int64
	for i := range 64 {
		p := filepath.Join(dir, fmt.Sprintf("d%d", i%8), fmt.Sprintf("f%d", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, chunk, 0o644); err != nil {
			b.Fatal(err)
		}
		total += int64(len(chunk))
	}
	b.SetBytes(total)
	for b.Loop() {
		if _, err := Digest(dir); err != nil {
			b.Fatal(err)
		}
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, p string, m fs.FileMode) {
	t.Helper()
	if err := os.Chmod(p, m); err != nil {
		t.Fatal(err)
	}
}

func rename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	if err := os.Mkdir(p, 0o755); err != nil {
		t.Fatal(err)
	}
}

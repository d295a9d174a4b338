package gitbase

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Finding objects in src without git, for the cached path: a full object id
// must be present before a cached copy is handed out for it (else a copy
// built from another repository would answer for a repository that lacks the
// commit), and an abbreviated id must match exactly one object, as git
// requires. Only loose objects and version-2 pack indexes are read, in src's
// object directory and its alternates; anything else makes the answer
// "unsure" and the caller asks git.

// maxAltDepth is how deep git follows alternates of alternates.
const maxAltDepth = 5

// objectDirs returns src's object directory followed by its alternates,
// recursively, as git would read them. sure is false when an alternates file
// holds something not understood here (a quoted path).
func (r *srcRepo) objectDirs() (dirs []string, sure bool) {
	seen := map[string]bool{}
	sure = true
	var walk func(dir string, depth int)
	walk = func(dir string, depth int) {
		dir = filepath.Clean(dir)
		if seen[dir] || depth > maxAltDepth {
			return
		}
		seen[dir] = true
		dirs = append(dirs, dir)
		b, err := readSmall(filepath.Join(dir, "info", "alternates"))
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				sure = false
			}
			return
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' {
				continue
			}
			if line[0] == '"' {
				sure = false
				continue
			}
			if !filepath.IsAbs(line) {
				line = filepath.Join(dir, line)
			}
			walk(line, depth+1)
		}
	}
	walk(r.objects, 0)
	return dirs, sure
}

// findObject returns the one object whose lowercase hex id starts with
// prefix (at least 4 digits, at most a full id). ok is false when there is
// none, more than one, or the store cannot be read with certainty.
func (r *srcRepo) findObject(prefix string) (oid string, ok bool) {
	if len(prefix) < 4 || len(prefix) > r.hexLen || !isHex(prefix) {
		return "", false
	}
	prefix = strings.ToLower(prefix)
	dirs, sure := r.objectDirs()
	if !sure {
		return "", false
	}
	found := map[string]bool{}
	for _, dir := range dirs {
		if err := findLoose(dir, prefix, r.hexLen, found); err != nil {
			return "", false
		}
		idxs, err := filepath.Glob(filepath.Join(dir, "pack", "pack-*.idx"))
		if err != nil {
			return "", false
		}
		for _, idx := range idxs {
			if err := searchIdx(idx, prefix, r.hexLen/2, found); err != nil {
				return "", false
			}
		}
		if len(found) > 1 {
			return "", false
		}
	}
	for id := range found {
		return id, true
	}
	return "", false
}

// findLoose adds the loose objects in dir matching prefix to found.
func findLoose(dir, prefix string, hexLen int, found map[string]bool) error {
	sub := filepath.Join(dir, prefix[:2])
	if len(prefix) == hexLen {
		st, err := os.Stat(filepath.Join(sub, prefix[2:]))
		if err == nil && st.Mode().IsRegular() {
			found[prefix] = true
			return nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	ents, err := os.ReadDir(sub)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		if len(name) == hexLen-2 && strings.HasPrefix(name, prefix[2:]) && isHex(name) {
			found[prefix[:2]+strings.ToLower(name)] = true
		}
	}
	return nil
}

// idxHeaderLen is the size of a version-2 pack index's header: magic,
// version and fan-out table; the sorted object names follow.
const idxHeaderLen = 8 + 256*4

// idxFanout reads the header of a version-2 pack index: the cumulative
// object counts by first byte of name.
func idxFanout(r io.ReaderAt) (fan [256]uint32, err error) {
	var head [idxHeaderLen]byte
	if _, err := r.ReadAt(head[:], 0); err != nil {
		return fan, fmt.Errorf("pack index: %w", err)
	}
	if !bytes.Equal(head[:4], []byte("\377tOc")) || binary.BigEndian.Uint32(head[4:8]) != 2 {
		return fan, errors.New("pack index: not version 2")
	}
	for b := range fan {
		fan[b] = binary.BigEndian.Uint32(head[8+4*b:])
	}
	return fan, nil
}

// searchIdx adds the objects of a version-2 pack index matching prefix to
// found, stopping once two distinct objects are known. It reads the fan-out
// table and about log2(n) names, never the whole index.
//
// Layout: "\377tOc", version 2 (big-endian), 256 cumulative counts by first
// byte, then the sorted object names.
func searchIdx(path, prefix string, hashLen int, found map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // repacked away meanwhile
		}
		return err
	}
	defer f.Close()
	fan, err := idxFanout(f)
	if err != nil {
		return err
	}
	fanout := func(b int) uint32 { return fan[b] }
	first, err := hex.DecodeString(prefix[:2])
	if err != nil {
		return err
	}
	lo, hi := uint32(0), fanout(int(first[0]))
	if first[0] > 0 {
		lo = fanout(int(first[0]) - 1)
	}
	if lo > hi {
		return errors.New("pack index: bad fan-out table")
	}
	// The smallest name that can match: the prefix padded with zeros.
	pad := prefix + strings.Repeat("0", 2*hashLen-len(prefix))
	target, err := hex.DecodeString(pad)
	if err != nil {
		return err
	}
	name := make([]byte, hashLen)
	var readErr error
	read := func(i uint32) []byte {
		if _, err := f.ReadAt(name, idxHeaderLen+int64(i)*int64(hashLen)); err != nil && readErr == nil {
			readErr = err
		}
		return name
	}
	n := sort.Search(int(hi-lo), func(j int) bool { return bytes.Compare(read(lo+uint32(j)), target) >= 0 })
	for i := lo + uint32(n); i < hi && readErr == nil; i++ {
		id := hex.EncodeToString(read(i))
		if readErr != nil || !strings.HasPrefix(id, prefix) {
			break
		}
		found[id] = true
		if len(found) > 1 {
			break
		}
	}
	return readErr
}

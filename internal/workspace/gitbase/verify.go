package gitbase

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The post-condition. However the copy was built, and whatever shape src
// had (promisor packs, kept or cruft packs, alternates, a multi-pack-index,
// bitmaps, commit-graphs, packed refs), a copy is published only if:
//
//   - its .git holds nothing but HEAD (on refs/heads/main), config (the
//     keys git init writes), index, the shallow file when src is shallow,
//     the one ref file refs/heads/main, and under objects/ loose objects
//     and packs as pack-X.pack, pack-X.idx and pack-X.rev: no .promisor,
//     .keep, .mtimes or .bitmap file, no multi-pack-index, nothing in
//     objects/info (alternates, packs, commit-graphs), no symlink;
//   - the objects it holds, every entry of every pack index and every loose
//     object, are exactly the objects git, in the copy alone, finds
//     reachable from base: none more, none fewer;
//   - every blob the index names and every commit the shallow file names
//     is one of them;
//   - every submodule's copy (a gitlink of the index) meets the same.
//
// Anything else is a *LeakError and the build is discarded. The check reads
// the files itself and runs git only in the copy, with no alternates.

// copyConfigKeys are the keys git init may write into a new repository's
// config.
var copyConfigKeys = map[string]bool{
	"core.repositoryformatversion": true, "core.filemode": true, "core.bare": true,
	"core.logallrefupdates": true, "core.symlinks": true, "core.ignorecase": true,
	"core.precomposeunicode": true, "extensions.objectformat": true,
}

// verifyCopy checks the post-condition on the repository at repoDir, which
// must hold base commit and nothing else; shallow tells whether src was a
// shallow clone (the copy may then have a shallow file).
func verifyCopy(ctx context.Context, g *git, repoDir string, own []string, commit string, hexLen int, shallow bool) error {
	gitDir := filepath.Join(repoDir, ".git")
	leak := func(format string, args ...any) error {
		return &LeakError{Copy: gitDir, Detail: fmt.Sprintf(format, args...)}
	}
	idxs, loose, err := copyFiles(gitDir, hexLen, shallow)
	if err != nil {
		return leak("%v", err)
	}
	if b, err := readSmall(filepath.Join(gitDir, "HEAD")); err != nil || string(b) != "ref: refs/heads/main\n" {
		return leak("HEAD is %q (%v), not refs/heads/main", b, err)
	}
	if b, err := readSmall(filepath.Join(gitDir, "refs", "heads", "main")); err != nil || string(b) != commit+"\n" {
		return leak("refs/heads/main is %q (%v), not %s", b, err, commit)
	}
	out, err := g.run(ctx, repoDir, own, "config", "--file", filepath.Join(gitDir, "config"), "--null", "--list")
	if err != nil {
		return leak("reading config: %v", err)
	}
	for _, kv := range strings.Split(string(out), "\x00") {
		if k, _, _ := strings.Cut(kv, "\n"); kv != "" && !copyConfigKeys[k] {
			return leak("config sets %s", k)
		}
	}

	held := map[string]bool{}
	for _, idx := range idxs {
		if err := readIdx(idx, hexLen/2, held); err != nil {
			return leak("%s: %v", idx, err)
		}
		// The pack must be exactly its objects: git pack-objects copies a
		// reused object's bytes as the source's index delimits them, and
		// so would copy whatever a crafted source put between two objects.
		// index-pack parses every object, end to end, and checks the pack
		// against the index. (The path is absolute: never an option.)
		pack := strings.TrimSuffix(idx, ".idx") + ".pack"
		if _, err := g.run(ctx, repoDir, own, "index-pack", "--verify", pack); err != nil {
			return leak("%s is not exactly its objects: %v", filepath.Base(pack), err)
		}
	}
	for _, id := range loose {
		held[id] = true
	}
	out, err = g.run(ctx, repoDir, own, "rev-list", "--objects", "--no-object-names", commit)
	if err != nil {
		return leak("listing the objects reachable from %s in the copy: %v", commit, err)
	}
	reach := make(map[string]bool, len(held))
	for _, l := range strings.Split(string(out), "\n") {
		if l == "" {
			continue
		}
		if len(l) != hexLen || !isHex(l) {
			return leak("git rev-list: unexpected line %q", l)
		}
		reach[l] = true
	}
	for id := range held {
		if !reach[id] {
			return leak("it holds object %s, which %s does not reach", id, commit)
		}
	}
	for id := range reach {
		if !held[id] {
			return leak("it lacks object %s", id)
		}
	}

	out, err = g.run(ctx, repoDir, own, "ls-files", "--stage", "-z")
	if err != nil {
		return leak("reading the index: %v", err)
	}
	var links []gitlink
	for _, rec := range strings.Split(string(out), "\x00") {
		if rec == "" {
			continue
		}
		meta, path, _ := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		switch {
		case len(f) != 3 || f[2] != "0":
			return leak("index entry %q", rec)
		case f[0] == "160000": // a gitlink names a submodule's commit: its copy is checked below
			links = append(links, gitlink{path: path, commit: f[1]})
		case !reach[f[1]]:
			return leak("the index names %s (%s), which %s does not reach", f[1], path, commit)
		}
	}
	if shallow {
		b, err := readSmallLimit(filepath.Join(gitDir, "shallow"), 64<<20)
		if err != nil && !os.IsNotExist(err) {
			return leak("reading shallow: %v", err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" && !reach[l] {
				return leak("the shallow file names %q, which %s does not reach", l, commit)
			}
		}
	}
	// Every submodule's copy, and through its own check, theirs.
	for _, l := range links {
		dir := filepath.Join(repoDir, filepath.FromSlash(l.path))
		subOwn := []string{"GIT_DIR=" + filepath.Join(dir, ".git"), "GIT_WORK_TREE=" + dir}
		_, serr := os.Stat(filepath.Join(dir, ".git", "shallow"))
		if err := verifyCopy(ctx, g, dir, subOwn, l.commit, len(l.commit), serr == nil); err != nil {
			return err
		}
	}
	return nil
}

// copyFiles walks the .git of a copy and returns its pack indexes and
// loose object ids; anything that is not part of a copy is an error.
func copyFiles(gitDir string, hexLen int, shallow bool) (idxs, loose []string, err error) {
	top := map[string]bool{"HEAD": false, "config": false, "index": false, "objects": true, "refs": true}
	if shallow {
		top["shallow"] = false
	}
	ents, err := readDir(gitDir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		dir, ok := top[e.name]
		if !ok || e.dir != dir {
			return nil, nil, fmt.Errorf("unexpected %s", e.describe(".git"))
		}
	}
	// refs: the directories git init makes, and the one branch.
	var walkRefs func(rel string) error
	walkRefs = func(rel string) error {
		ents, err := readDir(filepath.Join(gitDir, rel))
		if err != nil {
			return err
		}
		for _, e := range ents {
			p := rel + "/" + e.name
			switch {
			case e.dir && (p == "refs/heads" || p == "refs/tags"):
				if err := walkRefs(p); err != nil {
					return err
				}
			case !e.dir && e.regular && p == "refs/heads/main":
			default:
				return fmt.Errorf("unexpected %s", e.describe(rel))
			}
		}
		return nil
	}
	if err := walkRefs("refs"); err != nil {
		return nil, nil, err
	}

	objects := filepath.Join(gitDir, "objects")
	ents, err = readDir(objects)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		switch {
		case e.dir && e.name == "info":
			info, err := readDir(filepath.Join(objects, "info"))
			if err != nil {
				return nil, nil, err
			}
			if len(info) > 0 {
				return nil, nil, fmt.Errorf("unexpected %s", info[0].describe("objects/info"))
			}
		case e.dir && e.name == "pack":
			packs, err := readDir(filepath.Join(objects, "pack"))
			if err != nil {
				return nil, nil, err
			}
			have := map[string]bool{}
			for _, p := range packs {
				have[p.name] = p.regular
			}
			for _, p := range packs {
				stem, ext, ok := packName(p.name, hexLen)
				if !ok || !p.regular {
					return nil, nil, fmt.Errorf("unexpected %s", p.describe("objects/pack"))
				}
				if !have[stem+".pack"] || !have[stem+".idx"] {
					return nil, nil, fmt.Errorf("objects/pack/%s has no matching .pack and .idx", p.name)
				}
				if ext == ".idx" {
					idxs = append(idxs, filepath.Join(objects, "pack", p.name))
				}
			}
		case e.dir && len(e.name) == 2 && isLowerHex(e.name):
			files, err := readDir(filepath.Join(objects, e.name))
			if err != nil {
				return nil, nil, err
			}
			for _, f := range files {
				if !f.regular || len(f.name) != hexLen-2 || !isLowerHex(f.name) {
					return nil, nil, fmt.Errorf("unexpected %s", f.describe("objects/"+e.name))
				}
				loose = append(loose, e.name+f.name)
			}
		default:
			return nil, nil, fmt.Errorf("unexpected %s", e.describe("objects"))
		}
	}
	return idxs, loose, nil
}

// packName splits "pack-<id>.<ext>" for the extensions a copy may hold.
func packName(name string, hexLen int) (stem, ext string, ok bool) {
	ext = filepath.Ext(name)
	stem = strings.TrimSuffix(name, ext)
	id, found := strings.CutPrefix(stem, "pack-")
	if !found || len(id) != hexLen || !isLowerHex(id) {
		return "", "", false
	}
	switch ext {
	case ".pack", ".idx", ".rev":
		return stem, ext, true
	}
	return "", "", false
}

type dirEnt struct {
	name         string
	dir, regular bool
	mode         os.FileMode
}

func (e dirEnt) describe(parent string) string {
	kind := "file"
	switch {
	case e.dir:
		kind = "directory"
	case !e.regular:
		kind = "special file " + e.mode.Type().String()
	}
	return fmt.Sprintf("%s %s/%s", kind, parent, e.name)
}

// readDir lists dir without following symbolic links, sorted by name.
func readDir(dir string) ([]dirEnt, error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]dirEnt, 0, len(des))
	for _, d := range des {
		out = append(out, dirEnt{name: d.Name(), dir: d.Type().IsDir(), regular: d.Type().IsRegular(), mode: d.Type()})
	}
	slices.SortFunc(out, func(a, b dirEnt) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// readIdx adds every object name of a version-2 pack index to ids.
func readIdx(path string, hashLen int, ids map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fan, err := idxFanout(f)
	if err != nil {
		return err
	}
	n := fan[255]
	st, err := f.Stat()
	if err != nil {
		return err
	}
	// Names, CRCs and offsets at least: a count the file cannot hold is a
	// damaged index, not an allocation to make.
	if int64(n)*int64(hashLen+8) > st.Size() {
		return fmt.Errorf("pack index: %d objects cannot fit in %d bytes", n, st.Size())
	}
	names := make([]byte, int(n)*hashLen)
	if _, err := f.ReadAt(names, idxHeaderLen); err != nil {
		return fmt.Errorf("pack index: %w", err)
	}
	for i := range int(n) {
		ids[hex.EncodeToString(names[i*hashLen:(i+1)*hashLen])] = true
	}
	return nil
}

func isLowerHex(s string) bool {
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}

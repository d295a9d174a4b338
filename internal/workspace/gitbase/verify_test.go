package gitbase

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestPostConditionRefusesLeaks: whatever the build did, a copy that holds
// one object more than base reaches, or any file in .git that could name or
// hold another, is refused and never published; nothing of it stays in the
// cache, and the next build (without the fault) succeeds. Each fault is
// injected just before the check, as a git that misbehaved would leave it:
// removing the check makes every case fail.
func TestPostConditionRefusesLeaks(t *testing.T) {
	requireGit(t)
	h := hostileRepo(t)
	later := h.forbidden["later commit"]
	objects := filepath.Join(h.src, ".git", "objects")
	faults := map[string]func(t *testing.T, repo string){
		"a loose object base does not reach": func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, "extra.txt"), "not in base\n", 0o644)
			tgit(t, repo, "hash-object", "-w", "extra.txt")
			os.Remove(filepath.Join(repo, "extra.txt"))
		},
		"a later commit's pack": func(t *testing.T, repo string) {
			tgitIn(t, repo, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+objects, "pack-objects", "-q", "--revs", ".git/objects/pack/pack", later+"\n")
		},
		"a .promisor file": func(t *testing.T, repo string) { touchPackSibling(t, repo, ".promisor") },
		"a .keep file":     func(t *testing.T, repo string) { touchPackSibling(t, repo, ".keep") },
		"a .bitmap file":   func(t *testing.T, repo string) { touchPackSibling(t, repo, ".bitmap") },
		"an alternates file": func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, ".git", "objects", "info", "alternates"), objects+"\n", 0o644)
		},
		"a commit-graph": func(t *testing.T, repo string) {
			tgit(t, repo, "commit-graph", "write", "--reachable")
		},
		"a multi-pack-index": func(t *testing.T, repo string) {
			tgit(t, repo, "multi-pack-index", "write")
		},
		"a second ref": func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, ".git", "refs", "tags", "later"), later+"\n", 0o644)
		},
		"packed-refs": func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, ".git", "packed-refs"), later+" refs/tags/v2.0\n", 0o644)
		},
		"a remote in config": func(t *testing.T, repo string) {
			tgit(t, repo, "config", "remote.origin.url", "https://example.invalid/fixed")
		},
		"a shallow file naming a commit not in the copy": func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, ".git", "shallow"), later+"\n", 0o644)
		},
		"a symlink in objects": func(t *testing.T, repo string) {
			if err := os.Symlink(objects, filepath.Join(repo, ".git", "objects", "src")); err != nil {
				t.Fatal(err)
			}
		},
		"a missing object": func(t *testing.T, repo string) {
			packs, _ := filepath.Glob(filepath.Join(repo, ".git", "objects", "pack", "pack-*"))
			for _, p := range packs {
				os.Remove(p)
			}
			writeFile(t, filepath.Join(repo, "f"), "x\n", 0o644)
			tgit(t, repo, "hash-object", "-w", "f") // something, not everything
			os.Remove(filepath.Join(repo, "f"))
		},
	}
	for name, fault := range faults {
		t.Run(name, func(t *testing.T) {
			cache := t.TempDir()
			testHookBeforeVerify = func(repo string) { fault(t, repo) }
			_, _, err := Prepare(context.Background(), h.src, h.base, cache)
			testHookBeforeVerify = nil
			var le *LeakError
			if !errors.As(err, &le) || !errors.Is(err, ErrLeak) {
				t.Fatalf("Prepare = %v, want a *LeakError", err)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "discarded") {
				t.Errorf("message %q", msg)
			}
			ents, _ := os.ReadDir(cache)
			for _, e := range ents {
				if e.Name() != locksDir {
					t.Errorf("left in the cache: %s", e.Name())
				}
			}
			dir, _, err := Prepare(context.Background(), h.src, h.base, cache)
			if err != nil {
				t.Fatalf("the build without the fault: %v", err)
			}
			checkCopy(t, h, dir)
		})
	}
}

// TestPrepareIgnoresOldCacheEntries: a copy in the cache from before the
// post-condition existed (an older marker), however complete it looks, is
// never served: it is rebuilt and checked.
func TestPrepareIgnoresOldCacheEntries(t *testing.T) {
	requireGit(t)
	h := hostileRepo(t)
	cache := t.TempDir()
	dir, _, err := Prepare(context.Background(), h.src, h.base, cache)
	if err != nil {
		t.Fatal(err)
	}
	// Make it what an old build left: every object of src in a promisor
	// pack beside base's, and the old marker.
	later := h.forbidden["later commit"]
	tgitIn(t, dir, "GIT_ALTERNATE_OBJECT_DIRECTORIES="+filepath.Join(h.src, ".git", "objects"), "pack-objects", "-q", "--revs", ".git/objects/pack/pack", later+"\n")
	touchPackSibling(t, dir, ".promisor")
	entry := filepath.Dir(dir)
	writeFile(t, filepath.Join(entry, markerName), "proctor-gitbase-cache 1\ncommit "+h.base+"\n", 0o644)

	again, _, err := Prepare(context.Background(), h.src, h.base, cache)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tgitErr(again, nil, "cat-file", "-t", later); err == nil {
		t.Fatalf("the old entry was served: the later commit is there (%s)", out)
	}
	checkCopy(t, h, again)
}

// touchPackSibling adds a file with ext beside the copy's first pack.
func touchPackSibling(t *testing.T, repo, ext string) {
	t.Helper()
	packs, _ := filepath.Glob(filepath.Join(repo, ".git", "objects", "pack", "pack-*.pack"))
	if len(packs) == 0 {
		t.Fatal("no pack")
	}
	writeFile(t, strings.TrimSuffix(packs[0], ".pack")+ext, "", 0o644)
}

// tgitIn runs git in repo with one more environment entry and stdin.
func tgitIn(t *testing.T, repo, env string, args ...string) {
	t.Helper()
	stdin := args[len(args)-1]
	args = args[:len(args)-1]
	g := newGit(testGitBin, t.TempDir())
	own := []string{"GIT_DIR=" + filepath.Join(repo, ".git"), "GIT_WORK_TREE=" + repo, env}
	if _, err := g.runInput(context.Background(), repo, own, []byte(stdin), args...); err != nil {
		t.Fatal(err)
	}
}

// TestPrepareRefusesBytesBetweenObjects: a source whose pack holds, between
// the compressed objects of base, bytes that are no object (here the later
// fix, in clear), with an index that vouches for them (its CRCs cover the
// gap). git pack-objects copies such spans verbatim when it reuses the
// source's objects; the copy must not carry them.
func TestPrepareRefusesBytesBetweenObjects(t *testing.T) {
	requireGit(t)
	h := hostileRepo(t)
	secret := tgitRaw(t, h.src, "cat-file", "blob", h.forbidden["fix blob"])
	if !strings.Contains(secret, secrets[0]) {
		t.Fatalf("setup: the later commit does not show the fix:\n%s", secret)
	}
	src := filepath.Join(t.TempDir(), "gap")
	tgit(t, filepath.Dir(src), "init", "-q", src)
	pack, idx := gapPack(t, h.src, h.base, []byte(secret))
	packDir := filepath.Join(src, ".git", "objects", "pack")
	sum := hex.EncodeToString(pack[len(pack)-20:])
	writeFile(t, filepath.Join(packDir, "pack-"+sum+".pack"), string(pack), 0o444)
	writeFile(t, filepath.Join(packDir, "pack-"+sum+".idx"), string(idx), 0o444)
	tgit(t, src, "update-ref", "refs/heads/main", h.base)
	if got := tgit(t, src, "rev-list", "--objects", "--all"); len(lines(got)) != len(h.objects) {
		t.Fatalf("setup: the crafted repository holds %d objects, base reaches %d", len(lines(got)), len(h.objects))
	}

	cache := t.TempDir()
	dir, _, err := Prepare(context.Background(), src, h.base, cache)
	if err == nil {
		// A copy may be made only if it holds nothing of the gap.
		grepTree(t, dir, h)
		return
	}
	var le *LeakError
	if !errors.As(err, &le) || !strings.Contains(le.Detail, "is not exactly its objects") {
		t.Fatalf("Prepare = %v, want a copy without the gap or a *LeakError naming the pack", err)
	}
	// The same source without the gap is copied: the check refuses the
	// crafted pack, not every pack.
	clean := filepath.Join(t.TempDir(), "clean")
	tgit(t, filepath.Dir(clean), "init", "-q", clean)
	pack, idx = gapPack(t, h.src, h.base, nil)
	sum = hex.EncodeToString(pack[len(pack)-20:])
	packDir = filepath.Join(clean, ".git", "objects", "pack")
	writeFile(t, filepath.Join(packDir, "pack-"+sum+".pack"), string(pack), 0o444)
	writeFile(t, filepath.Join(packDir, "pack-"+sum+".idx"), string(idx), 0o444)
	if _, _, err := Prepare(context.Background(), clean, h.base, t.TempDir()); err != nil {
		t.Fatalf("the same pack without the gap: %v", err)
	}
}

// gapPack writes base's objects (from repo) into a pack, in the clear but
// for zlib, with gap after the first blob, and its version-2 index.
func gapPack(t *testing.T, repo, base string, gap []byte) (pack, idx []byte) {
	t.Helper()
	type obj struct {
		id     []byte
		off    uint32
		crc    uint32
		header []byte
	}
	var objs []obj
	out := []byte("PACK\x00\x00\x00\x02")
	ids := lines(tgit(t, repo, "rev-list", "--objects", "--no-object-names", base))
	out = binary.BigEndian.AppendUint32(out, uint32(len(ids)))
	types := map[string]byte{"commit": 1, "tree": 2, "blob": 3, "tag": 4}
	gapped := false
	for _, id := range ids {
		typ := tgit(t, repo, "cat-file", "-t", id)
		body := []byte(tgitRaw(t, repo, "cat-file", typ, id))
		size := len(body)
		hdr := []byte{types[typ]<<4 | byte(size&15)}
		for size >>= 4; size > 0; size >>= 7 {
			hdr[len(hdr)-1] |= 0x80
			hdr = append(hdr, byte(size&0x7f))
		}
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		zw.Write(body)
		zw.Close()
		data := append(hdr, z.Bytes()...)
		if typ == "blob" && !gapped {
			data = append(data, gap...)
			gapped = true
		}
		raw, _ := hex.DecodeString(id)
		objs = append(objs, obj{id: raw, off: uint32(len(out)), crc: crc32.ChecksumIEEE(data)})
		out = append(out, data...)
	}
	psum := sha1.Sum(out)
	out = append(out, psum[:]...)
	sort.Slice(objs, func(i, j int) bool { return bytes.Compare(objs[i].id, objs[j].id) < 0 })
	ix := []byte("\377tOc\x00\x00\x00\x02")
	var fan [256]uint32
	for _, o := range objs {
		for b := int(o.id[0]); b < 256; b++ {
			fan[b]++
		}
	}
	for _, n := range fan {
		ix = binary.BigEndian.AppendUint32(ix, n)
	}
	for _, o := range objs {
		ix = append(ix, o.id...)
	}
	for _, o := range objs {
		ix = binary.BigEndian.AppendUint32(ix, o.crc)
	}
	for _, o := range objs {
		ix = binary.BigEndian.AppendUint32(ix, o.off)
	}
	ix = append(ix, psum[:]...)
	isum := sha1.Sum(ix)
	return out, append(ix, isum[:]...)
}

// TestPrepareBoundsSubmodules: a superproject with more submodule
// repositories than a copy may hold (each is a whole copy, and a few a
// level multiply level after level) is refused, quickly, naming the bound.
func TestPrepareBoundsSubmodules(t *testing.T) {
	requireGit(t)
	sub, subCommit, _ := simpleRepo(t)
	super := t.TempDir()
	tgit(t, super, "init", "-q")
	bare := filepath.Join(t.TempDir(), "sub.git")
	tgit(t, filepath.Dir(bare), "clone", "-q", "--bare", sub, bare)
	if err := os.MkdirAll(filepath.Join(super, ".git", "modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	var gitmodules strings.Builder
	for i := range maxSubmodules + 6 {
		name := fmt.Sprintf("lib%02d", i)
		tgit(t, super, "update-index", "--add", "--cacheinfo", "160000,"+subCommit+","+name)
		fmt.Fprintf(&gitmodules, "[submodule %q]\n\tpath = %s\n\turl = ../sub\n", name, name)
		if b, err := exec.Command("cp", "-a", bare, filepath.Join(super, ".git", "modules", name)).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v: %s", err, b)
		}
	}
	writeFile(t, filepath.Join(super, ".gitmodules"), gitmodules.String(), 0o644)
	tgit(t, super, "add", ".gitmodules")
	tgit(t, super, "commit", "-q", "-m", "many submodules")
	start := time.Now()
	_, _, err := Prepare(context.Background(), super, "HEAD", t.TempDir())
	var se *SubmoduleError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), fmt.Sprintf("more than %d submodule", maxSubmodules)) {
		t.Fatalf("Prepare = %v, want a *SubmoduleError naming the bound", err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("took %v", d)
	}
}

// TestPrepareSubmoduleOutsideSource: a submodule's repository found
// through a symlink (or a gitfile) that leads out of the source is refused:
// a crafted task must not lend its copy another repository of this
// machine.
func TestPrepareSubmoduleOutsideSource(t *testing.T) {
	requireGit(t)
	sub, subCommit, _ := simpleRepo(t)
	super := t.TempDir()
	tgit(t, super, "init", "-q")
	tgit(t, super, "update-index", "--add", "--cacheinfo", "160000,"+subCommit+",lib")
	writeFile(t, filepath.Join(super, ".gitmodules"), "[submodule \"lib\"]\n\tpath = lib\n\turl = ../lib\n", 0o644)
	tgit(t, super, "add", ".gitmodules")
	tgit(t, super, "commit", "-q", "-m", "lib")
	if err := os.MkdirAll(filepath.Join(super, ".git", "modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(sub, ".git"), filepath.Join(super, ".git", "modules", "lib")); err != nil {
		t.Fatal(err)
	}
	_, _, err := Prepare(context.Background(), super, "HEAD", t.TempDir())
	var se *SubmoduleError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "lies outside") {
		t.Fatalf("Prepare = %v, want a *SubmoduleError: outside the source", err)
	}
	// Inside the source, the same repository is used.
	os.Remove(filepath.Join(super, ".git", "modules", "lib"))
	tgit(t, filepath.Join(super, ".git", "modules"), "clone", "-q", "--bare", sub, "lib")
	if _, _, err := Prepare(context.Background(), super, "HEAD", t.TempDir()); err != nil {
		t.Fatalf("the submodule's repository inside the source: %v", err)
	}
}

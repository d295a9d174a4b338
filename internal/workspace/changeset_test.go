package workspace

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ---- helpers ----------------------------------------------------------------

// requireRoot skips a test that needs root for the named feature.
func requireRoot(t *testing.T, feature string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("requires root for %s", feature)
	}
}

// tmpfs mounts a tmpfs (trusted xattrs, whiteouts) in a temp dir.
func tmpfs(t *testing.T) string {
	t.Helper()
	requireRoot(t, "mounting tmpfs")
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "mode=0755"); err != nil {
		t.Skipf("requires tmpfs mounts: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// scratch is a directory for hostile trees: a tmpfs when root (fast to fill,
// instant to drop), else a temp dir.
func scratch(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		return t.TempDir()
	}
	return tmpfs(t)
}

// mountOverlay mounts lower+upper at target the way the sandbox does and
// returns the unmount function (also run at cleanup).
func mountOverlay(t *testing.T, lower, upper, work, target string) func() {
	t.Helper()
	fsfd, err := unix.Fsopen("overlay", unix.FSOPEN_CLOEXEC)
	if err != nil {
		t.Skipf("requires overlayfs (fsopen): %v", err)
	}
	defer unix.Close(fsfd)
	for _, kv := range [][2]string{
		{"lowerdir+", lower}, {"upperdir", upper}, {"workdir", work},
		{"redirect_dir", "off"}, {"metacopy", "off"}, {"index", "off"}, {"xino", "off"},
	} {
		if err := unix.FsconfigSetString(fsfd, kv[0], kv[1]); err != nil {
			t.Fatalf("fsconfig %s=%s: %v", kv[0], kv[1], err)
		}
	}
	if err := unix.FsconfigCreate(fsfd); err != nil {
		t.Fatalf("fsconfig create: %v", err)
	}
	mfd, err := unix.Fsmount(fsfd, unix.FSMOUNT_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("fsmount: %v", err)
	}
	defer unix.Close(mfd)
	if err := unix.MoveMount(mfd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		t.Fatalf("move_mount: %v", err)
	}
	mounted := true
	umount := func() {
		if mounted {
			mounted = false
			if err := unix.Unmount(target, 0); err != nil {
				t.Errorf("unmount %s: %v", target, err)
			}
		}
	}
	t.Cleanup(umount)
	return umount
}

func mkdirs(t *testing.T, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := unix.Chmod(p, uint32(mode)); err != nil { // raw bits: setuid, setgid, sticky
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func extract(t *testing.T, layers []Layer, lim Limits) (*Changeset, []byte) {
	t.Helper()
	var buf bytes.Buffer
	cs, err := Extract(layers, lim, &buf)
	if err != nil {
		t.Fatalf("Extract: %v", err)
	}
	return cs, buf.Bytes()
}

func entryMap(cs *Changeset) map[string]Entry {
	m := map[string]Entry{}
	for _, e := range cs.Entries {
		m[e.Path] = e
	}
	return m
}

func sha(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }

// snapshot describes a merged view: type, mode (minus setuid/setgid, which
// are never carried; checkUpper checks they are gone),
// content hash or link target, for every path below root.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	view := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %o", fi.Mode().Type(), fi.Mode().Perm()|fi.Mode()&os.ModeSticky)
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			desc += " " + sha(string(b))
		case fi.Mode()&os.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			desc += " -> " + l
		}
		view[strings.TrimPrefix(p, root)] = desc
		return nil
	})
	must(t, err)
	return view
}

// ---- extraction through a real overlay, and back -----------------------------

func TestOverlayRoundTrip(t *testing.T) {
	base := tmpfs(t)
	lower, upper, work, mnt := base+"/lower", base+"/upper", base+"/work", base+"/mnt"
	mkdirs(t, lower, upper, work, mnt)
	writeFile(t, lower+"/keep.txt", "keep", 0o644)
	writeFile(t, lower+"/mod.txt", "old", 0o644)
	writeFile(t, lower+"/del.txt", "bye", 0o644)
	writeFile(t, lower+"/deldir/a", "a", 0o644)
	writeFile(t, lower+"/deldir/b", "b", 0o644)
	writeFile(t, lower+"/redo/old1", "o1", 0o644)
	writeFile(t, lower+"/redo/sub/old2", "o2", 0o644)
	writeFile(t, lower+"/ren.txt", "ren", 0o644)
	writeFile(t, lower+"/chm.sh", "#!/bin/sh", 0o644)
	writeFile(t, lower+"/dir/nested/deep.txt", "deep", 0o644)
	mkdirs(t, lower+"/sticky")
	must(t, os.Symlink("keep.txt", lower+"/lowerlink"))

	unmount := mountOverlay(t, lower, upper, work, mnt)
	m := func(p string) string { return mnt + p }
	longName := "/dir/" + strings.Repeat("x", 200)
	writeFile(t, m("/new.txt"), "new", 0o644)
	writeFile(t, m("/dir/nested/added.txt"), "added", 0o600)
	writeFile(t, m("/mod.txt"), "modified", 0o644)
	must(t, os.Remove(m("/del.txt")))
	must(t, os.RemoveAll(m("/deldir")))
	must(t, os.RemoveAll(m("/redo")))
	must(t, os.Mkdir(m("/redo"), 0o750))
	must(t, os.Chmod(m("/redo"), 0o750))
	writeFile(t, m("/redo/new"), "fresh", 0o644)
	must(t, os.Rename(m("/ren.txt"), m("/renamed.txt")))
	must(t, os.Chmod(m("/chm.sh"), 0o755))
	must(t, unix.Chmod(m("/sticky"), 0o1777))
	writeFile(t, m("/suid"), "root me", 0o4755)
	writeFile(t, m("/sgid"), "group me", 0o2750)
	must(t, os.Symlink("/etc/shadow", m("/shadowlink")))
	must(t, os.Symlink("../../..", m("/up")))
	must(t, os.Remove(m("/lowerlink")))
	must(t, unix.Mkfifo(m("/fifo"), 0o644))
	must(t, os.Link(m("/new.txt"), m("/hard.txt")))
	must(t, os.Link(m("/keep.txt"), m("/hardkeep.txt")))
	writeFile(t, m("/nl\nname"), "newline", 0o644)
	writeFile(t, m("/bad\xffname"), "invalid utf-8", 0o644)
	writeFile(t, m(longName), "long", 0o644)
	mkdirs(t, m("/emptydir"))
	agent := snapshot(t, mnt)
	unmount()

	layers := []Layer{{Dst: "/", Upper: upper}}
	cs, archive := extract(t, layers, DefaultLimits())
	if _, again := extract(t, layers, DefaultLimits()); !bytes.Equal(archive, again) {
		t.Fatal("two extractions of one upper differ")
	}
	if h := sha256.Sum256(archive); cs.Digest != "sha256:"+hex.EncodeToString(h[:]) {
		t.Fatalf("digest %s is not the archive's", cs.Digest)
	}

	got := entryMap(cs)
	want := map[string]Entry{
		"/del.txt":     {Path: "/del.txt", Kind: KindWhiteout},
		"/deldir":      {Path: "/deldir", Kind: KindWhiteout},
		"/ren.txt":     {Path: "/ren.txt", Kind: KindWhiteout},
		"/lowerlink":   {Path: "/lowerlink", Kind: KindWhiteout},
		"/redo":        {Path: "/redo", Kind: KindDir, Mode: 0o750, Opaque: true},
		"/redo/new":    {Path: "/redo/new", Kind: KindFile, Mode: 0o644, Size: 5, SHA256: sha("fresh")},
		"/renamed.txt": {Path: "/renamed.txt", Kind: KindFile, Mode: 0o644, Size: 3, SHA256: sha("ren")},
		"/chm.sh":      {Path: "/chm.sh", Kind: KindFile, Mode: 0o755, Size: 9, SHA256: sha("#!/bin/sh")},
		"/sticky":      {Path: "/sticky", Kind: KindDir, Mode: 0o1777},
		"/suid":        {Path: "/suid", Kind: KindFile, Mode: 0o755, Size: 7, SHA256: sha("root me")},
		"/sgid":        {Path: "/sgid", Kind: KindFile, Mode: 0o750, Size: 8, SHA256: sha("group me")},
		"/shadowlink":  {Path: "/shadowlink", Kind: KindSymlink, Mode: 0o777, Link: "/etc/shadow"},
		"/up":          {Path: "/up", Kind: KindSymlink, Mode: 0o777, Link: "../../.."},
		"/hard.txt":    {Path: "/hard.txt", Kind: KindFile, Mode: 0o644, Size: 3, SHA256: sha("new")},
		"/new.txt":     {Path: "/new.txt", Kind: KindFile, Mode: 0o644, Size: 3, SHA256: sha("new")},
		"/dir":         {Path: "/dir", Kind: KindDir, Mode: 0o755},
		"/nl\nname":    {Path: "/nl\nname", Kind: KindFile, Mode: 0o644, Size: 7, SHA256: sha("newline")},
		"/bad\xffname": {Path: "/bad\xffname", Kind: KindFile, Mode: 0o644, Size: 13, SHA256: sha("invalid utf-8")},
		longName:       {Path: longName, Kind: KindFile, Mode: 0o644, Size: 4, SHA256: sha("long")},
		"/emptydir":    {Path: "/emptydir", Kind: KindDir, Mode: 0o755},
	}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("entry %q = %+v, want %+v", p, got[p], w)
		}
	}
	for _, p := range []string{"/fifo", "/redo/old1", "/redo/sub", "/deldir/a", "/keep.txt/x"} {
		if _, ok := got[p]; ok {
			t.Errorf("unexpected entry %q", p)
		}
	}
	if len(cs.Dropped) != 1 || cs.Dropped[0] != (Dropped{"/fifo", "fifo"}) {
		t.Errorf("Dropped = %v, want the fifo", cs.Dropped)
	}
	if !sort.SliceIsSorted(cs.Entries, func(i, j int) bool { return cs.Entries[i].Path < cs.Entries[j].Path }) {
		t.Error("entries not sorted")
	}
	assertNoHardLinks(t, archive)
	rc, err := ReadArchive(bytes.NewReader(archive), DefaultLimits())
	must(t, err)
	if rc.Digest != cs.Digest || !reflect.DeepEqual(rc.Entries, cs.Entries) || rc.Files != cs.Files || rc.Bytes != cs.Bytes {
		t.Fatalf("ReadArchive differs from Extract:\n%+v\n%+v", rc, cs)
	}

	// Apply into a fresh upper and mount it over the same lower.
	upper2, work2, mnt2 := base+"/upper2", base+"/work2", base+"/mnt2"
	mkdirs(t, upper2, work2, mnt2)
	const uid, gid = 1073741824 + 1000, 1073741824 + 1000
	must(t, Apply(bytes.NewReader(archive), rc, []Layer{{Dst: "/", Upper: upper2}}, nil, uid, gid))
	checkUpper(t, upper2, uid, gid)
	mountOverlay(t, lower, upper2, work2, mnt2)
	grader := snapshot(t, mnt2)

	for p, d := range agent {
		if p == "/fifo" {
			continue
		}
		if grader[p] != d {
			t.Errorf("merged view %q: grader %q, agent %q", p, grader[p], d)
		}
	}
	for p := range grader {
		if _, ok := agent[p]; !ok {
			t.Errorf("merged view %q: in the grader's view, not the agent's", p)
		}
	}
	for _, p := range []string{"/fifo", "/del.txt", "/deldir", "/redo/old1", "/redo/sub", "/ren.txt", "/lowerlink"} {
		if _, ok := grader[p]; ok {
			t.Errorf("%q is visible in the grader's view", p)
		}
	}
}

// checkUpper checks what Apply wrote: owners, times, whiteout and opaque markers.
func checkUpper(t *testing.T, upper string, uid, gid int) {
	t.Helper()
	err := filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == upper {
			return err
		}
		var st unix.Stat_t
		must(t, unix.Lstat(p, &st))
		if int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s owned by %d:%d, want %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
		if st.Mtim.Sec != 0 || st.Mtim.Nsec != 0 {
			t.Errorf("%s mtime %v, want the epoch", p, st.Mtim)
		}
		if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
			t.Errorf("%s has mode %o", p, st.Mode)
		}
		return nil
	})
	must(t, err)
	var st unix.Stat_t
	must(t, unix.Lstat(upper+"/del.txt", &st))
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("del.txt is not a whiteout: mode %o rdev %d", st.Mode, st.Rdev)
	}
	v := make([]byte, 8)
	n, err := unix.Lgetxattr(upper+"/redo", xattrOpaque, v)
	if err != nil || string(v[:n]) != "y" {
		t.Errorf("redo opaque xattr = %q, %v", v[:max(n, 0)], err)
	}
}

func assertNoHardLinks(t *testing.T, archive []byte) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		must(t, err)
		if h.Typeflag != tar.TypeReg && h.Typeflag != tar.TypeDir && h.Typeflag != tar.TypeSymlink {
			t.Errorf("archive entry %q has type %q", h.Name, h.Typeflag)
		}
	}
}

// ---- the attacker ---------------------------------------------------------------

func TestExtractSymlinksNeverFollowed(t *testing.T) {
	const secret = "TOPSECRET-5f0e1c"
	host := t.TempDir()
	writeFile(t, host+"/secret.txt", secret, 0o644)
	up := t.TempDir()
	must(t, os.Symlink("/etc/shadow", up+"/shadow"))
	must(t, os.Symlink(host+"/secret.txt", up+"/secret"))
	must(t, os.Symlink(host, up+"/hostdir"))
	must(t, os.Symlink("../../..", up+"/dots"))
	writeFile(t, up+"/real/file", "fine", 0o644)

	cs, archive := extract(t, []Layer{{Dst: "/", Upper: up}}, DefaultLimits())
	if bytes.Contains(archive, []byte(secret)) {
		t.Fatal("the archive holds the secret")
	}
	got := entryMap(cs)
	for name, target := range map[string]string{"/shadow": "/etc/shadow", "/secret": host + "/secret.txt", "/hostdir": host, "/dots": "../../.."} {
		if e := got[name]; e.Kind != KindSymlink || e.Link != target || e.Size != 0 {
			t.Errorf("%s = %+v, want a symlink to %s", name, e, target)
		}
	}
	if len(cs.Entries) != 6 {
		t.Errorf("entries %+v: something was read through a link", cs.Entries)
	}
}

func TestExtractDropsSpecialFiles(t *testing.T) {
	up := t.TempDir()
	must(t, unix.Mkfifo(up+"/fifo", 0o644))
	sock := up + "/sock"
	if len(sock) < 100 {
		l, err := net.Listen("unix", sock)
		must(t, err)
		defer l.Close()
	}
	writeFile(t, up+"/.wh.evil", "", 0o644)
	writeFile(t, up+"/.wh..wh..opq", "", 0o644)
	writeFile(t, up+"/.wh.dir/inner", "never read", 0o644)
	writeFile(t, up+"/ok", "ok", 0o644)
	wantDropped := []Dropped{
		{"/.wh..wh..opq", "name begins with .wh. (reserved for whiteouts)"},
		{"/.wh.dir", "name begins with .wh. (reserved for whiteouts)"},
		{"/.wh.evil", "name begins with .wh. (reserved for whiteouts)"},
		{"/fifo", "fifo"},
	}
	if len(sock) < 100 {
		wantDropped = append(wantDropped, Dropped{"/sock", "socket"})
	}
	if os.Geteuid() == 0 {
		must(t, unix.Mknod(up+"/null", unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
		must(t, unix.Mknod(up+"/disk", unix.S_IFBLK|0o600, int(unix.Mkdev(8, 0))))
		must(t, unix.Mknod(up+"/gone", unix.S_IFCHR, 0))
		wantDropped = append(wantDropped, Dropped{"/disk", "block device 8:0"}, Dropped{"/null", "character device 1:3"})
		sort.Slice(wantDropped, func(i, j int) bool { return wantDropped[i].Path < wantDropped[j].Path })
	}

	done := make(chan error, 1)
	var cs *Changeset
	var buf bytes.Buffer
	go func() {
		var err error
		cs, err = Extract([]Layer{{Dst: "/", Upper: up}}, DefaultLimits(), &buf)
		done <- err
	}()
	select {
	case err := <-done:
		must(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Extract hangs on a special file")
	}
	archive := buf.Bytes()
	if !reflect.DeepEqual(cs.Dropped, wantDropped) {
		t.Errorf("Dropped = %q\nwant      %q", cs.Dropped, wantDropped)
	}
	want := []Entry{{Path: "/ok", Kind: KindFile, Mode: 0o644, Size: 2, SHA256: sha("ok")}}
	if os.Geteuid() == 0 {
		want = append([]Entry{{Path: "/gone", Kind: KindWhiteout}}, want...)
	}
	if !reflect.DeepEqual(cs.Entries, want) {
		t.Errorf("Entries = %+v, want %+v", cs.Entries, want)
	}
	if bytes.Contains(archive, []byte("never read")) {
		t.Error("content below a .wh. directory was archived")
	}
}

func TestExtractLimits(t *testing.T) {
	tests := []struct {
		name  string
		build func(t *testing.T, up string)
		lim   Limits
		what  string
		limit int64
	}{
		{"100k files", func(t *testing.T, up string) {
			for i := range 100_000 {
				fd, err := unix.Open(fmt.Sprintf("%s/f%d", up, i), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
				must(t, err)
				unix.Close(fd)
			}
		}, Limits{}, "files", 20_000},
		{"10 GB sparse file", func(t *testing.T, up string) {
			f, err := os.Create(up + "/huge")
			must(t, err)
			defer f.Close()
			must(t, f.Truncate(10<<30))
		}, Limits{}, "bytes", 1 << 30},
		{"bytes summed over files", func(t *testing.T, up string) {
			for _, n := range []string{"a", "b"} {
				f, err := os.Create(up + "/" + n)
				must(t, err)
				must(t, f.Truncate(600<<20))
				f.Close()
			}
		}, Limits{}, "bytes", 1 << 30},
		{"5000-deep chain", func(t *testing.T, up string) {
			fd, err := unix.Open(up, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			must(t, err)
			for range 5000 {
				must(t, unix.Mkdirat(fd, "d", 0o755))
				nfd, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
				must(t, err)
				unix.Close(fd)
				fd = nfd
			}
			unix.Close(fd)
		}, Limits{}, "depth", 64},
		{"path length", func(t *testing.T, up string) {
			fd, err := unix.Open(up, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			must(t, err)
			for range 20 {
				name := strings.Repeat("p", 250)
				must(t, unix.Mkdirat(fd, name, 0o755))
				nfd, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
				must(t, err)
				unix.Close(fd)
				fd = nfd
			}
			unix.Close(fd)
		}, Limits{}, "path length", 4096},
		{"symlink target", func(t *testing.T, up string) {
			must(t, os.Symlink(strings.Repeat("../", 100), up+"/l"))
		}, Limits{MaxPathLen: 200}, "path length", 200},
		{"fifos count", func(t *testing.T, up string) {
			for i := range 50 {
				must(t, unix.Mkfifo(fmt.Sprintf("%s/p%d", up, i), 0o644))
			}
		}, Limits{MaxFiles: 10}, "files", 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := scratch(t)
			tt.build(t, up)
			start := time.Now()
			_, err := Extract([]Layer{{Dst: "/", Upper: up}}, tt.lim, io.Discard)
			elapsed := time.Since(start)
			var le *LimitError
			if !errors.As(err, &le) || le.What != tt.what || le.Limit != tt.limit {
				t.Fatalf("err = %v, want a %s LimitError at %d", err, tt.what, tt.limit)
			}
			t.Logf("limit hit after %v", elapsed)
			if elapsed > 2*time.Second {
				t.Errorf("took %v to hit the limit", elapsed)
			}
		})
	}
	if _, err := Extract([]Layer{{Dst: "/", Upper: t.TempDir()}}, Limits{MaxFiles: -1}, io.Discard); !errors.Is(err, ErrLimits) {
		t.Errorf("negative limit: %v", err)
	}
}

func TestExtractOverlayMetadata(t *testing.T) {
	tests := []struct {
		name    string
		build   func(t *testing.T, up string)
		wantErr bool
		opaque  bool
	}{
		{"redirect", func(t *testing.T, up string) {
			mkdirs(t, up+"/d")
			must(t, unix.Setxattr(up+"/d", overlayPrefix+"redirect", []byte("/x"), 0))
		}, true, false},
		{"metacopy", func(t *testing.T, up string) {
			writeFile(t, up+"/f", "", 0o644)
			must(t, unix.Setxattr(up+"/f", overlayPrefix+"metacopy", nil, 0))
		}, true, false},
		{"opaque z", func(t *testing.T, up string) {
			mkdirs(t, up+"/d")
			must(t, unix.Setxattr(up+"/d", xattrOpaque, []byte("z"), 0))
		}, true, false},
		{"opaque on a file", func(t *testing.T, up string) {
			writeFile(t, up+"/f", "", 0o644)
			must(t, unix.Setxattr(up+"/f", xattrOpaque, []byte("y"), 0))
		}, true, false},
		{"unknown overlay xattr on a symlink", func(t *testing.T, up string) {
			must(t, os.Symlink("x", up+"/l"))
			must(t, unix.Lsetxattr(up+"/l", overlayPrefix+"metacopy", nil, 0))
		}, true, false},
		{"opaque x is not opaque", func(t *testing.T, up string) {
			mkdirs(t, up+"/d")
			must(t, unix.Setxattr(up+"/d", xattrOpaque, []byte("x"), 0))
		}, false, false},
		{"opaque y", func(t *testing.T, up string) {
			mkdirs(t, up+"/d")
			must(t, unix.Setxattr(up+"/d", xattrOpaque, []byte("y"), 0))
		}, false, true},
		{"origin and impure are bookkeeping", func(t *testing.T, up string) {
			mkdirs(t, up+"/d")
			must(t, unix.Setxattr(up+"/d", overlayPrefix+"origin", []byte{0, 1}, 0))
			must(t, unix.Setxattr(up+"/d", overlayPrefix+"impure", []byte("y"), 0))
			must(t, unix.Setxattr(up+"/d", "user.note", []byte("not carried"), 0))
		}, false, false},
	}
	base := tmpfs(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := fmt.Sprintf("%s/%d", base, i)
			mkdirs(t, up)
			tt.build(t, up)
			var buf bytes.Buffer
			cs, err := Extract([]Layer{{Dst: "/", Upper: up}}, DefaultLimits(), &buf)
			if tt.wantErr {
				if !errors.Is(err, ErrOverlayMetadata) {
					t.Fatalf("err = %v, want ErrOverlayMetadata", err)
				}
				return
			}
			must(t, err)
			if e := entryMap(cs)["/d"]; e.Opaque != tt.opaque {
				t.Errorf("opaque = %v, want %v", e.Opaque, tt.opaque)
			}
			if bytes.Contains(buf.Bytes(), []byte("not carried")) {
				t.Error("an xattr was carried")
			}
		})
	}
}

func TestExtractLayers(t *testing.T) {
	root, app := t.TempDir(), t.TempDir()
	writeFile(t, root+"/proc/self/status", "harness", 0o644)
	writeFile(t, root+"/app/shadowed", "below the /app mount", 0o644)
	writeFile(t, root+"/etc/conf", "conf", 0o644)
	writeFile(t, app+"/main.py", "print()", 0o644)
	writeFile(t, app+"/sub/x", "x", 0o644)
	layers := []Layer{{Dst: "/", Upper: root, Hide: []string{"/proc", "/app"}}, {Dst: "/app", Upper: app}}
	cs, _ := extract(t, layers, DefaultLimits())
	var paths []string
	for _, e := range cs.Entries {
		paths = append(paths, e.Path)
	}
	if want := []string{"/app/main.py", "/app/sub", "/app/sub/x", "/etc", "/etc/conf"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("paths %q, want %q", paths, want)
	}
	// A nested layer's mount point is hidden in the layer below even when
	// not listed in Hide.
	layers[0].Hide = []string{"/proc"}
	if cs2, _ := extract(t, layers, DefaultLimits()); !reflect.DeepEqual(cs2.Entries, cs.Entries) {
		t.Errorf("without Hide /app: %+v", cs2.Entries)
	}
	for _, bad := range [][]Layer{
		nil,
		{{Dst: "app", Upper: app}},
		{{Dst: "/app/", Upper: app}},
		{{Dst: "/", Upper: root}, {Dst: "/", Upper: app}},
		{{Dst: "/", Upper: ""}},
		{{Dst: "/", Upper: root, Hide: []string{"proc"}}},
	} {
		if _, err := Extract(bad, DefaultLimits(), io.Discard); !errors.Is(err, ErrLayers) {
			t.Errorf("layers %+v: err = %v, want ErrLayers", bad, err)
		}
	}
	link := t.TempDir() + "/link"
	must(t, os.Symlink(app, link))
	if _, err := Extract([]Layer{{Dst: "/", Upper: link}}, DefaultLimits(), io.Discard); err == nil {
		t.Error("an upper that is a symlink was followed")
	}
}

// An upper that changes between the walk and the read is refused, and
// nothing is read through what replaced the file.
func TestExtractChangedUpper(t *testing.T) {
	const secret = "TOPSECRET-c4a9"
	host := t.TempDir()
	writeFile(t, host+"/secret", secret, 0o644)
	must(t, unix.Mkfifo(host+"/fifo", 0o644))
	tests := []struct {
		name   string
		change func(up string) error
	}{
		{"file grows", func(up string) error {
			f, err := os.OpenFile(up+"/d/f", os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer f.Close()
			_, err = f.WriteString("more")
			return err
		}},
		{"file shrinks", func(up string) error { return os.Truncate(up+"/d/f", 1) }},
		{"file becomes a symlink", func(up string) error {
			if err := os.Remove(up + "/d/f"); err != nil {
				return err
			}
			return os.Symlink(host+"/secret", up+"/d/f")
		}},
		{"file becomes a fifo", func(up string) error {
			if err := os.Remove(up + "/d/f"); err != nil {
				return err
			}
			return unix.Mkfifo(up+"/d/f", 0o644)
		}},
		{"file replaced by another", func(up string) error {
			// Keep the old inode alive so the new file cannot reuse its number.
			if err := os.Rename(up+"/d/f", up+"/../moved"); err != nil {
				return err
			}
			return os.WriteFile(up+"/d/f", []byte("abcdefgh"), 0o644)
		}},
		{"parent becomes a symlink", func(up string) error {
			if err := os.RemoveAll(up + "/d"); err != nil {
				return err
			}
			if err := os.WriteFile(host+"/f", []byte(secret[:8]), 0o644); err != nil {
				return err
			}
			return os.Symlink(host, up+"/d")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := t.TempDir()
			writeFile(t, up+"/d/f", "12345678", 0o644)
			testHookAfterWalk = func() { must(t, tt.change(up)) }
			defer func() { testHookAfterWalk = nil }()
			var buf bytes.Buffer
			done := make(chan error, 1)
			go func() { _, err := Extract([]Layer{{Dst: "/", Upper: up}}, DefaultLimits(), &buf); done <- err }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("Extract accepted an upper that changed")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Extract hangs")
			}
			if bytes.Contains(buf.Bytes(), []byte(secret[:8])) {
				t.Error("read through the replacement")
			}
		})
	}
}

type chunkReader struct{ chunks []string }

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	c.chunks[0] = c.chunks[0][n:]
	if c.chunks[0] == "" {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func TestCopyExact(t *testing.T) {
	for _, tt := range []struct {
		chunks []string
		n      int64
		ok     bool
	}{
		{[]string{"abc", "def"}, 6, true},
		{[]string{"abc"}, 6, false},             // shrank
		{[]string{"abc", "def", "g"}, 6, false}, // grew
		{nil, 0, true},
	} {
		var out bytes.Buffer
		err := copyExact(&out, &chunkReader{append([]string(nil), tt.chunks...)}, tt.n)
		if tt.ok != (err == nil) || (!tt.ok && !errors.Is(err, ErrChanged)) {
			t.Errorf("%q n=%d: err = %v", tt.chunks, tt.n, err)
		}
	}
}

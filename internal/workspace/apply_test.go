package workspace

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// encode writes entries the way Extract does, with the given file contents
// (sizes are taken from the contents).
func encode(t testing.TB, entries []Entry, content map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if e.Kind == KindFile {
			e.Size = int64(len(content[e.Path]))
		}
		if err := writeHeaders(tw, &e); err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(tw, content[e.Path]); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// hdr is one raw header for crafting archives Extract would never write.
type hdr struct {
	h    tar.Header
	body string
}

func reg(name, body string) hdr {
	return hdr{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: epoch, Format: tar.FormatUSTAR}, body}
}
func dir(name string) hdr {
	return hdr{h: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755, ModTime: epoch, Format: tar.FormatUSTAR}}
}
func sym(name, target string) hdr {
	return hdr{h: tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: epoch, Format: tar.FormatUSTAR}}
}
func with(x hdr, f func(h *tar.Header)) hdr { f(&x.h); return x }

func craft(t testing.TB, hs ...hdr) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, x := range hs {
		if x.h.Format == tar.FormatUSTAR && tar.NewWriter(io.Discard).WriteHeader(&x.h) != nil {
			x.h.Format = tar.FormatPAX // long names, as Extract does
		}
		if err := tw.WriteHeader(&x.h); err != nil {
			t.Fatalf("crafting %q: %v", x.h.Name, err)
		}
		if _, err := io.WriteString(tw, x.body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// patch edits the header block at off and fixes its checksum.
func patch(b []byte, off int, f func(blk []byte)) []byte {
	b = append([]byte(nil), b...)
	blk := b[off : off+512]
	f(blk)
	copy(blk[148:156], "        ")
	sum := 0
	for _, c := range blk {
		sum += int(c)
	}
	copy(blk[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

func TestReadArchiveRejects(t *testing.T) {
	valid := craft(t, dir("a/"), reg("a/f", "hello"), sym("l", "/etc/shadow"))
	if _, err := ReadArchive(bytes.NewReader(valid), DefaultLimits()); err != nil {
		t.Fatalf("the baseline is refused: %v", err)
	}
	tests := []struct {
		name    string
		archive []byte
		lim     Limits
		want    error  // a sentinel, or nil for "any FormatError"
		limit   string // a LimitError's What instead
	}{
		{"absolute name", craft(t, reg("/etc/passwd", "x")), Limits{}, ErrBadName, ""},
		{"dot-dot", craft(t, reg("../evil", "x")), Limits{}, ErrBadName, ""},
		{"inner dot-dot", craft(t, dir("a/"), reg("a/../b", "x")), Limits{}, ErrBadName, ""},
		{"dot", craft(t, reg("./a", "x")), Limits{}, ErrBadName, ""},
		{"empty component", craft(t, reg("a//b", "x")), Limits{}, ErrBadName, ""},
		{"dir without slash", craft(t, with(dir("a"), func(h *tar.Header) {})), Limits{}, ErrBadName, ""},
		{"root dir", craft(t, dir("./")), Limits{}, ErrBadName, ""},
		{"duplicate", craft(t, reg("a", "1"), reg("a", "2")), Limits{}, ErrDuplicate, ""},
		{"dir and file same path", craft(t, dir("a/"), reg("a", "2")), Limits{}, ErrDuplicate, ""},
		{"unsorted", craft(t, reg("b", "1"), reg("a", "2")), Limits{}, ErrUnsorted, ""},
		{"hard link", craft(t, reg("a", "1"), hdr{h: tar.Header{Typeflag: tar.TypeLink, Name: "b", Linkname: "a", ModTime: epoch, Format: tar.FormatUSTAR}}), Limits{}, ErrEntryType, ""},
		{"char device", craft(t, hdr{h: tar.Header{Typeflag: tar.TypeChar, Name: "null", Devmajor: 1, Devminor: 3, ModTime: epoch, Format: tar.FormatUSTAR}}), Limits{}, ErrEntryType, ""},
		{"block device", craft(t, hdr{h: tar.Header{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8, ModTime: epoch, Format: tar.FormatUSTAR}}), Limits{}, ErrEntryType, ""},
		{"fifo", craft(t, hdr{h: tar.Header{Typeflag: tar.TypeFifo, Name: "p", ModTime: epoch, Format: tar.FormatUSTAR}}), Limits{}, ErrEntryType, ""},
		{"unknown type", craft(t, with(reg("a", ""), func(h *tar.Header) { h.Typeflag = 'Z' })), Limits{}, ErrEntryType, ""},
		{"global header", craft(t, hdr{h: tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "g", PAXRecords: map[string]string{"comment": "x"}, Format: tar.FormatPAX}}, reg("a", "1")), Limits{}, ErrEntryType, ""},
		{"PAX comment", craft(t, with(reg("a", "1"), func(h *tar.Header) { h.Format, h.PAXRecords = tar.FormatPAX, map[string]string{"comment": "hi"} })), Limits{}, ErrPAXRecord, ""},
		{"PAX mtime", craft(t, with(reg("a", "1"), func(h *tar.Header) { h.Format, h.ModTime = tar.FormatPAX, time.Unix(0, 5) })), Limits{}, ErrPAXRecord, ""},
		{"PAX xattr", craft(t, with(reg("a", "1"), func(h *tar.Header) {
			h.Format, h.PAXRecords = tar.FormatPAX, map[string]string{"SCHILY.xattr.security.capability": "x"}
		})), Limits{}, ErrPAXRecord, ""},
		{"PAX where USTAR fits", craft(t, with(reg("a", "1"), func(h *tar.Header) { h.Format, h.PAXRecords = tar.FormatPAX, map[string]string{"path": "a"} })), Limits{}, ErrNotCanonical, ""},
		{"GNU long name", craft(t, with(reg(strings.Repeat("g", 150), "1"), func(h *tar.Header) { h.Format = tar.FormatGNU })), Limits{}, ErrNotCanonical, ""},
		{"old regular type", patch(craft(t, reg("a", "1")), 0, func(b []byte) { b[156] = 0 }), Limits{}, ErrNotCanonical, ""},
		{"owner", craft(t, with(reg("a", "1"), func(h *tar.Header) { h.Uid = 1000 })), Limits{}, ErrNotCanonical, ""},
		{"user name", craft(t, with(reg("a", "1"), func(h *tar.Header) { h.Uname = "root" })), Limits{}, ErrNotCanonical, ""},
		{"mtime", craft(t, with(reg("a", "1"), func(h *tar.Header) { h.ModTime = time.Unix(1700000000, 0) })), Limits{}, ErrNotCanonical, ""},
		{"dir with size", craft(t, with(dir("a/"), func(h *tar.Header) { h.Size = 4 })), Limits{}, nil, ""},
		{"setuid", craft(t, with(reg("a", "1"), func(h *tar.Header) { h.Mode = 0o4755 })), Limits{}, ErrBadMode, ""},
		{"setgid dir", craft(t, with(dir("a/"), func(h *tar.Header) { h.Mode = 0o2755 })), Limits{}, ErrBadMode, ""},
		{"symlink mode", craft(t, with(sym("l", "x"), func(h *tar.Header) { h.Mode = 0o644 })), Limits{}, ErrBadMode, ""},
		{"empty symlink", craft(t, sym("l", "")), Limits{}, ErrBadMode, ""},
		{"whiteout with content", craft(t, with(reg(".wh.a", "x"), func(h *tar.Header) { h.Mode = 0 })), Limits{}, ErrBadWhiteout, ""},
		{"whiteout with mode", craft(t, reg(".wh.a", "")), Limits{}, ErrBadWhiteout, ""},
		{"whiteout dir", craft(t, with(dir(".wh.a/"), func(h *tar.Header) { h.Mode = 0 })), Limits{}, ErrBadWhiteout, ""},
		{"whiteout of .wh. name", craft(t, with(reg(".wh..wh.x", ""), func(h *tar.Header) { h.Mode = 0 })), Limits{}, ErrBadName, ""},
		{"whiteout of dot-dot", craft(t, with(reg(".wh...", ""), func(h *tar.Header) { h.Mode = 0 })), Limits{}, ErrBadName, ""},
		{"misplaced opaque marker", craft(t, dir("a/"), reg("a/b", ""), with(reg("a/.wh..wh..opq", ""), func(h *tar.Header) { h.Mode = 0 })), Limits{}, ErrMisplacedOpaque, ""},
		{"opaque marker alone", craft(t, with(reg("a/.wh..wh..opq", ""), func(h *tar.Header) { h.Mode = 0 })), Limits{}, ErrMisplacedOpaque, ""},
		{"opaque marker with mode", craft(t, dir("a/"), reg("a/.wh..wh..opq", "")), Limits{}, ErrBadWhiteout, ""},
		{"file below a symlink", craft(t, sym("a", "/etc"), reg("a/passwd", "x")), Limits{}, ErrBelowNonDir, ""},
		{"file below a file", craft(t, reg("a", "x"), reg("a/b", "x")), Limits{}, ErrBelowNonDir, ""},
		{"file below a whiteout", craft(t, with(reg(".wh.a", ""), func(h *tar.Header) { h.Mode = 0 }), dir("a/"), reg("a/b", "x")), Limits{}, ErrDuplicate, ""},
		{"file deep below a symlink", craft(t, sym("a", "/"), reg("a/b", "x")), Limits{}, ErrBelowNonDir, ""},
		{"trailing data", append(append([]byte(nil), valid...), 'x'), Limits{}, ErrTrailingData, ""},
		{"trailing zero block", append(append([]byte(nil), valid...), make([]byte, 512)...), Limits{}, ErrTrailingData, ""},
		{"truncated content", valid[:512*3+2], Limits{}, ErrTruncated, ""},
		{"truncated header", valid[:700], Limits{}, ErrTruncated, ""},
		{"no end blocks", valid[:len(valid)-1024], Limits{}, ErrNotCanonical, ""},
		{"empty", nil, Limits{}, ErrNotCanonical, ""},
		{"bad checksum", func() []byte { b := append([]byte(nil), valid...); b[0] ^= 1; return b }(), Limits{}, ErrTruncated, ""},
		{"too many entries", valid, Limits{MaxFiles: 2}, nil, "files"},
		{"too many bytes", valid, Limits{MaxBytes: 4}, nil, "bytes"},
		{"too deep", craft(t, dir("a/"), dir("a/b/"), reg("a/b/c", "")), Limits{MaxDepth: 2}, nil, "depth"},
		{"path too long", craft(t, reg(strings.Repeat("a", 200), "")), Limits{MaxPathLen: 100}, nil, "path length"},
		{"symlink too long", craft(t, sym("l", strings.Repeat("x", 200))), Limits{MaxPathLen: 100}, nil, "path length"},
		{"name over 255", craft(t, reg(strings.Repeat("a", 256), "")), Limits{}, ErrBadName, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, err := ReadArchive(bytes.NewReader(tt.archive), tt.lim)
			if err == nil {
				t.Fatalf("accepted: %+v", cs)
			}
			if tt.limit != "" {
				var le *LimitError
				if !errors.As(err, &le) || le.What != tt.limit {
					t.Fatalf("err = %v, want a %s LimitError", err, tt.limit)
				}
				return
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v (%T), want a *FormatError", err, err)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

// An I/O error of the source is not a format error.
func TestReadArchiveIOError(t *testing.T) {
	boom := errors.New("disk on fire")
	_, err := ReadArchive(io.MultiReader(strings.NewReader("abc"), &errReader{boom}), DefaultLimits())
	var fe *FormatError
	if !errors.Is(err, boom) || errors.As(err, &fe) {
		t.Fatalf("err = %v", err)
	}
}

type errReader struct{ err error }

func (r *errReader) Read([]byte) (int, error) { return 0, r.err }

// testTree is a small valid archive: dirs, files, a symlink.
func testTree(t testing.TB) ([]byte, *Changeset) {
	t.Helper()
	entries := []Entry{
		{Path: "/d", Kind: KindDir, Mode: 0o755},
		{Path: "/d/f", Kind: KindFile, Mode: 0o644},
		{Path: "/g", Kind: KindFile, Mode: 0o600},
		{Path: "/l", Kind: KindSymlink, Mode: 0o777, Link: "d/f"},
	}
	archive := encode(t, entries, map[string]string{"/d/f": "hello world", "/g": "second file"})
	cs, err := ReadArchive(bytes.NewReader(archive), DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	return archive, cs
}

func TestApplyTamper(t *testing.T) {
	archive, cs := testTree(t)
	uid, gid := os.Getuid(), os.Getgid()
	other := func(mut func(e []Entry), content map[string]string) []byte {
		es := append([]Entry(nil), cs.Entries...)
		mut(es)
		return encode(t, es, content)
	}
	contents := map[string]string{"/d/f": "hello world", "/g": "second file"}
	flipped := append([]byte(nil), archive...)
	flipped[bytes.Index(flipped, []byte("hello world"))] ^= 0x20
	wrongDigest := *cs
	wrongDigest.Digest = "sha256:" + strings.Repeat("0", 64)

	tests := []struct {
		name    string
		archive []byte
		want    *Changeset
		wantErr error  // nil: a *TamperError
		at      string // the entry it must be caught at, if any
	}{
		{"flipped content byte", flipped, cs, nil, "/d/f"},
		{"same length, other content", other(func([]Entry) {}, map[string]string{"/d/f": "HELLO WORLD", "/g": "second file"}), cs, nil, "/d/f"},
		{"mode changed", other(func(e []Entry) { e[2].Mode = 0o755 }, contents), cs, nil, ""},
		{"link changed", other(func(e []Entry) { e[3].Link = "/etc/shadow" }, contents), cs, nil, ""},
		{"entry added", other(func(e []Entry) {}, contents), &Changeset{Entries: cs.Entries[:3], Digest: cs.Digest}, nil, ""},
		{"entry removed", encode(t, cs.Entries[:3], contents), cs, nil, ""},
		{"truncated", archive[:len(archive)-700], cs, nil, ""},
		{"digest differs", archive, &wrongDigest, nil, ""},
		{"no expected changeset", archive, nil, ErrNoDigest, ""},
		{"no digest", archive, &Changeset{Entries: cs.Entries}, ErrNoDigest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Apply(bytes.NewReader(tt.archive), tt.want, []Layer{{Dst: "/", Upper: t.TempDir()}}, nil, uid, gid)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("err = %v, want %v", err, tt.wantErr)
				}
				return
			}
			var te *TamperError
			if !errors.As(err, &te) {
				t.Fatalf("err = %v (%T), want a *TamperError", err, err)
			}
			if tt.at != "" && te.Path != tt.at {
				t.Fatalf("caught at %q (%v), want at %q, while writing it", te.Path, err, tt.at)
			}
		})
	}
	up := t.TempDir()
	if err := Apply(bytes.NewReader(archive), cs, []Layer{{Dst: "/", Upper: up}}, nil, uid, gid); err != nil {
		t.Fatalf("the untouched archive: %v", err)
	}
	if b, err := os.ReadFile(up + "/d/f"); err != nil || string(b) != "hello world" {
		t.Fatalf("d/f = %q, %v", b, err)
	}
}

// Apply never writes through a symlink or a file it made itself (or found).
func TestApplyRefusesNonDirParents(t *testing.T) {
	uid, gid := os.Getuid(), os.Getgid()
	outside := t.TempDir()
	up := t.TempDir()
	a, err := newApplier([]Layer{{Dst: "/", Upper: up}}, uid, gid)
	must(t, err)
	defer a.close()
	steps := []struct {
		e       Entry
		content string
		wantErr bool
	}{
		{Entry{Path: "/abs", Kind: KindSymlink, Link: outside}, "", false},
		{Entry{Path: "/abs/b", Kind: KindFile, Mode: 0o644, Size: 5}, "pwned", true},
		{Entry{Path: "/abs/sub/b", Kind: KindFile, Mode: 0o644, Size: 5}, "pwned", true},
		{Entry{Path: "/abs/d", Kind: KindDir, Mode: 0o755}, "", true},
		{Entry{Path: "/dot", Kind: KindSymlink, Link: "."}, "", false},
		{Entry{Path: "/dot/b", Kind: KindFile, Mode: 0o644, Size: 5}, "pwned", true},
		{Entry{Path: "/up", Kind: KindSymlink, Link: ".."}, "", false},
		{Entry{Path: "/up/b", Kind: KindSymlink, Link: "x"}, "", true},
		{Entry{Path: "/f", Kind: KindFile, Mode: 0o644, Size: 1}, "x", false},
		{Entry{Path: "/f/g", Kind: KindFile, Mode: 0o644, Size: 1}, "x", true},
		{Entry{Path: "/f", Kind: KindFile, Mode: 0o644, Size: 1}, "y", true}, // exists: never overwritten
	}
	for _, s := range steps {
		err := a.put(&s.e, strings.NewReader(s.content))
		if s.wantErr && err == nil {
			t.Errorf("put %s: wrote it", s.e.Path)
		}
		if !s.wantErr && err != nil {
			t.Errorf("put %s: %v", s.e.Path, err)
		}
		if s.wantErr && s.e.Path != "/f" && !errors.Is(err, ErrNotDir) {
			t.Errorf("put %s: err = %v, want ErrNotDir", s.e.Path, err)
		}
	}
	if names, _ := os.ReadDir(outside); len(names) != 0 {
		t.Errorf("written outside the upper: %v", names)
	}
	if _, err := os.Lstat(up + "/b"); err == nil {
		t.Error("written through a symlink to the upper itself")
	}
	if b, _ := os.ReadFile(up + "/f"); string(b) != "x" {
		t.Errorf("f overwritten: %q", b)
	}

	// Through the API: the archive is refused before anything is written.
	entries := []Entry{{Path: "/a", Kind: KindSymlink, Mode: 0o777, Link: outside}, {Path: "/a/b", Kind: KindFile, Mode: 0o644, Size: 5, SHA256: sha("pwned")}}
	archive := craft(t, sym("a", outside), reg("a/b", "pwned"))
	up2 := t.TempDir()
	err = Apply(bytes.NewReader(archive), &Changeset{Entries: entries, Digest: "sha256:whatever"}, []Layer{{Dst: "/", Upper: up2}}, nil, uid, gid)
	var te *TamperError
	if !errors.As(err, &te) || !errors.Is(err, ErrBelowNonDir) {
		t.Errorf("err = %v, want a TamperError for ErrBelowNonDir", err)
	}
	if names, _ := os.ReadDir(outside); len(names) != 0 {
		t.Errorf("written outside the upper: %v", names)
	}

	// Uppers must be fresh; an upper that is a symlink is not followed.
	archive, cs := testTree(t)
	planted := t.TempDir()
	must(t, os.Symlink(outside, planted+"/d"))
	if err := Apply(bytes.NewReader(archive), cs, []Layer{{Dst: "/", Upper: planted}}, nil, uid, gid); !errors.Is(err, ErrUpperNotEmpty) {
		t.Errorf("non-empty upper: err = %v", err)
	}
	link := t.TempDir() + "/link"
	must(t, os.Symlink(t.TempDir(), link))
	if err := Apply(bytes.NewReader(archive), cs, []Layer{{Dst: "/", Upper: link}}, nil, uid, gid); err == nil {
		t.Error("an upper that is a symlink was followed")
	}
	if names, _ := os.ReadDir(outside); len(names) != 0 {
		t.Errorf("written outside the upper: %v", names)
	}
}

func TestApplyKeepModesTimes(t *testing.T) {
	entries := []Entry{
		{Path: "/a", Kind: KindDir, Mode: 0o700},
		{Path: "/a/b", Kind: KindDir, Mode: 0o750},
		{Path: "/a/b/c", Kind: KindFile, Mode: 0o640},
		{Path: "/none", Kind: KindFile, Mode: 0},
		{Path: "/s", Kind: KindDir, Mode: 0o1777},
		{Path: "/x", Kind: KindSymlink, Mode: 0o777, Link: "a/b/c"},
	}
	archive := encode(t, entries, map[string]string{"/a/b/c": "c", "/none": "no perms"})
	cs, err := ReadArchive(bytes.NewReader(archive), DefaultLimits())
	must(t, err)
	up := t.TempDir()
	// Modes are set explicitly: no umask matters. (Without root, directories
	// are opened by their owner to set them, so the owner's bits must survive.)
	mask := 0o777
	if os.Geteuid() != 0 {
		mask = 0o077
	}
	old := syscall.Umask(mask)
	err = Apply(bytes.NewReader(archive), cs, []Layer{{Dst: "/", Upper: up}}, func(e Entry) bool { return e.Path != "/a" && e.Path != "/a/b" }, os.Getuid(), os.Getgid())
	syscall.Umask(old)
	must(t, err)
	for p, mode := range map[string]uint32{
		"/a": unix.S_IFDIR | 0o755, "/a/b": unix.S_IFDIR | 0o755, "/a/b/c": unix.S_IFREG | 0o640,
		"/none": unix.S_IFREG, "/s": unix.S_IFDIR | 0o1777, "/x": unix.S_IFLNK | 0o777,
	} {
		var st unix.Stat_t
		must(t, unix.Lstat(up+p, &st))
		if st.Mode != mode {
			t.Errorf("%s: mode %o, want %o", p, st.Mode, mode)
		}
		if st.Mtim.Sec != 0 || st.Mtim.Nsec != 0 || st.Atim.Sec != 0 {
			t.Errorf("%s: times %v %v, want the epoch", p, st.Atim, st.Mtim)
		}
		if int(st.Uid) != os.Getuid() || int(st.Gid) != os.Getgid() {
			t.Errorf("%s: owner %d:%d", p, st.Uid, st.Gid)
		}
	}
}

func TestApplyLayers(t *testing.T) {
	root, app := t.TempDir(), t.TempDir()
	writeFile(t, root+"/etc/x", "x", 0o644)
	writeFile(t, root+"/tests/test_evil.py", "def test(): pass", 0o644)
	writeFile(t, app+"/main.py", "print()", 0o644)
	cs, archive := extract(t, []Layer{{Dst: "/", Upper: root, Hide: []string{"/proc"}}, {Dst: "/app", Upper: app}}, DefaultLimits())

	root2, app2 := t.TempDir(), t.TempDir()
	grader := []Layer{{Dst: "/", Upper: root2, Hide: []string{"/proc", "/tests"}}, {Dst: "/app", Upper: app2}}
	must(t, Apply(bytes.NewReader(archive), cs, grader, nil, os.Getuid(), os.Getgid()))
	for p, want := range map[string]string{root2 + "/etc/x": "x", app2 + "/main.py": "print()"} {
		if b, err := os.ReadFile(p); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v", p, b, err)
		}
	}
	for _, p := range []string{root2 + "/tests", root2 + "/app"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	err := Apply(bytes.NewReader(archive), cs, []Layer{{Dst: "/app", Upper: t.TempDir()}}, nil, os.Getuid(), os.Getgid())
	if !errors.Is(err, ErrLayers) {
		t.Errorf("entries with no layer: err = %v", err)
	}
}

// Names tar can carry are carried exactly, both ways.
func TestApplyNames(t *testing.T) {
	names := []string{"/nl\nname", "/bad\xffname", "/tab\there", "/" + strings.Repeat("n", 255), "/sp ace", "/back\\slash"}
	var entries []Entry
	content := map[string]string{}
	for _, n := range names {
		entries = append(entries, Entry{Path: n, Kind: KindFile, Mode: 0o644})
		content[n] = n
	}
	entries = append(entries, Entry{Path: "/link\n", Kind: KindSymlink, Mode: 0o777, Link: "\xff\n../x"})
	sortEntries(entries)
	archive := encode(t, entries, content)
	cs, err := ReadArchive(bytes.NewReader(archive), DefaultLimits())
	must(t, err)
	up := t.TempDir()
	must(t, Apply(bytes.NewReader(archive), cs, []Layer{{Dst: "/", Upper: up}}, nil, os.Getuid(), os.Getgid()))
	cs2, again := extract(t, []Layer{{Dst: "/", Upper: up}}, DefaultLimits())
	if !bytes.Equal(again, archive) || cs2.Digest != cs.Digest {
		t.Fatal("extract(apply(archive)) != archive")
	}
}

func sortEntries(es []Entry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].Path < es[j-1].Path; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// Whiteouts and opaque dirs land as overlay markers (root: mknod, trusted xattrs).
func TestApplyOverlayMarkers(t *testing.T) {
	base := tmpfs(t)
	entries := []Entry{
		{Path: "/gone", Kind: KindWhiteout},
		{Path: "/o", Kind: KindDir, Mode: 0o755, Opaque: true},
		{Path: "/o/gone", Kind: KindWhiteout},
	}
	archive := encode(t, entries, nil)
	cs, err := ReadArchive(bytes.NewReader(archive), DefaultLimits())
	must(t, err)
	up := base + "/up"
	mkdirs(t, up)
	must(t, Apply(bytes.NewReader(archive), cs, []Layer{{Dst: "/", Upper: up}}, nil, 1073741824+5, 1073741824+5))
	cs2, again := extract(t, []Layer{{Dst: "/", Upper: up}}, DefaultLimits())
	if !bytes.Equal(again, archive) {
		t.Fatalf("round trip differs: %+v", cs2.Entries)
	}
}

func FuzzReadArchive(f *testing.F) {
	valid, _ := testTree(f)
	markers := encode(f, []Entry{
		{Path: "/gone", Kind: KindWhiteout},
		{Path: "/o", Kind: KindDir, Mode: 0o1755, Opaque: true},
		{Path: "/o/caf\u00e9", Kind: KindSymlink, Mode: 0o777, Link: strings.Repeat("../", 50)},
		{Path: "/o/" + strings.Repeat("p", 120), Kind: KindFile, Mode: 0o600},
	}, map[string]string{"/o/" + strings.Repeat("p", 120): "x"})
	seeds := [][]byte{
		valid, markers, nil, make([]byte, 1024), valid[:len(valid)-1024], valid[:600],
		craft(f, sym("a", "/etc"), reg("a/passwd", "x")),
		craft(f, reg("b", "1"), reg("a", "2")),
		craft(f, reg("a", "1"), hdr{h: tar.Header{Typeflag: tar.TypeLink, Name: "b", Linkname: "a", ModTime: epoch, Format: tar.FormatUSTAR}}),
	}
	if len(seeds) == 0 {
		f.Fatal("empty seed corpus")
	}
	for _, s := range [][]byte{valid, markers} {
		if _, err := ReadArchive(bytes.NewReader(s), DefaultLimits()); err != nil {
			f.Fatalf("a valid seed is refused: %v", err)
		}
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ar := NewReader(bytes.NewReader(data), Limits{MaxFiles: 100, MaxBytes: 1 << 20, MaxDepth: 16, MaxPathLen: 1024})
		var entries []Entry
		content := map[string]string{}
		for {
			e, err := ar.Next()
			if err == io.EOF {
				break
			}
			if err == nil && e.Kind == KindFile {
				var b []byte
				b, err = io.ReadAll(ar)
				content[e.Path] = string(b)
			}
			if err != nil {
				var fe *FormatError
				var le *LimitError
				if !errors.As(err, &fe) && !errors.As(err, &le) {
					t.Fatalf("untyped error %T: %v", err, err)
				}
				return
			}
			entries = append(entries, *e)
		}
		// Accepted: it is exactly what Extract writes for these entries.
		if again := encode(t, entries, content); !bytes.Equal(again, data) {
			t.Fatalf("accepted a non-canonical archive")
		}
		h := sha256.Sum256(data)
		if ar.Digest() != "sha256:"+hex.EncodeToString(h[:]) {
			t.Fatalf("digest %s", ar.Digest())
		}
		for _, e := range entries {
			if e.Kind == KindFile && e.SHA256 != sha(content[e.Path]) {
				t.Fatalf("%s: sha256 %s", e.Path, e.SHA256)
			}
		}
	})
}

// ---- the archive format --------------------------------------------------------

func TestArchiveFormat(t *testing.T) {
	up := t.TempDir()
	writeFile(t, up+"/b/file", "content", 0o640)
	writeFile(t, up+"/"+strings.Repeat("n", 120), "ascii long name, ustar split impossible", 0o644)
	writeFile(t, up+"/"+strings.Repeat("d", 90)+"/"+strings.Repeat("f", 90), "ustar prefix split", 0o644)
	writeFile(t, up+"/caf\u00e9", "non-ascii", 0o644)
	must(t, os.Symlink(strings.Repeat("t", 150), up+"/longlink"))
	must(t, os.Chtimes(up+"/b/file", time.Now(), time.Now()))
	cs, archive := extract(t, []Layer{{Dst: "/", Upper: up}}, DefaultLimits())

	tr := tar.NewReader(bytes.NewReader(archive))
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(t, err)
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || h.ModTime.Unix() != 0 || !h.AccessTime.IsZero() || !h.ChangeTime.IsZero() {
			t.Errorf("%q: owner or time fields set: %+v", h.Name, h)
		}
		wantPAX := map[string]bool{strings.Repeat("n", 120): true, "caf\u00e9": true, "longlink": true}[h.Name]
		if gotPAX := len(h.PAXRecords) > 0; gotPAX != wantPAX {
			t.Errorf("%q: PAX records %v, want PAX %v", h.Name, h.PAXRecords, wantPAX)
		}
		for k := range h.PAXRecords {
			if k != "path" && k != "linkpath" {
				t.Errorf("%q: PAX record %q", h.Name, k)
			}
		}
	}
	wantNames := []string{"b/", "b/file", "caf\u00e9", strings.Repeat("d", 90) + "/", strings.Repeat("d", 90) + "/" + strings.Repeat("f", 90), "longlink", strings.Repeat("n", 120)}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("names %q, want %q", names, wantNames)
	}
	if cs.Files != 4 || cs.Bytes != int64(len("content")+len("ascii long name, ustar split impossible")+len("ustar prefix split")+len("non-ascii")) {
		t.Errorf("Files %d Bytes %d", cs.Files, cs.Bytes)
	}
}

// Same changes made in another order give the same bytes.
func TestExtractDeterministic(t *testing.T) {
	build := func(order []string) []byte {
		up := t.TempDir()
		for _, n := range order {
			writeFile(t, up+"/"+n, n, 0o644)
		}
		must(t, os.Chtimes(up+"/"+order[0], time.Unix(12345, 0), time.Unix(12345, 0)))
		_, b := extract(t, []Layer{{Dst: "/", Upper: up}}, DefaultLimits())
		return b
	}
	a := build([]string{"a/x", "b", "a-b", "a/y", "c/d/e"})
	b := build([]string{"c/d/e", "a/y", "b", "a-b", "a/x"})
	if !bytes.Equal(a, b) {
		t.Fatal("same tree, different archives")
	}
}

func TestExtractOpaqueMarkerOrder(t *testing.T) {
	base := tmpfs(t)
	up := base + "/up"
	writeFile(t, up+"/d/!first", "sorts before the marker by tar name", 0o644)
	writeFile(t, up+"/d/z", "z", 0o644)
	must(t, unix.Setxattr(up+"/d", xattrOpaque, []byte("y"), 0))
	_, archive := extract(t, []Layer{{Dst: "/", Upper: up}}, DefaultLimits())
	tr := tar.NewReader(bytes.NewReader(archive))
	var names []string
	for h, err := tr.Next(); err != io.EOF; h, err = tr.Next() {
		must(t, err)
		names = append(names, h.Name)
	}
	if want := []string{"d/", "d/.wh..wh..opq", "d/!first", "d/z"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("names %q, want %q", names, want)
	}
}

// Extract an upper into the canonical archive, then apply what a policy keeps
// to a fresh upper.
func ExampleExtract() {
	upper, _ := os.MkdirTemp("", "upper")
	defer os.RemoveAll(upper)
	os.WriteFile(filepath.Join(upper, "main.py"), []byte("print('hi')\n"), 0o644)
	unix.Chmod(filepath.Join(upper, "main.py"), 0o644) // whatever the umask
	os.Symlink("/etc/shadow", filepath.Join(upper, "evil"))

	var archive bytes.Buffer
	cs, err := Extract([]Layer{{Dst: "/app", Upper: upper}}, DefaultLimits(), &archive)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range cs.Entries {
		fmt.Printf("%s %s %o %q\n", e.Kind, e.Path, e.Mode, e.Link)
	}
	fmt.Println(cs.Digest)

	fresh, _ := os.MkdirTemp("", "grader-upper")
	defer os.RemoveAll(fresh)
	keep := func(e Entry) bool { return e.Kind != KindSymlink }
	err = Apply(bytes.NewReader(archive.Bytes()), cs, []Layer{{Dst: "/app", Upper: fresh}}, keep, os.Getuid(), os.Getgid())
	b, _ := os.ReadFile(filepath.Join(fresh, "main.py"))
	fmt.Printf("%v %q\n", err, b)
	// Output:
	// symlink /app/evil 777 "/etc/shadow"
	// file /app/main.py 644 ""
	// sha256:6e2b4a4e51e881e51b94c2ae6e8b5ca2367bd274a91c8235db93e2032619c01c
	// <nil> "print('hi')\n"
}

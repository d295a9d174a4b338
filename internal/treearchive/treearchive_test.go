package treearchive

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/testcorpus"
)

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" || os.Getenv("PROCTOR_NO_SKIP") != "" {
		t.Fatal("cannot run here: needs root (under CI a skipped test is a failure)")
	}
	t.Skip("needs root (owners, device nodes)")
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// everyKind fills dir with an entry of every kind a tree can hold, with
// the attributes that are hard to carry.
func everyKind(t *testing.T, dir string) {
	t.Helper()
	w := func(rel, content string, mode os.FileMode) {
		p := filepath.Join(dir, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o600))
		must(t, os.Chmod(p, mode))
	}
	w("plain.txt", "hello\n", 0o644)
	w("bin/setuid", "#!/bin/sh\n", 0o755|os.ModeSetuid)
	w("bin/setgid", "#!/bin/sh\n", 0o755|os.ModeSetgid)
	w("locked", "nobody reads me\n", 0)
	w("empty-file", "", 0o644)
	w(strings.Repeat("n", 255), "a long name\n", 0o644)
	w("\xc3\x28 not utf-8", "bytes\n", 0o644)
	w(".wh.looks-like-a-whiteout", "kept verbatim\n", 0o644)
	w("a/b/linked", "one inode, three names\n", 0o640)
	must(t, os.Link(filepath.Join(dir, "a/b/linked"), filepath.Join(dir, "hard-1")))
	must(t, os.MkdirAll(filepath.Join(dir, "z"), 0o755))
	must(t, os.Link(filepath.Join(dir, "a/b/linked"), filepath.Join(dir, "z/hard-2")))
	must(t, os.MkdirAll(filepath.Join(dir, "empty/dirs/too"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "sticky"), 0o755))
	must(t, os.Chmod(filepath.Join(dir, "sticky"), 0o777|os.ModeSticky))
	must(t, os.MkdirAll(filepath.Join(dir, "shared"), 0o755))
	must(t, os.Chmod(filepath.Join(dir, "shared"), 0o775|os.ModeSetgid))
	w("readonly/inside", "in a directory nobody may write\n", 0o644)
	must(t, os.Chmod(filepath.Join(dir, "readonly"), 0o500))
	deep := dir
	for i := 0; i < 100; i++ {
		deep = filepath.Join(deep, "d")
	}
	must(t, os.MkdirAll(deep, 0o755))
	must(t, os.WriteFile(filepath.Join(deep, "bottom"), []byte("deep\n"), 0o644))
	for name, target := range map[string]string{
		"abs-link": "/etc/passwd", "dangling": "nowhere", "up": "../../../../../../etc/shadow",
		"long-link": strings.Repeat("x/", 1500), "odd-link": "\xff\xfe raw", "dot": ".",
	} {
		must(t, os.Symlink(target, filepath.Join(dir, name)))
	}
	mk := func(rel string, mode uint32, dev int) {
		must(t, syscall.Mknod(filepath.Join(dir, rel), mode, dev))
	}
	must(t, os.MkdirAll(filepath.Join(dir, "dev"), 0o755))
	mk("dev/null", syscall.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
	mk("dev/console", syscall.S_IFCHR|0o600, int(unix.Mkdev(5, 1)))
	mk("dev/sda1", syscall.S_IFBLK|0o660, int(unix.Mkdev(8, 1)))
	mk("dev/big", syscall.S_IFCHR|0o600, int(unix.Mkdev(4095, 1048575)))
	mk("run-fifo", syscall.S_IFIFO|0o620, 0)
	l, err := net.Listen("unix", filepath.Join(dir, "sock"))
	must(t, err)
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	// Owners and times, last (chown clears set-id bits: set them again).
	for rel, own := range map[string][2]int{"plain.txt": {100, 200}, "bin": {0, 50}, "z": {65534, 65534}, "dev/sda1": {0, 6}, "sock": {33, 33}, "dangling": {7, 8}} {
		must(t, os.Lchown(filepath.Join(dir, rel), own[0], own[1]))
	}
	stamp := time.Date(2023, 4, 5, 6, 7, 8, 123456789, time.UTC)
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		must(t, err)
		ts := []unix.Timespec{unix.NsecToTimespec(stamp.UnixNano()), unix.NsecToTimespec(stamp.UnixNano())}
		must(t, unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW))
		stamp = stamp.Add(time.Second + time.Nanosecond)
		return nil
	})
}

// attrs is what a round trip must reproduce of one entry.
type attrs struct {
	typ            uint32
	mode, uid, gid uint32
	mtime          int64
	size           int64
	rdev           uint64
	link, content  string
}

// snapshot lists every entry under dir with its attributes, and the hard
// link groups (paths sharing an inode).
func snapshot(t *testing.T, dir string) (map[string]attrs, []string) {
	t.Helper()
	out := map[string]attrs{}
	groups := map[uint64][]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		must(t, err)
		rel, _ := filepath.Rel(dir, p)
		var st unix.Stat_t
		must(t, unix.Lstat(p, &st))
		a := attrs{typ: st.Mode & unix.S_IFMT, mode: st.Mode & 0o7777, uid: st.Uid, gid: st.Gid, mtime: st.Mtim.Nano(), rdev: st.Rdev}
		switch a.typ {
		case unix.S_IFREG:
			b, err := os.ReadFile(p)
			must(t, err)
			a.size, a.content = st.Size, string(b)
			if st.Nlink > 1 {
				groups[st.Ino] = append(groups[st.Ino], rel)
			}
		case unix.S_IFLNK:
			a.link, err = os.Readlink(p)
			must(t, err)
		}
		if rel == "." {
			a.mtime = 0 // the root's time is the caller's
		}
		out[rel] = a
		return nil
	})
	var g []string
	for _, paths := range groups {
		sort.Strings(paths)
		g = append(g, strings.Join(paths, " "))
	}
	sort.Strings(g)
	return out, g
}

func merkle(t *testing.T, dir string) string {
	t.Helper()
	d, err := task.DigestTree(dir, task.DigestOptions{Special: []string{"."}})
	must(t, err)
	return d.Digest
}

// roundTrip packs src, checks the archive, unpacks it and returns where.
func roundTrip(t *testing.T, src string) (archive []byte, dst string) {
	t.Helper()
	var buf bytes.Buffer
	sum, err := Pack(src, &buf, Limits{})
	must(t, err)
	vs, tree, err := Verify(bytes.NewReader(buf.Bytes()), Limits{})
	must(t, err)
	if *vs != *sum {
		t.Fatalf("Verify %+v, Pack %+v", vs, sum)
	}
	if want := merkle(t, src); tree != want {
		t.Fatalf("Verify's tree digest %s, the tree's %s", tree, want)
	}
	dst = filepath.Join(t.TempDir(), "out")
	must(t, os.Mkdir(dst, 0o700))
	us, err := Unpack(bytes.NewReader(buf.Bytes()), dst, UnpackOptions{Owners: true})
	must(t, err)
	if *us != *sum {
		t.Fatalf("Unpack %+v, Pack %+v", us, sum)
	}
	return buf.Bytes(), dst
}

// TestRoundTrip: a tree holding every kind of entry (devices, a fifo, a
// socket, set-id and sticky bits, owners, odd names and link targets, hard
// links, empty and unwritable directories, 100 levels, nanosecond times)
// comes back identical: the same Merkle digest, every attribute, the hard
// links as hard links. Packing it again gives the same bytes.
func TestRoundTrip(t *testing.T) {
	requireRoot(t)
	src := filepath.Join(t.TempDir(), "src")
	must(t, os.Mkdir(src, 0o755))
	everyKind(t, src)
	archive, dst := roundTrip(t, src)
	again, err := packBytes(src)
	must(t, err)
	if !bytes.Equal(archive, again) {
		t.Fatal("two packings of one tree differ")
	}
	if got, want := merkle(t, dst), merkle(t, src); got != want {
		t.Fatalf("unpacked tree %s, packed %s", got, want)
	}
	a, ga := snapshot(t, src)
	b, gb := snapshot(t, dst)
	for p, x := range a {
		if y, ok := b[p]; !ok {
			t.Errorf("%q: missing after the round trip", p)
		} else if x != y {
			t.Errorf("%q: %+v, after the round trip %+v", p, x, y)
		}
	}
	if len(a) != len(b) {
		t.Errorf("%d entries, %d after the round trip", len(a), len(b))
	}
	if strings.Join(ga, "|") != strings.Join(gb, "|") || len(ga) != 1 {
		t.Errorf("hard links %q, after the round trip %q", ga, gb)
	}
}

func packBytes(dir string) ([]byte, error) {
	var buf bytes.Buffer
	_, err := Pack(dir, &buf, Limits{})
	return buf.Bytes(), err
}

// A Debian root as mmdebstrap makes it travels whole: digest, owners,
// set-id programs and device nodes.
func TestRoundTripDebianRoot(t *testing.T) {
	requireRoot(t)
	if raceEnabled {
		t.Skip("covered by the run without the race detector (it would only repeat packing and hashing 286 MB under it)")
	}
	src := testcorpus.TrixieGit(t)
	_, dst := roundTrip(t, src)
	if got, want := merkle(t, dst), merkle(t, src); got != want {
		t.Fatalf("unpacked root %s, packed %s", got, want)
	}
	a, _ := snapshot(t, src)
	b, _ := snapshot(t, dst)
	diffs := 0
	for p, x := range a {
		if b[p] != x {
			if diffs++; diffs < 10 {
				t.Errorf("%q: %+v, after the round trip %+v", p, x, b[p])
			}
		}
	}
	if c := b["dev/console"]; c.typ != unix.S_IFCHR || c.rdev != unix.Mkdev(5, 1) {
		t.Errorf("dev/console after the round trip: %+v", c)
	}
}

// hostile archives: each breaks one rule; Verify and Unpack refuse each,
// and Unpack writes nothing outside its directory.
func TestHostileArchives(t *testing.T) {
	requireRoot(t)
	outside := filepath.Join(t.TempDir(), "outside")
	must(t, os.Mkdir(outside, 0o755))
	root := ent{kind: 'd', path: ".", mode: 0o755}
	file := func(p, content string) ent { return ent{kind: 'f', path: p, mode: 0o644, content: content} }
	good := build(root, file("a", "x"), ent{kind: 'd', path: "b", mode: 0o755}, file("b/c", "y"))
	if _, _, err := Verify(bytes.NewReader(good), Limits{}); err != nil {
		t.Fatalf("setup: a good archive is refused: %v", err)
	}
	cases := map[string][]byte{
		"no header":                 good[3:],
		"trailing bytes":            append(append([]byte{}, good...), 0),
		"two ends":                  append(append([]byte{}, good...), good[len(good)-4:]...),
		"root not first":            build(file("a", "x")),
		"out of order":              build(root, file("b", "x"), file("a", "y")),
		"duplicate":                 build(root, file("a", "x"), file("a", "y")),
		"dot dot":                   build(root, file("../escape", "x")),
		"absolute":                  build(root, file("/etc/cron.d/x", "x")),
		"empty component":           build(root, ent{kind: 'd', path: "b", mode: 0o755}, file("b//c", "x")),
		"dot component":             build(root, ent{kind: 'd', path: "b", mode: 0o755}, file("b/./c", "x")),
		"NUL in a name":             build(root, file("a\x00b", "x")),
		"parent is a file":          build(root, file("a", "x"), file("a/b", "y")),
		"parent is a symlink":       build(root, ent{kind: 'l', path: "a", target: outside}, file("a/planted", "x")),
		"parent comes later":        build(root, file("b/c", "x"), ent{kind: 'd', path: "b", mode: 0o755}),
		"hard link out":             build(root, ent{kind: 'h', path: "a", target: "../../etc/passwd"}),
		"hard link via symlink":     build(root, ent{kind: 'l', path: "a", target: outside}, ent{kind: 'h', path: "b", target: "a/x"}),
		"hard link to a plain file": build(root, file("a", "x"), ent{kind: 'h', path: "b", target: "a", mode: 0o644}),
		"linked file never linked":  build(root, ent{kind: 'F', path: "a", mode: 0o644, content: "x"}),
		"hard link meta differs":    build(root, ent{kind: 'F', path: "a", mode: 0o644, content: "x"}, ent{kind: 'h', path: "b", target: "a", mode: 0o4755}),
		"mode beyond 07777":         build(root, ent{kind: 'f', path: "a", mode: 0o17777, content: "x"}),
		"symlink with a mode":       build(root, ent{kind: 'l', path: "a", target: "b", mode: 0o777}),
		"empty symlink":             build(root, ent{kind: 'l', path: "a", target: ""}),
		"unknown kind":              build(root, ent{kind: 'x', path: "a"}),
		"end miscounts":             replaceLast(build(root, file("a", "x")), 3),
		"non-minimal varint":        nonMinimal(build(root, file("a", "x"))),
		"a 1 TB file":               build(root, ent{kind: 'f', path: "a", mode: 0o644, size: 1 << 40}),
		"a name of 256 bytes":       build(root, file(strings.Repeat("n", 256), "x")),
		"a major beyond 12 bits":    build(root, ent{kind: 'b', path: "sda", mode: 0o600, major: 4104}),
		"a minor beyond 20 bits":    build(root, ent{kind: 'c', path: "tty", mode: 0o600, major: 4, minor: 1 << 20}),
		"uid -1":                    build(root, ent{kind: 'f', path: "a", mode: 0o4755, uid: 1<<32 - 1, content: "x"}),
		"gid -1":                    build(root, ent{kind: 'f', path: "a", mode: 0o644, gid: 1<<32 - 1, content: "x"}),
	}
	for cut := 1; cut < len(good); cut += 3 {
		cases[fmt.Sprintf("truncated at %d", cut)] = good[:cut]
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			if _, _, err := Verify(bytes.NewReader(data), Limits{}); err == nil {
				t.Error("Verify accepted it")
			} else if !errors.Is(err, ErrFormat) && !isLimit(err) {
				t.Errorf("Verify: %v, want a format or limit error", err)
			}
			dst := filepath.Join(t.TempDir(), "dst")
			must(t, os.Mkdir(dst, 0o700))
			if _, err := Unpack(bytes.NewReader(data), dst, UnpackOptions{Owners: true}); err == nil {
				t.Error("Unpack accepted it")
			} else if strings.Contains(err.Error(), "\n") {
				t.Errorf("message on several lines: %q", err)
			}
			if ents, _ := os.ReadDir(outside); len(ents) > 0 {
				t.Errorf("written outside the destination: %v", ents)
			}
		})
	}
	// A flipped content byte is a canonical archive of another tree: the
	// digest tells (the caller checks it).
	bad := bytes.Replace(good, []byte("y"), []byte("z"), 1)
	s1, _, err1 := Verify(bytes.NewReader(good), Limits{})
	s2, _, err2 := Verify(bytes.NewReader(bad), Limits{})
	if err1 != nil || err2 != nil || s1.Digest == s2.Digest {
		t.Errorf("a flipped byte: %v %v, digests %v %v", err1, err2, s1, s2)
	}
}

func isLimit(err error) bool {
	var le *LimitError
	return errors.As(err, &le)
}

// Limits bound what Pack packs and what a reader accepts.
func TestLimits(t *testing.T) {
	src := t.TempDir()
	for i := range 5 {
		must(t, os.WriteFile(filepath.Join(src, fmt.Sprint(i)), []byte("0123456789"), 0o644))
	}
	for name, lim := range map[string]Limits{"entries": {MaxEntries: 3}, "bytes": {MaxBytes: 25}, "path length": {MaxPathLen: 0}} {
		if name == "path length" {
			continue
		}
		if _, err := Pack(src, &bytes.Buffer{}, lim); !isLimit(err) {
			t.Errorf("Pack past %s: %v", name, err)
		}
		data, err := packBytes(src)
		must(t, err)
		if _, _, err := Verify(bytes.NewReader(data), lim); !isLimit(err) {
			t.Errorf("Verify past %s: %v", name, err)
		}
	}
}

// ent is an entry written by hand for the hostile archives.
type ent struct {
	kind         byte
	path, target string
	mode         uint32
	content      string
	size         int64 // declared size, when not len(content)
	major, minor uint64
	uid, gid     uint32
	sec          int64
	nsec         uint32
}

// build encodes entries as Pack would, whatever they say.
func build(es ...ent) []byte {
	var buf bytes.Buffer
	e := &encoder{w: bufioWriter(&buf)}
	e.raw([]byte(magic))
	var bytesTotal int64
	for _, x := range es {
		e.byte(x.kind)
		e.str(x.path)
		e.meta(meta{mode: x.mode, uid: x.uid, gid: x.gid, sec: x.sec, nsec: x.nsec})
		switch x.kind {
		case 'f', 'F':
			size := x.size
			if size == 0 {
				size = int64(len(x.content))
			}
			e.uvarint(uint64(size))
			e.raw([]byte(x.content))
			bytesTotal += size
		case 'h', 'l':
			e.str(x.target)
		case 'c', 'b':
			e.uvarint(x.major)
			e.uvarint(x.minor)
		}
	}
	e.byte('E')
	e.uvarint(uint64(len(es)))
	e.uvarint(uint64(bytesTotal))
	e.w.Flush()
	return buf.Bytes()
}

// replaceLast sets the last byte (the end's byte count) to v.
func replaceLast(b []byte, v byte) []byte {
	b = append([]byte{}, b...)
	b[len(b)-1] = v
	return b
}

// nonMinimal re-encodes the end's entry count in two bytes.
func nonMinimal(b []byte) []byte {
	b = append([]byte{}, b...)
	n := b[len(b)-2]
	return append(b[:len(b)-2], n|0x80, 0x00, b[len(b)-1])
}

func bufioWriter(b *bytes.Buffer) *bufio.Writer { return bufio.NewWriter(b) }

// The reader never panics, never loops and never accepts more than its
// limits, whatever the bytes; seeded with real archives and hostile ones.
func FuzzVerify(f *testing.F) {
	src := f.TempDir()
	must(f, os.MkdirAll(filepath.Join(src, "d", "e"), 0o755))
	must(f, os.WriteFile(filepath.Join(src, "d", "f"), []byte("content\n"), 0o644))
	must(f, os.Link(filepath.Join(src, "d", "f"), filepath.Join(src, "g")))
	must(f, os.Symlink("d/f", filepath.Join(src, "l")))
	must(f, syscall.Mkfifo(filepath.Join(src, "p"), 0o600))
	real, err := packBytes(src)
	must(f, err)
	seeds := [][]byte{real, build(ent{kind: 'd', path: ".", mode: 0o755}), []byte(magic)}
	for _, s := range seeds {
		if len(s) == 0 {
			f.Fatal("empty seed")
		}
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, tree, err := Verify(bytes.NewReader(data), Limits{MaxEntries: 1000, MaxBytes: 1 << 20, MaxDepth: 16, MaxPathLen: 512})
		if err == nil && (s.Entries < 1 || !strings.HasPrefix(tree, "sha256:")) {
			t.Fatalf("accepted %+v %s", s, tree)
		}
	})
}

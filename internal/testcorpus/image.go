package testcorpus

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Layer is one layer an image adds over its base, as a Dockerfile's COPY
// or RUN would leave it: files by path (relative to /, parents made),
// and paths the layer deletes (written as whiteouts).
type Layer struct {
	Files   map[string]string // path -> content (mode 0755 for "#!" scripts, else 0644)
	Links   map[string]string // path -> symlink target
	Deletes []string
}

// DebianImage writes a docker-save archive of an image whose first layer
// is the Debian root at root (made by DebianRoot, owners, modes, hard
// links and symlinks kept as a debootstrap-based base image has them; its
// device nodes left out, as image builders leave /dev empty), with the
// layers over it, a config with the usual PATH and workdir, tagged tag. It
// returns the archive's path, under a fresh temporary directory.
func DebianImage(t testing.TB, root, tag, workdir string, layers ...Layer) string {
	t.Helper()
	var ls []v1.Layer
	dir := t.TempDir()
	baseTar := filepath.Join(dir, "base.tar")
	f, err := os.Create(baseTar)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarRoot(root, f); err != nil {
		f.Close()
		t.Fatalf("packing %s: %v", root, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fast := tarball.WithCompressionLevel(gzip.BestSpeed)
	base, err := tarball.LayerFromFile(baseTar, fast)
	if err != nil {
		t.Fatal(err)
	}
	ls = append(ls, base)
	for _, l := range layers {
		b, err := l.tar()
		if err != nil {
			t.Fatal(err)
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, fast)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, layer)
	}
	img, err := mutate.AppendLayers(empty.Image, ls...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config = v1.Config{
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		WorkingDir: workdir,
		Cmd:        []string{"/bin/bash"},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		t.Fatalf("writing the image %s: %v", tag, err)
	}
	return out
}

// tarRoot writes the tree at root as a layer: sorted, owners and modes
// kept, hard links as links to their first name, /dev's entries left out.
func tarRoot(root string, w io.Writer) error {
	tw := tar.NewWriter(w)
	seen := map[[2]uint64]string{} // (dev, ino) -> first name, for hard links
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "dev/") {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		switch fi.Mode().Type() {
		case 0, fs.ModeDir, fs.ModeSymlink:
		default:
			return nil // fifos, sockets, devices: not in an image's layers
		}
		link := ""
		if fi.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = rel
		if fi.IsDir() {
			h.Name += "/"
		}
		h.Uid, h.Gid, h.Uname, h.Gname = int(st.Uid), int(st.Gid), "", ""
		h.ModTime = h.ModTime.Truncate(0).UTC()
		h.AccessTime, h.ChangeTime = fi.ModTime().UTC(), fi.ModTime().UTC()
		h.Format = tar.FormatPAX
		if fi.Mode().IsRegular() && st.Nlink > 1 {
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := seen[key]; ok {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
				return tw.WriteHeader(h)
			}
			seen[key] = rel
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			if _, err := io.Copy(tw, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// tar is the layer as a tar stream: its files' parent directories, the
// files, and a whiteout for each deletion.
func (l Layer) tar() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	var names []string
	for p := range l.Files {
		names = append(names, p)
	}
	for p := range l.Links {
		names = append(names, p)
	}
	for _, p := range append(slices.Clone(names), l.Deletes...) {
		for d := filepath.Dir(p); d != "." && d != "/"; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var ds []string
	for d := range dirs {
		ds = append(ds, d)
	}
	sort.Strings(ds)
	for _, d := range ds {
		if err := tw.WriteHeader(&tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	sort.Strings(names)
	for _, p := range names {
		if target, ok := l.Links[p]; ok {
			if err := tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeSymlink, Linkname: target, Mode: 0o777, Format: tar.FormatPAX}); err != nil {
				return nil, err
			}
			continue
		}
		body := l.Files[p]
		mode := int64(0o644)
		if strings.HasPrefix(body, "#!") {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: mode, Size: int64(len(body)), Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, body); err != nil {
			return nil, err
		}
	}
	for _, p := range l.Deletes {
		wh := filepath.Join(filepath.Dir(p), ".wh."+filepath.Base(p))
		if err := tw.WriteHeader(&tar.Header{Name: wh, Typeflag: tar.TypeReg, Mode: 0o644, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

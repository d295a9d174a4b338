package rootimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// DefaultPath is the PATH of the image's config.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Options say what image Write makes. The zero value is not valid: Tag is
// required.
type Options struct {
	Tag     string   // the image's name, e.g. proctor-examples/debian:trixie
	Workdir string   // the config's working directory ("" : none)
	Cmd     []string // the config's command (default /bin/sh)
	// KeepOwners keeps each entry's owner and group as the root has them
	// (a Debian root's shadow group, its set-gid programs); false makes
	// every entry owned by root (a tree made by an ordinary user).
	KeepOwners bool
	// Layers are added over the root's, in order.
	Layers []Layer
}

// Layer is one layer an image adds over its base, as a Dockerfile's COPY
// or RUN would leave it: files by path (relative to /, parents made),
// symlinks, and paths the layer deletes (written as whiteouts).
type Layer struct {
	Files   map[string]string // path -> content (mode 0755 for "#!" scripts, else 0644)
	Links   map[string]string // path -> symlink target
	Deletes []string
}

// Write writes to out a docker-save archive of the image whose first
// layer is the tree at root.
func Write(root, out string, o Options) error {
	if o.Tag == "" {
		return errors.New("rootimage: no tag")
	}
	ref, err := name.NewTag(o.Tag)
	if err != nil {
		return err
	}
	// The root's layer goes through a file beside out: a Debian root is
	// hundreds of megabytes.
	f, err := os.CreateTemp(filepath.Dir(out), ".rootimage-layer-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := tarRoot(root, f, o.KeepOwners); err != nil {
		f.Close()
		return fmt.Errorf("packing %s: %w", root, err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	fast := tarball.WithCompressionLevel(gzip.BestSpeed)
	base, err := tarball.LayerFromFile(f.Name(), fast)
	if err != nil {
		return err
	}
	layers := []v1.Layer{base}
	for _, l := range o.Layers {
		b, err := l.tar()
		if err != nil {
			return err
		}
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }, fast)
		if err != nil {
			return err
		}
		layers = append(layers, layer)
	}
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cmd := o.Cmd
	if len(cmd) == 0 {
		cmd = []string{"/bin/sh"}
	}
	cf.Config = v1.Config{Env: []string{"PATH=" + DefaultPath}, WorkingDir: o.Workdir, Cmd: cmd}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return fmt.Errorf("writing the image %s: %w", o.Tag, err)
	}
	return nil
}

// tarRoot writes the tree at root as a layer: sorted, modes kept, owners
// kept or made root's, hard links as links to their first name, /dev's
// entries and special files left out.
func tarRoot(root string, w io.Writer, keepOwners bool) error {
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
		st := fi.Sys().(*syscall.Stat_t)
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
		if keepOwners {
			h.Uid, h.Gid = int(st.Uid), int(st.Gid)
		}
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

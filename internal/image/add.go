package image

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// Raw files kept beside each stored image: the manifest and the config
// exactly as their digests cover them, so that an image built on top of
// a stored one can name its layers without their content.
const (
	rawManifest = "manifest.json"
	rawConfig   = "config.json"
)

// BuildInfo is the provenance of an image built on this machine from a
// Dockerfile.
type BuildInfo struct {
	Dockerfile    string `json:"dockerfile"`     // the Dockerfile's path, as the builder was given it
	ContextDigest string `json:"context_digest"` // "sha256:…" of the build context (see imagebuild)
	// DockerfileDigest is the sha256 of the Dockerfile's bytes.
	DockerfileDigest string `json:"dockerfile_digest"`
	Target           string `json:"target,omitempty"` // the stage built, when not the last
}

// Add stores an image made on this machine, such as one built from a
// Dockerfile, and records refs (normalised names) for it. Its layers are
// unpacked under the same rules as an imported image's. When base is a
// stored image whose layers are img's first layers (the manifest and the
// config's diff IDs say so), base's rootfs is cloned (files hard-linked:
// nothing ever writes a stored rootfs in place) and only the layers after
// them are read; their content may then be absent from img. An image
// already stored only gets the names.
func (s *Store) Add(img v1.Image, refs []string, base *Image, build *BuildInfo) (*Image, error) {
	var norm []string
	for _, r := range refs {
		n, err := normalise(r)
		if err != nil {
			return nil, err
		}
		if _, isDigest := refDigest(n); isDigest {
			return nil, fmt.Errorf("naming a built image %q: a name with a digest cannot be given", r)
		}
		norm = append(norm, n)
	}
	return s.addOnto(img, norm, base, build)
}

// Raw returns a stored image's manifest and config as their digests cover
// them. An image stored before the store kept them has neither: pulling
// or importing it again adds them.
func (s *Store) Raw(img *Image) (manifest, config []byte, err error) {
	dir := s.imageDir(img.Digest)
	if manifest, err = os.ReadFile(filepath.Join(dir, rawManifest)); err != nil {
		return nil, nil, fmt.Errorf("image %s: %w (pull or import it again)", img.Digest, err)
	}
	if config, err = os.ReadFile(filepath.Join(dir, rawConfig)); err != nil {
		return nil, nil, fmt.Errorf("image %s: %w (pull or import it again)", img.Digest, err)
	}
	if got := digestOf(manifest); got != img.Digest {
		return nil, nil, &TamperedError{Layer: "manifest of " + img.Digest, Want: img.Digest, Got: got}
	}
	return manifest, config, nil
}

// writeRaw writes img's manifest and config into dir.
func writeRaw(img v1.Image, dir string) error {
	m, err := img.RawManifest()
	if err != nil {
		return fmt.Errorf("reading the manifest: %w", err)
	}
	c, err := img.RawConfigFile()
	if err != nil {
		return fmt.Errorf("reading the config: %w", err)
	}
	if err := writeFileSync(filepath.Join(dir, rawManifest), m); err != nil {
		return err
	}
	return writeFileSync(filepath.Join(dir, rawConfig), c)
}

// keepRaw adds the raw manifest and config to a stored image that lacks
// them (stored by an earlier version), each by rename so that a reader
// never sees half a file.
func (s *Store) keepRaw(img v1.Image, digest string) error {
	dir := s.imageDir(digest)
	if _, err := os.Stat(filepath.Join(dir, rawConfig)); err == nil {
		return nil
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "raw-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := writeRaw(img, tmp); err != nil {
		return fmt.Errorf("keeping the manifest of %s: %w", digest, err)
	}
	for _, n := range []string{rawManifest, rawConfig} {
		if err := os.Rename(filepath.Join(tmp, n), filepath.Join(dir, n)); err != nil {
			return fmt.Errorf("keeping the manifest of %s: %w", digest, err)
		}
	}
	return nil
}

// baseLayers checks that base's layers are img's first ones and returns
// how many they are.
func (s *Store) baseLayers(base *Image, img v1.Image) (int, error) {
	rawM, rawC, err := s.Raw(base)
	if err != nil {
		return 0, err
	}
	bm, err := v1.ParseManifest(bytes.NewReader(rawM))
	if err != nil {
		return 0, fmt.Errorf("base %s: %w", base.Digest, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return 0, err
	}
	bc, err := v1.ParseConfigFile(bytes.NewReader(rawC))
	if err != nil {
		return 0, fmt.Errorf("base %s: %w", base.Digest, err)
	}
	n := len(bm.Layers)
	if len(m.Layers) < n || len(cf.RootFS.DiffIDs) < n || len(bc.RootFS.DiffIDs) != n {
		return 0, fmt.Errorf("base %s: its %d layers are not the image's first", base.Digest, n)
	}
	for i := range n {
		if m.Layers[i].Digest != bm.Layers[i].Digest || cf.RootFS.DiffIDs[i] != bc.RootFS.DiffIDs[i] {
			return 0, fmt.Errorf("base %s: layer %d is %s in the image, %s in the base", base.Digest, i, m.Layers[i].Digest, bm.Layers[i].Digest)
		}
	}
	return n, nil
}

// cloneTree makes dst (an existing empty directory) a copy of the tree at
// src, a stored rootfs: directories are made anew with src's owners,
// modes and times; everything else is hard-linked (copied when the file
// has as many links as the filesystem allows). Nothing is followed.
func cloneTree(src, dst string) error {
	sfd, err := unix.Open(src, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(sfd)
	dfd, err := unix.Open(dst, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := cloneDir(sfd, dfd); err != nil {
		return err
	}
	return copyDirMeta(sfd, dfd)
}

func cloneDir(sfd, dfd int) error {
	names, err := readNames(sfd)
	if err != nil {
		return err
	}
	for _, n := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(sfd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			err := unix.Linkat(sfd, n, dfd, n, 0)
			if err == unix.EMLINK && st.Mode&unix.S_IFMT == unix.S_IFREG {
				err = copyFileAt(sfd, dfd, n, &st)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", n, err)
			}
			continue
		}
		if err := unix.Mkdirat(dfd, n, 0o700); err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		sub, err := unix.Openat(sfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		dsub, err := unix.Openat(dfd, n, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			unix.Close(sub)
			return fmt.Errorf("%s: %w", n, err)
		}
		err = cloneDir(sub, dsub)
		if err == nil {
			err = copyDirMeta(sub, dsub)
		}
		unix.Close(sub)
		unix.Close(dsub)
		if err != nil {
			return fmt.Errorf("%s/%w", n, err)
		}
	}
	return nil
}

// copyDirMeta gives directory dfd the owner, mode and times of sfd.
func copyDirMeta(sfd, dfd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(sfd, &st); err != nil {
		return err
	}
	if err := unix.Fchown(dfd, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := unix.Fchmod(dfd, st.Mode&0o7777); err != nil {
		return err
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	return unix.UtimesNanoAt(dfd, ".", ts, 0)
}

// copyFileAt copies regular file n of sfd into dfd, with its owner, mode
// and times.
func copyFileAt(sfd, dfd int, n string, st *unix.Stat_t) error {
	in, err := unix.Openat(sfd, n, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	fin := os.NewFile(uintptr(in), n)
	defer fin.Close()
	out, err := unix.Openat(dfd, n, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	fout := os.NewFile(uintptr(out), n)
	defer fout.Close()
	if _, err := io.Copy(writerOnly{fout}, fin); err != nil {
		return err
	}
	if err := unix.Fchown(out, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := unix.Fchmod(out, st.Mode&0o7777); err != nil {
		return err
	}
	return unix.UtimesNanoAt(dfd, n, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

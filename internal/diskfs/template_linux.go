package diskfs

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Fixed identity of every template: the UUID, and the seed of the hash by
// which ext4 orders directory entries (readdir returns them in hash
// order), so that the same names list in the same order on every machine.
const fixedUUID = "9d0f3c52-6a4e-4b1d-8f2e-5c7a1b3e9f60"

// mkfsArgs format a template: 4 KiB blocks; no journal (a throwaway
// filesystem need not survive a crash); no blocks reserved for root; an
// inode per 8 KiB (agents make many small files); inode tables left
// uninitialised and never zeroed later (the mount's noinit_itable), which
// keeps the image sparse; no discard of a fresh file.
var mkfsArgs = []string{"-q", "-F", "-t", "ext4", "-b", "4096", "-m", "0", "-i", "8192", "-I", "256",
	"-O", "^has_journal,^resize_inode",
	"-E", "lazy_itable_init=1,lazy_journal_init=1,nodiscard,hash_seed=" + fixedUUID,
	"-U", fixedUUID, "-L", "proctor-scratch"}

// mkfsPaths are where mkfs.ext4 is looked for when it is not on PATH (an
// ordinary user's PATH often lacks the sbin directories).
var mkfsPaths = []string{"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"}

func findMkfs() (string, error) {
	if p, err := exec.LookPath("mkfs.ext4"); err == nil {
		return p, nil
	}
	for _, p := range mkfsPaths {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", ErrNoMkfs
}

// imageSize is the size of an image whose files can use at least size
// bytes: ext4 keeps 1/32 of it for inode tables (one 256-byte inode per
// 8 KiB) and up to 16 MiB of reserved clusters, plus bitmaps and group
// descriptors. Rounded up to a MiB.
func imageSize(size int64) int64 {
	const mib = 1 << 20
	n := (size + 32*mib) / 31 * 32
	return (n + mib - 1) / mib * mib
}

// templateName names the template of one image size and format.
func templateName(imgSize int64) string {
	h := sha256.Sum256([]byte(strings.Join(mkfsArgs, "\x00")))
	return fmt.Sprintf("ext4-%d-%s.img", imgSize, hex.EncodeToString(h[:6]))
}

// template returns the path of the formatted template of imgSize bytes in
// dir, formatting it the first time. Concurrent callers each format one
// and the first to publish it wins; the image is made without a name
// (O_TMPFILE) and linked into place whole, so a killed formatter leaves
// nothing.
func template(dir string, imgSize int64) (string, error) {
	p := filepath.Join(dir, templateName(imgSize))
	if fi, err := os.Stat(p); err == nil {
		if fi.Size() == imgSize && fi.Mode().IsRegular() {
			return p, nil
		}
		// Not what we made (a disk that filled while linking, a stray
		// file): made again.
		if err := os.Remove(p); err != nil {
			return "", &SetupError{Step: "replacing a damaged template", Err: err}
		}
	}
	mkfs, err := findMkfs()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", &SetupError{Step: "creating the template directory", Err: err}
	}
	f, err := tmpFile(dir)
	if err != nil {
		return "", &SetupError{Step: "creating a template in " + dir, Err: err}
	}
	defer f.Close()
	if err := f.Truncate(imgSize); err != nil {
		return "", &SetupError{Step: "sizing a template", Err: err}
	}
	cmd := exec.Command(mkfs, append(mkfsArgs, "/dev/fd/3")...)
	cmd.ExtraFiles = []*os.File{f}
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &SetupError{Step: "formatting a template", Err: fmt.Errorf("%s: %w: %s", mkfs, err, strings.TrimSpace(string(out)))}
	}
	err = unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", f.Fd()), unix.AT_FDCWD, p, unix.AT_SYMLINK_FOLLOW)
	if err != nil && !errors.Is(err, unix.EEXIST) {
		return "", &SetupError{Step: "publishing a template", Err: err}
	}
	return p, nil
}

// tmpFile opens a new file without a name in dir: it is freed when its
// last descriptor (or loop device) lets go.
func tmpFile(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("O_TMPFILE in %s: %w", dir, err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir, "(image)")), nil
}

// newImage makes a nameless, empty image of the template's size in dir:
// a hole, until written. fill writes the template into it.
func newImage(tmpl, dir string) (*os.File, error) {
	fi, err := os.Stat(tmpl)
	if err != nil {
		return nil, &SetupError{Step: "opening the template", Err: err}
	}
	img, err := tmpFile(dir)
	if err != nil {
		return nil, &SetupError{Step: "creating an image", Err: err}
	}
	if err := img.Truncate(fi.Size()); err != nil {
		img.Close()
		return nil, &SetupError{Step: "sizing an image", Err: err}
	}
	return img, nil
}

// fill copies the template into dst (an empty image, or the loop device
// over one), sparse as the template is: only its data (about 0.1 % of
// it, the formatted metadata) is copied, found with SEEK_DATA and
// SEEK_HOLE. Written through the loop device, the copy dirties no page
// of the image before it is attached (attaching writes those to the
// host's disk, and the blocks then cost their freeing).
func fill(dst *os.File, tmpl string) error {
	src, err := os.Open(tmpl)
	if err != nil {
		return &SetupError{Step: "opening the template", Err: err}
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return &SetupError{Step: "opening the template", Err: err}
	}
	if err := copySparse(dst, src, fi.Size()); err != nil {
		return &SetupError{Step: "copying the template", Err: err}
	}
	return nil
}

// copySparse copies the data segments of src (size bytes) to the same
// offsets of dst, leaving its holes holes.
func copySparse(dst, src *os.File, size int64) error {
	sfd, dfd := int(src.Fd()), int(dst.Fd())
	var off int64
	for off < size {
		start, err := unix.Seek(sfd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			return nil // only a hole is left
		}
		if err != nil {
			return fmt.Errorf("SEEK_DATA: %w", err)
		}
		end, err := unix.Seek(sfd, start, unix.SEEK_HOLE)
		if err != nil {
			return fmt.Errorf("SEEK_HOLE: %w", err)
		}
		if err := copyRange(dfd, sfd, start, end-start); err != nil {
			return err
		}
		off = end
	}
	return nil
}

// copyRange copies n bytes at off from sfd to the same offset of dfd: in
// the kernel where it can, else through a buffer.
func copyRange(dfd, sfd int, off, n int64) error {
	roff, woff := off, off
	for n > 0 {
		c, err := unix.CopyFileRange(sfd, &roff, dfd, &woff, int(min(n, 1<<30)), 0)
		if err != nil {
			if errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL) {
				return copyBuffered(dfd, sfd, roff, n)
			}
			return fmt.Errorf("copy_file_range: %w", err)
		}
		if c == 0 {
			return io.ErrUnexpectedEOF
		}
		n -= int64(c)
	}
	return nil
}

func copyBuffered(dfd, sfd int, off, n int64) error {
	buf := make([]byte, min(n, 1<<20))
	for n > 0 {
		c, err := unix.Pread(sfd, buf[:min(n, int64(len(buf)))], off)
		if err != nil {
			return fmt.Errorf("reading the template: %w", err)
		}
		if c == 0 {
			return io.ErrUnexpectedEOF
		}
		if _, err := unix.Pwrite(dfd, buf[:c], off); err != nil {
			return fmt.Errorf("writing an image: %w", err)
		}
		off, n = off+int64(c), n-int64(c)
	}
	return nil
}

package suite

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/treearchive"
)

// Trees (task directories, agent directories, trial outputs) travel
// between machines as the faithful archives of internal/treearchive: every
// entry with its kind, mode, owner and time, hard links, devices, fifos
// and sockets, so that any tree proctor run accepts (a Debian root in its
// rootfs included) arrives as it left. An archive is named by the SHA-256
// of its bytes and bound to the Merkle digest (task.Digest) of the tree it
// unpacks to, which the receiver recomputes from what it unpacked before
// it uses the tree.

// treeLimits bound a tree sent through the cluster: more than a changeset,
// less than anything a task needs to be refused for.
var treeLimits = treearchive.Limits{MaxEntries: 1_000_000, MaxBytes: 16 << 30, MaxDepth: 128, MaxPathLen: 4096}

// treeDigest is the Merkle digest of a received tree: fifos, sockets and
// devices are digested wherever they are (the planned digest, taken under
// the task's own rules, pins where they may be).
func treeDigest(dir string) (string, error) {
	d, err := task.DigestTree(dir, task.DigestOptions{Special: []string{"."}})
	if err != nil {
		return "", err
	}
	return d.Digest, nil
}

// PackTree writes the archive of the tree at dir to w and returns the
// archive's digest ("sha256:" and hex).
func PackTree(dir string, w io.Writer) (string, error) {
	s, err := treearchive.Pack(dir, w, treeLimits)
	if err != nil {
		return "", fmt.Errorf("packing %s: %w", dir, err)
	}
	return s.Digest, nil
}

// PackTreeFile packs dir into a new temporary file in tmpDir and returns
// its path and the archive's digest; the caller removes the file.
func PackTreeFile(dir, tmpDir string) (path, digest string, err error) {
	f, err := os.CreateTemp(tmpDir, "tree-*.tar")
	if err != nil {
		return "", "", err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	digest, err = PackTree(dir, f)
	return f.Name(), digest, err
}

// VerifyTree checks, without unpacking it, that the archive at path has
// the digest archive and unpacks to the tree of Merkle digest tree.
func VerifyTree(path, archive, tree string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	s, got, err := treearchive.Verify(f, treeLimits)
	if err != nil {
		return fmt.Errorf("archive %s: %w", archive, err)
	}
	if s.Digest != archive {
		return fmt.Errorf("archive %s: its bytes have the digest %s", archive, s.Digest)
	}
	if got != tree {
		return fmt.Errorf("archive %s unpacks to the tree %s, not %s", archive, got, tree)
	}
	return nil
}

// UnpackTree unpacks the archive at path, which must have the digest
// archive, into dst (which must not exist), and checks that the tree it
// made has the Merkle digest tree. On any error dst does not exist.
func UnpackTree(path, archive, tree, dst string) error {
	o := treearchive.UnpackOptions{Limits: treeLimits, Owners: os.Geteuid() == 0}
	return unpack(path, archive, dst, o, func(dir string) error {
		got, err := treeDigest(dir)
		if err != nil {
			return fmt.Errorf("archive %s: %w", archive, err)
		}
		if got != tree {
			return fmt.Errorf("archive %s unpacks to the tree %s, not %s", archive, got, tree)
		}
		return nil
	})
}

// unpackFiles unpacks an archive of plain files and directories (a trial's
// output from a worker) into dst, which must not exist: a device, a fifo,
// a socket, a hard link or a set-id bit in it is refused, and everything
// belongs to the caller.
func unpackFiles(path, archive, dst string) error {
	return unpack(path, archive, dst, treearchive.UnpackOptions{Limits: treeLimits, FilesOnly: true}, nil)
}

// unpack unpacks the archive at path, of digest archive, into dst, which
// must not exist, with o, if check (nil: none) accepts the tree it made.
// The tree is made in a directory only its owner can enter (a device node
// is a device node) and renamed into place whole.
func unpack(path, archive, dst string, o treearchive.UnpackOptions, check func(dir string) error) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("unpacking into %s: %w", dst, os.ErrExist)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tmp, err := os.MkdirTemp(filepath.Dir(dst), ".unpack-*")
	if err != nil {
		return err
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(tmp)
		}
	}()
	if err := os.Chmod(tmp, 0o700); err != nil {
		return err
	}
	tree := filepath.Join(tmp, "tree")
	if err := os.Mkdir(tree, 0o700); err != nil {
		return err
	}
	s, err := treearchive.Unpack(f, tree, o)
	if err != nil {
		return fmt.Errorf("archive %s: %w", archive, err)
	}
	if s.Digest != archive {
		return fmt.Errorf("archive %s: its bytes have the digest %s", archive, s.Digest)
	}
	if check != nil {
		if err := check(tree); err != nil {
			return err
		}
	}
	if err := os.Rename(tree, dst); err != nil {
		if errors.Is(err, os.ErrExist) || errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("unpacking into %s: %w", dst, err)
		}
		return err
	}
	keep = true
	os.Remove(tmp)
	return nil
}

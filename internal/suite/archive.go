package suite

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/workspace"
)

// Trees (task directories, agent directories, trial outputs) travel
// between machines as the canonical archives of internal/workspace: one
// layer whose root is the directory. An archive is named by the SHA-256 of
// its bytes and bound to the Merkle digest (task.Digest) of the tree it
// unpacks to, which the receiver recomputes before it uses the tree.

// treeLimits bound a tree sent through the cluster: more than a changeset,
// less than anything a task needs to be refused for.
var treeLimits = workspace.Limits{MaxFiles: 1_000_000, MaxBytes: 16 << 30, MaxDepth: 128, MaxPathLen: 4096}

// PackTree writes the archive of the tree at dir to w and returns the
// archive's digest ("sha256:" and hex). Anything the archive cannot carry
// (a device, a fifo, a socket, a name starting ".wh.") is an error naming
// it: the receiver would get another tree.
func PackTree(dir string, w io.Writer) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return "", err
	}
	cs, err := workspace.Extract([]workspace.Layer{{Dst: "/", Upper: abs}}, treeLimits, w)
	if err != nil {
		return "", fmt.Errorf("packing %s: %w", dir, err)
	}
	if len(cs.Dropped) > 0 {
		d := cs.Dropped[0]
		return "", fmt.Errorf("packing %s: %s cannot be sent: %s (%d such)", dir, filepath.Join(dir, d.Path), d.Reason, len(cs.Dropped))
	}
	return cs.Digest, nil
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

// UnpackTree unpacks the archive at path, which must have the digest
// archive, into dst (which must not exist), and checks that the tree it
// made has the Merkle digest tree. On any error dst does not exist.
func UnpackTree(path, archive, tree, dst string) error {
	return unpack(path, archive, dst, func(dir string) error {
		got, err := task.Digest(dir)
		if err != nil {
			return fmt.Errorf("archive %s: %w", archive, err)
		}
		if got != tree {
			return fmt.Errorf("archive %s unpacks to the tree %s, not %s", archive, got, tree)
		}
		return nil
	})
}

// unpack unpacks the archive at path, of digest archive, into dst, which
// must not exist, if check (nil: none) accepts the tree it made.
func unpack(path, archive, dst string, check func(dir string) error) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("unpacking into %s: %w", dst, os.ErrExist)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	cs, err := workspace.ReadArchive(f, treeLimits)
	if err != nil {
		return fmt.Errorf("archive %s: %w", archive, err)
	}
	if cs.Digest != archive {
		return fmt.Errorf("archive %s: its bytes have the digest %s", archive, cs.Digest)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
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
	if err := workspace.Apply(f, cs, []workspace.Layer{{Dst: "/", Upper: tmp}}, nil, os.Geteuid(), os.Getegid()); err != nil {
		return fmt.Errorf("archive %s: %w", archive, err)
	}
	// The directory itself is not in the archive; a tree's root is 0755.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if check != nil {
		if err := check(tmp); err != nil {
			return err
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		if errors.Is(err, os.ErrExist) || errors.Is(err, errors.ErrUnsupported) {
			return fmt.Errorf("unpacking into %s: %w", dst, err)
		}
		return err
	}
	keep = true
	return nil
}

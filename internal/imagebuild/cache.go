package imagebuild

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

// cacheVersion is part of every step key: a change to how steps are
// built or keyed changes it, and old entries are no longer found.
const cacheVersion = "proctor-imagebuild-v1"

// The build cache (Options.CacheDir) is laid out as
//
//	DIR/steps/<key>/meta.json   what the step was and the layer it made
//	DIR/steps/<key>/layer/      the layer as a directory (an overlay lower)
//	DIR/steps/<key>/layer.tar   the same layer as an uncompressed OCI tar
//	DIR/tmp/<random>/           steps being built (removed by the next build when abandoned)
//	DIR/empty/                  an empty directory (the lower of scratch)
//
// A step's key is a hash of its parent's key, the instruction as it runs
// (after ARG and ENV expansion, with the environment, user, workdir and
// shell it runs with) and, for COPY and ADD, the digest of what it copies.
// Entries are written in tmp and renamed into steps/ whole.
type cache struct {
	dir string
}

// stepMeta is a cached step.
type stepMeta struct {
	Key       string `json:"key"`
	CreatedBy string `json:"created_by"`
	Empty     bool   `json:"empty"` // the step changed nothing: no layer
	DiffID    string `json:"diff_id,omitempty"`
	Size      int64  `json:"size,omitempty"`
}

// step is a cached step's layer.
type step struct {
	meta stepMeta
	dir  string // DIR/steps/<key>
}

func (s *step) layerDir() string { return filepath.Join(s.dir, "layer") }
func (s *step) layerTar() string { return filepath.Join(s.dir, "layer.tar") }

func openCache(dir string) (*cache, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &cache{dir: abs}
	for _, d := range []string{abs, c.path("steps"), c.path("tmp"), c.path("empty")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("opening the build cache: %w", err)
		}
	}
	if err := os.Chmod(c.path("empty"), 0o755); err != nil {
		return nil, err
	}
	if err := c.cleanTmp(); err != nil {
		return nil, fmt.Errorf("opening the build cache: %w", err)
	}
	return c, nil
}

func (c *cache) path(p ...string) string { return filepath.Join(append([]string{c.dir}, p...)...) }

// cleanTmp removes step directories no build holds locked.
func (c *cache) cleanTmp() error {
	ents, err := os.ReadDir(c.path("tmp"))
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := c.path("tmp", e.Name())
		if f, err := os.Open(filepath.Join(p, "lock")); err == nil {
			busy := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil
			f.Close()
			if busy {
				continue
			}
		}
		if err := removeAll(p); err != nil {
			return err
		}
	}
	return nil
}

// get returns the cached step with key, or nil.
func (c *cache) get(key string) (*step, error) {
	dir := c.path("steps", key)
	b, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m stepMeta
	if err := json.Unmarshal(b, &m); err != nil || m.Key != key {
		return nil, fmt.Errorf("build cache entry %s: corrupt meta.json (remove it)", dir)
	}
	return &step{meta: m, dir: dir}, nil
}

// work is a step being built: DIR/tmp/<random>, holding a lock, with an
// upper ("layer", becoming the layer) and an overlay work directory, both
// owned by owner.
type work struct {
	dir  string
	lock *os.File
}

func (w *work) upper() string { return filepath.Join(w.dir, "layer") }
func (w *work) ovl() string   { return filepath.Join(w.dir, "work") }

func (c *cache) begin(owner int) (*work, error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	dir := c.path("tmp", hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, err
	}
	lock, err := os.Create(filepath.Join(dir, "lock"))
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX)
	}
	w := &work{dir: dir, lock: lock}
	for _, d := range []string{w.upper(), w.ovl()} {
		if err == nil {
			err = os.Mkdir(d, 0o755)
		}
		if err == nil {
			err = os.Chown(d, owner, owner)
		}
	}
	if err != nil {
		w.abandon()
		return nil, fmt.Errorf("preparing a build step: %w", err)
	}
	return w, nil
}

// abandon removes the work directory.
func (w *work) abandon() {
	if w.lock != nil {
		w.lock.Close()
	}
	_ = removeAll(w.dir)
}

// commit writes the layer tar and meta and renames the work directory
// to steps/<key>. Another build that stored the same key first wins.
func (c *cache) commit(w *work, m stepMeta) (*step, error) {
	defer w.abandon()
	if err := removeAll(w.ovl()); err != nil {
		return nil, err
	}
	if err := os.Chown(w.upper(), 0, 0); err != nil {
		return nil, err
	}
	if !m.Empty {
		f, err := os.OpenFile(filepath.Join(w.dir, "layer.tar"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return nil, err
		}
		m.DiffID, m.Size, err = writeLayer(w.upper(), f)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, fmt.Errorf("writing the layer: %w", err)
		}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(w.dir, "meta.json"), b, 0o600); err != nil {
		return nil, err
	}
	_ = os.Remove(filepath.Join(w.dir, "lock"))
	dst := c.path("steps", m.Key)
	if err := os.Rename(w.dir, dst); err != nil && !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.ENOTEMPTY) {
		return nil, fmt.Errorf("storing a build step: %w", err)
	}
	return c.get(m.Key)
}

// removeAll removes a tree without following symlinks, after giving
// overlayfs's work directories (mode 000) back their permissions.
func removeAll(p string) error {
	err := os.RemoveAll(p)
	if err == nil || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	_ = filepath.WalkDir(p, func(q string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o700)
		}
		return nil
	})
	return os.RemoveAll(p)
}

// keyOf hashes the parts of a step key.
func keyOf(parts ...string) string {
	h := sha256.New()
	h.Write([]byte(cacheVersion))
	for _, p := range parts {
		fmt.Fprintf(h, "\x00%d:%s", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// lowerOwner is the owner of a RUN step's upper: the sandbox's root.
func lowerOwner() int { return sandbox.RootID() }

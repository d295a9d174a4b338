package image

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"golang.org/x/sys/unix"
)

// Default unpack limits.
const (
	DefaultMaxBytes   = 64 << 30
	DefaultMaxEntries = 2_000_000
)

// Image is a stored, fully unpacked image. It is a value: changing it
// changes nothing in the store.
type Image struct {
	Digest  string      `json:"digest"` // "sha256:<hex>" of the image manifest
	Refs    []string    `json:"-"`      // normalised names pointing at it, sorted
	Config  ImageConfig `json:"config"`
	Size    int64       `json:"size"`    // file content bytes written while unpacking
	Dropped []string    `json:"dropped"` // entries not reproduced: devices, xattrs
	Rootfs  string      `json:"-"`       // absolute path of the flattened rootfs
	Created time.Time   `json:"created"` // when this store unpacked it
	// Build says how an image built on this machine was made (Add); nil
	// for an imported or pulled one.
	Build *BuildInfo `json:"build,omitempty"`
}

// ImageConfig is the part of the image config a caller needs to run it.
type ImageConfig struct {
	Env        []string `json:"env,omitempty"`
	WorkingDir string   `json:"working_dir,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
	User       string   `json:"user,omitempty"`
}

// Option configures a Store.
type Option func(*Store)

// WithMaxBytes caps the file content bytes of one unpack (default 64 GiB).
func WithMaxBytes(n int64) Option { return func(s *Store) { s.lim.maxBytes = n } }

// WithMaxEntries caps the tar entries of one unpack (default 2,000,000).
func WithMaxEntries(n int64) Option { return func(s *Store) { s.lim.maxEntries = n } }

// Store is an image store directory. It is safe for concurrent use.
type Store struct {
	dir string
	lim limits
	// hook, for tests, runs before each entry of an unpack.
	hook func(entries int64) error

	// mu serialises refs.json updates within the process; a flock on
	// DIR/lock does so across processes.
	mu sync.Mutex
}

// Open opens (creating if needed) the store in dir and removes unpacks
// abandoned by crashed processes.
func Open(dir string, opts ...Option) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("opening image store: %w", err)
	}
	s := &Store{dir: abs, lim: limits{maxBytes: DefaultMaxBytes, maxEntries: DefaultMaxEntries}}
	for _, o := range opts {
		o(s)
	}
	for _, d := range []string{s.dir, filepath.Join(s.dir, "sha256"), filepath.Join(s.dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("opening image store: %w", err)
		}
	}
	if err := s.cleanTmp(); err != nil {
		return nil, fmt.Errorf("opening image store: %w", err)
	}
	return s, nil
}

// cleanTmp removes temp directories whose lock no process holds.
func (s *Store) cleanTmp() error {
	ents, err := os.ReadDir(filepath.Join(s.dir, "tmp"))
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(s.dir, "tmp", e.Name())
		if f, err := os.Open(filepath.Join(p, "lock")); err == nil {
			busy := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil
			f.Close()
			if busy {
				continue
			}
		}
		// os.RemoveAll works with *at calls and does not follow symlinks.
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) imageDir(digest string) string {
	return filepath.Join(s.dir, "sha256", strings.TrimPrefix(digest, "sha256:"))
}

// Pull fetches ref from its registry for the host platform, unpacks it and
// records ref → digest. Anonymous access, or the docker credential helpers'
// keychain; opts come after the defaults and can override them.
func (s *Store) Pull(ctx context.Context, ref string, opts ...remote.Option) (*Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("parsing image reference %q: %w", ref, err)
	}
	all := append([]remote.Option{
		remote.WithContext(ctx),
		remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithPlatform(hostPlatform()),
	}, opts...)
	img, err := remote.Image(r, all...)
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	norm, err := normalise(ref)
	if err != nil {
		return nil, err
	}
	var refs []string
	if _, isDigest := refDigest(norm); !isDigest {
		refs = []string{norm}
	}
	return s.add(img, refs)
}

func hostPlatform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

// add unpacks img unless its digest is stored already, then records refs
// (normalised).
func (s *Store) add(img v1.Image, refs []string) (*Image, error) {
	return s.addOnto(img, refs, nil, nil)
}

// addOnto is add with a base whose rootfs is cloned (see Add) and the
// provenance of a built image.
func (s *Store) addOnto(img v1.Image, refs []string, base *Image, build *BuildInfo) (*Image, error) {
	d, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("computing image digest: %w", err)
	}
	digest := d.String()
	if !digestRE.MatchString(digest) {
		return nil, fmt.Errorf("unsupported image digest %s", digest)
	}
	if _, err := s.readMeta(digest); errors.Is(err, os.ErrNotExist) {
		if err := s.unpack(img, digest, base, build); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	} else if err := s.keepRaw(img, digest); err != nil {
		return nil, err
	}
	if err := s.updateRefs(func(m map[string]string) {
		for _, r := range refs {
			m[r] = digest
		}
	}); err != nil {
		return nil, err
	}
	return s.load(digest)
}

// unpack writes img into DIR/tmp/<random> and renames it to DIR/sha256/<hex>.
// With a base (a stored image whose layers are img's first), the base's
// rootfs is cloned and only the layers after its own are applied.
func (s *Store) unpack(img v1.Image, digest string, base *Image, build *BuildInfo) (err error) {
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(s.dir, "tmp", hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return fmt.Errorf("unpacking %s: %w", digest, err)
	}
	lock, err := os.Create(filepath.Join(tmp, "lock"))
	if err != nil {
		return fmt.Errorf("unpacking %s: %w", digest, err)
	}
	defer lock.Close()
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("unpacking %s: %w", digest, err)
	}
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return fmt.Errorf("unpacking %s: %w", digest, err)
	}
	var size int64
	var dropped []string
	if base != nil {
		n, err := s.baseLayers(base, img)
		if err != nil {
			return fmt.Errorf("unpacking %s: %w", digest, err)
		}
		if err := cloneTree(base.Rootfs, rootfs); err != nil {
			return fmt.Errorf("unpacking %s: cloning the base %s: %w", digest, base.Digest, err)
		}
		size, dropped, err = unpackFrom(img, rootfs, s.lim, s.hook, n)
		if err != nil {
			return fmt.Errorf("unpacking %s: %w", digest, err)
		}
		size += base.Size
		dropped = append(slices.Clone(base.Dropped), dropped...)
	} else if size, dropped, err = unpackImage(img, rootfs, s.lim, s.hook); err != nil {
		return fmt.Errorf("unpacking %s: %w", digest, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("unpacking %s: reading config: %w", digest, err)
	}
	meta := Image{
		Digest: digest,
		Config: ImageConfig{
			Env: cf.Config.Env, WorkingDir: cf.Config.WorkingDir,
			Entrypoint: cf.Config.Entrypoint, Cmd: cf.Config.Cmd, User: cf.Config.User,
		},
		Size: size, Dropped: dropped, Created: time.Now().UTC(), Build: build,
	}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	if err := writeRaw(img, tmp); err != nil {
		return fmt.Errorf("unpacking %s: %w", digest, err)
	}
	if err := writeFileSync(filepath.Join(tmp, "meta.json"), b); err != nil {
		return fmt.Errorf("unpacking %s: %w", digest, err)
	}
	if err := os.Remove(filepath.Join(tmp, "lock")); err != nil {
		return err
	}
	if err := syncDir(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.imageDir(digest)); err != nil {
		if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOTEMPTY) {
			_ = os.RemoveAll(tmp) // another process stored it first
			return nil
		}
		return fmt.Errorf("unpacking %s: %w", digest, err)
	}
	return syncDir(filepath.Join(s.dir, "sha256"))
}

// Resolve finds a stored image by name ("alpine:3.20", normalised like
// docker), by "name@sha256:…", or by "sha256:…" (or a unique prefix of at
// least 12 hex digits).
func (s *Store) Resolve(ref string) (*Image, error) {
	digest, err := s.resolveDigest(ref)
	if err != nil {
		return nil, err
	}
	return s.load(digest)
}

func (s *Store) resolveDigest(ref string) (string, error) {
	if strings.HasPrefix(ref, "sha256:") {
		hexp := strings.TrimPrefix(ref, "sha256:")
		if len(hexp) < 12 || strings.Trim(hexp, "0123456789abcdef") != "" {
			return "", fmt.Errorf("image digest %q: want sha256: and at least 12 hex digits", ref)
		}
		ents, err := os.ReadDir(filepath.Join(s.dir, "sha256"))
		if err != nil {
			return "", err
		}
		var found []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), hexp) {
				found = append(found, "sha256:"+e.Name())
			}
		}
		switch len(found) {
		case 0:
			return "", notFound(ref)
		case 1:
			return found[0], nil
		}
		return "", fmt.Errorf("image digest prefix %q matches %d images", ref, len(found))
	}
	norm, err := normalise(ref)
	if err != nil {
		return "", err
	}
	if d, ok := refDigest(norm); ok {
		if _, err := s.readMeta(d); err != nil {
			return "", notFound(ref)
		}
		return d, nil
	}
	refs, err := s.readRefs()
	if err != nil {
		return "", err
	}
	d, ok := refs[norm]
	if !ok {
		return "", notFound(ref)
	}
	return d, nil
}

// List returns every stored image, sorted by digest.
func (s *Store) List() ([]Image, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "sha256"))
	if err != nil {
		return nil, err
	}
	refs, err := s.readRefs()
	if err != nil {
		return nil, err
	}
	var out []Image
	for _, e := range ents {
		img, err := s.loadWith("sha256:"+e.Name(), refs)
		if err != nil {
			return nil, err
		}
		out = append(out, *img)
	}
	return out, nil
}

// Remove removes a name; the image goes with its last name. Removing by
// digest removes the image and every name pointing at it.
func (s *Store) Remove(ref string) error {
	digest, err := s.resolveDigest(ref)
	if err != nil {
		return err
	}
	byDigest := strings.HasPrefix(ref, "sha256:")
	var norm string
	if !byDigest {
		if norm, err = normalise(ref); err != nil {
			return err
		}
		if _, ok := refDigest(norm); ok {
			byDigest = true
		}
	}
	last := true
	if err := s.updateRefs(func(m map[string]string) {
		for r, d := range m {
			if d != digest {
				continue
			}
			if byDigest || r == norm {
				delete(m, r)
			} else {
				last = false
			}
		}
	}); err != nil {
		return err
	}
	if !last {
		return nil
	}
	// Rename into tmp first, so the image disappears at once.
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(s.dir, "tmp", "rm-"+hex.EncodeToString(rnd[:]))
	if err := os.Rename(s.imageDir(digest), tmp); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("removing %s: %w", digest, err)
	}
	return os.RemoveAll(tmp)
}

func (s *Store) readMeta(digest string) (*Image, error) {
	b, err := os.ReadFile(filepath.Join(s.imageDir(digest), "meta.json"))
	if err != nil {
		return nil, err
	}
	var img Image
	if err := json.Unmarshal(b, &img); err != nil {
		return nil, fmt.Errorf("reading metadata of %s: %w", digest, err)
	}
	return &img, nil
}

func (s *Store) load(digest string) (*Image, error) {
	refs, err := s.readRefs()
	if err != nil {
		return nil, err
	}
	return s.loadWith(digest, refs)
}

func (s *Store) loadWith(digest string, refs map[string]string) (*Image, error) {
	img, err := s.readMeta(digest)
	if errors.Is(err, os.ErrNotExist) {
		return nil, notFound(digest)
	}
	if err != nil {
		return nil, err
	}
	img.Rootfs = filepath.Join(s.imageDir(digest), "rootfs")
	for r, d := range refs {
		if d == digest {
			img.Refs = append(img.Refs, r)
		}
	}
	slices.Sort(img.Refs)
	return img, nil
}

func (s *Store) readRefs() (map[string]string, error) {
	m := map[string]string{}
	b, err := os.ReadFile(filepath.Join(s.dir, "refs.json"))
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("reading refs.json: %w", err)
	}
	return m, nil
}

// updateRefs applies f to refs.json under the store lock, writing the
// result atomically (temp file, fsync, rename).
func (s *Store) updateRefs(f func(map[string]string)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	lf, err := os.OpenFile(filepath.Join(s.dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX); err != nil {
		return err
	}
	m, err := s.readRefs()
	if err != nil {
		return err
	}
	f(m)
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, "refs.json.tmp")
	if err := writeFileSync(tmp, b); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "refs.json")); err != nil {
		return err
	}
	return syncDir(s.dir)
}

func writeFileSync(p string, b []byte) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

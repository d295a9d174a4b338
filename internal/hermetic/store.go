package hermetic

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"golang.org/x/sys/unix"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// The store's layout under its directory:
//
//	ca/            0700: the CA (ca.pem, 0600, certificate and key)
//	blobs/         recorded bodies, each BlobFile(digest), shared by all recordings
//	recordings/    one index a key, KEY.json
const (
	blobsDir      = "blobs"
	recordingsDir = "recordings"
)

// Store keeps recordings by key, their bodies by digest, and the CA of
// every grader that uses them. Recordings never change once saved; bodies
// are shared between them and never removed by this package. A Store is
// safe for concurrent use, and several processes may share a directory.
type Store struct {
	dir string

	mu sync.Mutex
	ca *CA
}

// OpenStore opens the store in dir, creating it if needed. The CA is made
// or read on first use (CA).
func OpenStore(dir string) (*Store, error) {
	for _, d := range []string{dir, filepath.Join(dir, blobsDir), filepath.Join(dir, recordingsDir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("hermetic: opening the store: %w", err)
		}
	}
	return &Store{dir: dir}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// BlobDir is where the store keeps bodies.
func (s *Store) BlobDir() string { return filepath.Join(s.dir, blobsDir) }

// CA returns the store's CA, made the first time any process asks. Its
// key file must be the caller's own and private (ErrCAKeyExposed).
func (s *Store) CA() (*CA, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ca == nil {
		ca, err := loadCA(s.dir)
		if err != nil {
			return nil, err
		}
		s.ca = ca
	}
	return s.ca, nil
}

func checkKey(k string) error {
	if k == "" || len(k) > 128 || k[0] == '.' {
		return fmt.Errorf("%w: %q", ErrBadKey, k)
	}
	for _, c := range []byte(k) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q", ErrBadKey, k)
		}
	}
	return nil
}

// Load returns the recording saved under key, its bodies checked. No
// recording under key is an error matching fs.ErrNotExist; a damaged one
// an *IndexError or *BlobError (ErrMalformed, ErrTampered, ErrMissingBlob).
func (s *Store) Load(key string) (*Recording, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	b, err := readLimited(filepath.Join(s.dir, recordingsDir, key+".json"), maxIndexBytes)
	if err != nil {
		return nil, err
	}
	return Load(b, s.BlobDir())
}

// Save saves r under key (replacing what was there), its bodies copied
// into the store unless they are there already.
func (s *Store) Save(key string, r *Recording) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := copyBlobs(r, s.BlobDir()); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(s.dir, recordingsDir, key+".json"), r.raw)
}

// Load reads an index (as Recording.Index gives it) and checks every body
// it names in blobDir: each a regular file named BlobFile(digest), of the
// size recorded, hashing to its digest. A body that is not is a
// *BlobError: ErrMissingBlob, or ErrTampered.
func Load(indexJSON []byte, blobDir string) (*Recording, error) {
	r, err := parseIndex(indexJSON, blobDir)
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(blobDir)
	if err != nil {
		return nil, fmt.Errorf("hermetic: opening the bodies: %w", err)
	}
	defer root.Close()
	for _, b := range r.Blobs() {
		f, err := openBlob(root, b)
		if err != nil {
			return nil, err
		}
		err = verifyBlob(f, b)
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// LoadDir reads a recording Export wrote into dir. With want (a digest as
// Recording.Digest gives it) the index must be that one: another is an
// *IndexError wrapping ErrTampered.
func LoadDir(dir, want string) (*Recording, error) {
	b, err := readLimited(filepath.Join(dir, IndexFile), maxIndexBytes)
	if err != nil {
		return nil, err
	}
	r, err := Load(b, dir)
	if err != nil {
		return nil, err
	}
	if want != "" && r.digest != want {
		return nil, &IndexError{Exchange: -1, Reason: fmt.Sprintf("digest %s, want %s", r.digest, want), Err: ErrTampered}
	}
	return r, nil
}

// Export writes the recording into dir (which must exist): IndexFile and
// every body (Files), copied, so that a bundle can carry them and LoadDir
// read them back.
func (r *Recording) Export(dir string) error {
	if err := copyBlobs(r, dir); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, IndexFile), r.raw)
}

// openBlob opens the body b beneath root: a regular file, never through a
// symbolic link, of b's size.
func openBlob(root *os.Root, b Blob) (*os.File, error) {
	name := BlobFile(b.SHA256)
	fi, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &BlobError{SHA256: b.SHA256, Reason: "not in the blob directory", Err: ErrMissingBlob}
	}
	if err != nil {
		return nil, fmt.Errorf("hermetic: body sha256:%s: %w", b.SHA256, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, &BlobError{SHA256: b.SHA256, Reason: "not a regular file", Err: ErrTampered}
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, fmt.Errorf("hermetic: body sha256:%s: %w", b.SHA256, err)
	}
	st, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("hermetic: body sha256:%s: %w", b.SHA256, err)
	case !st.Mode().IsRegular() || !os.SameFile(st, fi):
		f.Close()
		return nil, &BlobError{SHA256: b.SHA256, Reason: "replaced while opened", Err: ErrTampered}
	case st.Size() != b.Size:
		f.Close()
		return nil, &BlobError{SHA256: b.SHA256, Reason: fmt.Sprintf("%d bytes, the index says %d", st.Size(), b.Size), Err: ErrTampered}
	}
	return f, nil
}

// verifyBlob hashes f whole and compares with b.
func verifyBlob(f *os.File, b Blob) error {
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("hermetic: reading body sha256:%s: %w", b.SHA256, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != b.SHA256 || n != b.Size {
		return &BlobError{SHA256: b.SHA256, Reason: fmt.Sprintf("the file hashes to sha256:%s (%d bytes)", got, n), Err: ErrTampered}
	}
	return nil
}

// linkChecked checks the open body f and links that file (not its name)
// into dir; false when the filesystems differ (f is then rewound for a
// copy).
func linkChecked(f *os.File, b Blob, dir string) (bool, error) {
	if err := verifyBlob(f, b); err != nil {
		return false, err
	}
	err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(int(f.Fd())), unix.AT_FDCWD,
		filepath.Join(dir, BlobFile(b.SHA256)), unix.AT_SYMLINK_FOLLOW)
	if err == nil {
		return true, nil
	}
	if _, serr := f.Seek(0, io.SeekStart); serr != nil {
		return false, serr
	}
	return false, nil
}

// copyBlobs copies r's bodies from its blob directory into dir, checking
// each, unless dir already holds a good copy.
func copyBlobs(r *Recording, dir string) error {
	bs := r.Blobs()
	if len(bs) == 0 {
		return nil
	}
	if r.blobDir == "" {
		return errors.New("hermetic: the recording was read without its bodies")
	}
	if same, _ := sameDir(r.blobDir, dir); same {
		return nil
	}
	src, err := os.OpenRoot(r.blobDir)
	if err != nil {
		return fmt.Errorf("hermetic: opening the bodies: %w", err)
	}
	defer src.Close()
	dst, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("hermetic: opening %s: %w", dir, err)
	}
	defer dst.Close()
	for _, b := range bs {
		if f, err := openBlob(dst, b); err == nil {
			err = verifyBlob(f, b)
			f.Close()
			if err == nil {
				continue
			}
		}
		f, err := openBlob(src, b)
		if err != nil {
			return err
		}
		// Where the two share a filesystem, the very file just checked is
		// linked, not copied: a recording of tools is tens of megabytes,
		// and every trial's bundle holds it.
		if linked, err := linkChecked(f, b, dir); err != nil || linked {
			f.Close()
			if err != nil {
				return err
			}
			continue
		}
		w, err := newBlobWriter(dir)
		if err != nil {
			f.Close()
			return err
		}
		_, err = io.Copy(w, f)
		f.Close()
		if err != nil {
			w.abort()
			return fmt.Errorf("hermetic: copying body sha256:%s: %w", b.SHA256, err)
		}
		if got, n := w.sum(); got != b.SHA256 || n != b.Size {
			w.abort()
			return &BlobError{SHA256: b.SHA256, Reason: "changed while copied", Err: ErrTampered}
		}
		if _, err := w.commit(); err != nil {
			return err
		}
	}
	return nil
}

func sameDir(a, b string) (bool, error) {
	fa, err := os.Stat(a)
	if err != nil {
		return false, err
	}
	fb, err := os.Stat(b)
	if err != nil {
		return false, err
	}
	return os.SameFile(fa, fb), nil
}

// blobWriter writes a body into a temporary file in a blob directory,
// hashing it, and commits it under its digest.
type blobWriter struct {
	dir string
	f   *os.File
	h   hash.Hash
	n   int64
}

func newBlobWriter(dir string) (*blobWriter, error) {
	f, err := os.CreateTemp(dir, ".blob-*")
	if err != nil {
		return nil, fmt.Errorf("hermetic: storing a body: %w", err)
	}
	return &blobWriter{dir: dir, f: f, h: sha256.New()}, nil
}

func (w *blobWriter) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.h.Write(p[:n])
	w.n += int64(n)
	return n, err
}

func (w *blobWriter) sum() (string, int64) { return hex.EncodeToString(w.h.Sum(nil)), w.n }

func (w *blobWriter) abort() {
	w.f.Close()
	os.Remove(w.f.Name())
}

// commit closes the file and moves it to BlobFile(digest), where a body
// already there (the same bytes, by its name) is kept. It returns the
// digest.
func (w *blobWriter) commit() (string, error) {
	sum, _ := w.sum()
	tmp := w.f.Name()
	defer os.Remove(tmp)
	if err := errors.Join(w.f.Chmod(0o644), w.f.Close()); err != nil {
		return "", fmt.Errorf("hermetic: storing a body: %w", err)
	}
	final := filepath.Join(w.dir, BlobFile(sum))
	err := os.Link(tmp, final)
	if errors.Is(err, fs.ErrExist) && !goodBlob(final, Blob{sum, w.n}) {
		err = os.Rename(tmp, final) // a damaged copy is replaced
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("hermetic: storing a body: %w", err)
	}
	return sum, nil
}

// goodBlob reports whether name is a regular file holding b.
func goodBlob(name string, b Blob) bool {
	root, err := os.OpenRoot(filepath.Dir(name))
	if err != nil {
		return false
	}
	defer root.Close()
	f, err := openBlob(root, b)
	if err != nil {
		return false
	}
	defer f.Close()
	return verifyBlob(f, b) == nil
}

func readLimited(name string, limit int64) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, &IndexError{Exchange: -1, Reason: fmt.Sprintf("%s is over %d bytes", name, limit), Err: ErrRecordingFull}
	}
	return b, nil
}

func writeAtomic(name string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(name), ".index-*")
	if err != nil {
		return fmt.Errorf("hermetic: writing %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(b)
	if err := errors.Join(werr, tmp.Chmod(0o644), tmp.Close()); err != nil {
		return fmt.Errorf("hermetic: writing %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("hermetic: writing %s: %w", name, err)
	}
	return nil
}

package task

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// HashCache remembers the content hashes of files by identity (device,
// inode, size, modification and change times), so that digesting a tree
// again costs a walk, not a read of every byte. The change time cannot be
// set by anyone (any write, chmod or rename moves it), which is what makes
// the identity trustworthy; as in git, a file changed less than racyWindow
// before it was hashed is not remembered. A HashCache is safe for
// concurrent use; Save writes it back.
type HashCache struct {
	path string

	mu    sync.Mutex
	m     map[fileKey][sha256.Size]byte
	dirty bool
}

type fileKey struct {
	dev, ino               uint64
	size, mtimeNS, ctimeNS int64
}

const (
	hashCacheMagic = "proctor-hashcache-v1\n"
	hashCacheRec   = 5*8 + sha256.Size
	// hashCacheMax bounds the file (about 70 MiB); past it the cache
	// starts afresh.
	hashCacheMax = 1 << 20
	racyWindow   = 2 * time.Second
)

// OpenHashCache loads the cache kept at path. A missing file is an empty
// cache; a file that is not a cache is an error naming it (it is never
// overwritten).
func OpenHashCache(path string) (*HashCache, error) {
	c := &HashCache{path: path, m: map[fileKey][sha256.Size]byte{}}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	defer f.Close()
	r := bufio.NewReader(f)
	magic := make([]byte, len(hashCacheMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != hashCacheMagic {
		return nil, &Error{File: path, Err: fmt.Errorf("not a proctor hash cache: remove it to start afresh")}
	}
	var rec [hashCacheRec]byte
	for {
		if _, err := io.ReadFull(r, rec[:]); err == io.EOF {
			break
		} else if err != nil {
			// A torn tail (a crash while saving is impossible: saves
			// rename) is not trusted: start afresh.
			clear(c.m)
			return c, nil
		}
		var k fileKey
		k.dev = binary.BigEndian.Uint64(rec[0:])
		k.ino = binary.BigEndian.Uint64(rec[8:])
		k.size = int64(binary.BigEndian.Uint64(rec[16:]))
		k.mtimeNS = int64(binary.BigEndian.Uint64(rec[24:]))
		k.ctimeNS = int64(binary.BigEndian.Uint64(rec[32:]))
		var h [sha256.Size]byte
		copy(h[:], rec[40:])
		c.m[k] = h
	}
	return c, nil
}

// Save writes the cache back, atomically, if it changed.
func (c *HashCache) Save() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil
	}
	var buf bytes.Buffer
	buf.WriteString(hashCacheMagic)
	var rec [hashCacheRec]byte
	for k, h := range c.m {
		binary.BigEndian.PutUint64(rec[0:], k.dev)
		binary.BigEndian.PutUint64(rec[8:], k.ino)
		binary.BigEndian.PutUint64(rec[16:], uint64(k.size))
		binary.BigEndian.PutUint64(rec[24:], uint64(k.mtimeNS))
		binary.BigEndian.PutUint64(rec[32:], uint64(k.ctimeNS))
		copy(rec[40:], h[:])
		buf.Write(rec[:])
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return &Error{File: c.path, Err: err}
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.path), ".hashcache-*")
	if err != nil {
		return &Error{File: c.path, Err: err}
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(buf.Bytes()); err != nil {
		tmp.Close()
		return &Error{File: c.path, Err: err}
	}
	if err := tmp.Close(); err != nil {
		return &Error{File: c.path, Err: err}
	}
	if err := os.Rename(tmp.Name(), c.path); err != nil {
		return &Error{File: c.path, Err: err}
	}
	c.dirty = false
	return nil
}

func keyOf(fi fs.FileInfo) (fileKey, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, false
	}
	return fileKey{dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtimeNS: st.Mtim.Nano(), ctimeNS: st.Ctim.Nano()}, true
}

// Lookup returns the remembered content hash of the file fi describes, if
// its identity is unchanged since.
func (c *HashCache) Lookup(fi fs.FileInfo) ([sha256.Size]byte, bool) {
	if c == nil {
		return [sha256.Size]byte{}, false
	}
	k, ok := keyOf(fi)
	if !ok {
		return [sha256.Size]byte{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[k]
	return h, ok
}

// Remember stores the hash of a file whose identity fi was checked against
// the file just read, unless it changed too recently to be sure.
func (c *HashCache) Remember(fi fs.FileInfo, h [sha256.Size]byte) {
	if c == nil {
		return
	}
	k, ok := keyOf(fi)
	if !ok || time.Since(time.Unix(0, k.ctimeNS)) < racyWindow || time.Since(time.Unix(0, k.mtimeNS)) < racyWindow {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= hashCacheMax {
		clear(c.m)
	}
	c.m[k] = h
	c.dirty = true
}

package trial

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/task"
)

// The digest of a "host" environment covers the files it exposes: every
// name, kind, permission bits and content under the host's system
// directories, restricted (masked) files by name only. Reading the host's
// /usr takes long (gigabytes), so it is computed once and then cached per
// directory, by the directory's identity and times (hostscan.go): a later
// trial recomputes only the directories whose entries changed, reading
// only files whose own identity changed (task.HashCache). A file changed in
// place, its directory untouched, is noticed when that directory changes.
//
// Encoding (H is SHA-256, integers big-endian), recomputable elsewhere:
//
//	own(dir)  = H("proctor-hostview-own-v1" 0x00 || for each entry but readable subdirectories, sorted by name:
//	              kind (1 byte) || mode (4 bytes, & 07777) || len(name) (8 bytes) || name || body)
//	            kind 'f' file (body: H(content)), 'l' symlink (body: H(target)),
//	                 'm' masked file or directory (no body), 'o' fifo, socket or device (no body)
//	tree(dir) = H("proctor-hostview-dir-v1" 0x00 || own(dir) || for each readable subdirectory, sorted:
//	              len(name) (8 bytes) || name || tree(sub))
//	digest    = H("proctor-hostview-v1" 0x00 || for each of sandbox.HostDirs present, in order:
//	              len(path) || path || 'd' tree(dir) | 'l' H(target))
//
// and the environment digest is "host-sha256:" + hex(digest).

// hostDigest computes the host view's digest from a scan, filling in and
// saving what the scan's cache lacked. File hashes are kept in their own
// cache (hashFile), opened only when a directory must be read again: in the
// steady state a trial never loads the hashes of the host's 150,000 files.
func hostDigest(s *hostScan, hostDirs []string, hashFile, cacheFile string) (string, error) {
	byPath := make(map[string]*scanEntry, len(s.now))
	var missing []*scanEntry
	for i := range s.now {
		e := &s.now[i]
		byPath[e.Path] = e
		if len(e.Own) != sha256.Size {
			missing = append(missing, e)
		}
	}
	if len(missing) > 0 {
		cache, err := task.OpenHashCache(hashFile)
		if err != nil {
			return "", err
		}
		if err := fillOwn(missing, cache); err != nil {
			return "", err
		}
		if err := cache.Save(); err != nil {
			return "", err
		}
	}
	if len(missing) > 0 || s.changed || len(s.now) != len(s.old) {
		if err := s.save(cacheFile); err != nil {
			return "", err
		}
	}
	memo := map[string][]byte{}
	var tree func(dir string) ([]byte, error)
	tree = func(dir string) ([]byte, error) {
		if h, ok := memo[dir]; ok {
			return h, nil
		}
		e, ok := byPath[dir]
		if !ok {
			return nil, fmt.Errorf("%s: not in the scan", dir)
		}
		h := sha256.New()
		io.WriteString(h, "proctor-hostview-dir-v1\x00")
		h.Write(e.Own)
		subs := slices.Clone(e.Subdirs)
		slices.Sort(subs)
		for _, n := range subs {
			if _, ok := byPath[filepath.Join(dir, n)]; !ok {
				// Gone between reading its parent and walking into it:
				// the host changed under the scan; what was seen counts.
				continue
			}
			sub, err := tree(filepath.Join(dir, n))
			if err != nil {
				return nil, err
			}
			writeName(h, n)
			h.Write(sub)
		}
		memo[dir] = h.Sum(nil)
		return memo[dir], nil
	}
	top := sha256.New()
	io.WriteString(top, "proctor-hostview-v1\x00")
	for _, d := range hostDirs {
		fi, err := os.Lstat(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		writeName(top, d)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				return "", err
			}
			t := sha256.Sum256([]byte(target))
			top.Write([]byte{'l'})
			top.Write(t[:])
		case fi.IsDir():
			h, err := tree(d)
			if err != nil {
				return "", err
			}
			top.Write([]byte{'d'})
			top.Write(h)
		}
	}
	return "host-sha256:" + hex.EncodeToString(top.Sum(nil)), nil
}

func writeName(h hash.Hash, name string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(name)))
	h.Write(n[:])
	io.WriteString(h, name)
}

// fillOwn computes own() for each entry, several directories at a time.
func fillOwn(entries []*scanEntry, cache *task.HashCache) error {
	jobs := make(chan *scanEntry)
	errs := make(chan error, len(entries))
	var wg sync.WaitGroup
	for range min(4, max(len(entries), 1)) {
		wg.Go(func() {
			buf := make([]byte, 256<<10)
			for e := range jobs {
				own, err := ownHash(e, cache, buf)
				if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
					// Removed since the scan found it: digested as gone,
					// as the scan leaves out one that vanishes under it.
					gone := sha256.Sum256([]byte("proctor-hostview-gone-v1"))
					own, err = gone[:], nil
				}
				if err != nil {
					errs <- fmt.Errorf("digesting the host's %s: %w", e.Path, err)
					continue
				}
				e.Own = own
			}
		})
	}
	for _, e := range entries {
		jobs <- e
	}
	close(jobs)
	wg.Wait()
	close(errs)
	return <-errs
}

// ownHash reads one directory: its entries but its readable subdirectories.
func ownHash(e *scanEntry, cache *task.HashCache, buf []byte) ([]byte, error) {
	fd, err := unix.Open(e.Path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	dir := os.NewFile(uintptr(fd), e.Path)
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	restricted := map[string]bool{}
	for _, n := range e.Restricted {
		restricted[n] = true
	}
	subdir := map[string]bool{}
	for _, n := range e.Subdirs {
		subdir[n] = true
	}
	h := sha256.New()
	io.WriteString(h, "proctor-hostview-own-v1\x00")
	for _, n := range names {
		if subdir[n] {
			continue
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, n, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return nil, err
		}
		kind, body := byte('o'), []byte(nil)
		switch {
		case restricted[n]:
			kind = 'm'
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			buf := make([]byte, unix.PathMax)
			k, err := unix.Readlinkat(fd, n, buf)
			if errors.Is(err, unix.ENOENT) {
				continue // removed while read
			}
			if err != nil {
				return nil, err
			}
			t := sha256.Sum256(buf[:k])
			kind, body = 'l', t[:]
		case st.Mode&unix.S_IFMT == unix.S_IFREG:
			sum, err := fileHash(fd, n, cache, buf)
			if errors.Is(err, unix.ENOENT) {
				continue // removed while read
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", n, err)
			}
			kind, body = 'f', sum
		case st.Mode&unix.S_IFMT == unix.S_IFDIR:
			kind = 'm' // a directory neither readable nor listed: masked
		}
		var hdr [13]byte
		hdr[0] = kind
		binary.BigEndian.PutUint32(hdr[1:5], st.Mode&0o7777)
		binary.BigEndian.PutUint64(hdr[5:13], uint64(len(n)))
		h.Write(hdr[:])
		io.WriteString(h, n)
		h.Write(body)
	}
	return h.Sum(nil), nil
}

// fileHash returns the SHA-256 of the regular file name in dirfd, from the
// cache when its identity is unchanged.
func fileHash(dirfd int, name string, cache *task.HashCache, buf []byte) ([]byte, error) {
	f, err := openRegularAt(dirfd, name)
	if errors.Is(err, errNotRegular) {
		return nil, fmt.Errorf("changed while read")
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if sum, ok := cache.Lookup(fi); ok {
		return sum[:], nil
	}
	h := sha256.New()
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{f}, buf); err != nil {
		return nil, err
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	if after, err := f.Stat(); err == nil && after.Size() == fi.Size() && after.ModTime().Equal(fi.ModTime()) {
		cache.Remember(after, sum)
	}
	return sum[:], nil
}

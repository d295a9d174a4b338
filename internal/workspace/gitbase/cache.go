package gitbase

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The cache directory:
//
//	cacheDir/
//	  <key>/              one finished copy, renamed into place whole
//	    complete          marker, written last: cacheFormat and the commit
//	    repo/             the returned directory: working tree and .git
//	  peeled/<oid>        an annotated tag's id → its commit (ids are content
//	                      addressed, so this never goes stale)
//	  locks/<key>         flock(2) held while <key> is being built
//	  tmp-*/              a build in progress (flock(2) held on the directory),
//	                      or the remains of a crashed one
//
// <key> is the commit id, followed by "-shallow-<hash>" when src is a
// shallow clone (its history then depends on where src was cut).

const (
	cacheFormat = "proctor-gitbase-cache 2"
	markerName  = "complete"
	repoName    = "repo"
	tmpPrefix   = "tmp-"
	peeledDir   = "peeled"
	locksDir    = "locks"

	// staleAfter: an unlocked tmp-* directory at least this old belongs to
	// a build that died (a live build locks its directory right after
	// creating it).
	staleAfter = time.Minute
)

func marker(commit string) string { return cacheFormat + "\ncommit " + commit + "\n" }

// cacheKey names the entry for commit built from a source with the given
// shallow file (nil for a complete repository).
func cacheKey(commit string, shallow []byte) string {
	if shallow == nil {
		return commit
	}
	sum := sha256.Sum256(shallow)
	return commit + "-shallow-" + hex.EncodeToString(sum[:8])
}

// lookupEntry returns the repository directory of a finished entry.
func lookupEntry(cacheDir, key, commit string) (dir string, ok bool) {
	entry := filepath.Join(cacheDir, key)
	b, err := readSmall(filepath.Join(entry, markerName))
	if err != nil || string(b) != marker(commit) {
		return "", false
	}
	dir = filepath.Join(entry, repoName)
	if !isFile(filepath.Join(dir, ".git", "HEAD")) {
		return "", false
	}
	return dir, true
}

// lookupPeeled returns the commit an object id was found to peel to.
func lookupPeeled(cacheDir, oid string, hexLen int) (commit string, ok bool) {
	b, err := readSmall(filepath.Join(cacheDir, peeledDir, oid))
	if err != nil {
		return "", false
	}
	c := strings.TrimSpace(string(b))
	return c, len(c) == hexLen && isHex(c)
}

// recordPeeled remembers that oid peels to commit. Best effort: a failure
// costs one git run next time.
func recordPeeled(cacheDir, oid, commit string) {
	if oid == commit {
		return
	}
	dir := filepath.Join(cacheDir, peeledDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	f, err := os.CreateTemp(dir, tmpPrefix)
	if err != nil {
		return
	}
	_, werr := f.WriteString(commit + "\n")
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Chmod(f.Name(), 0o644) != nil || os.Rename(f.Name(), filepath.Join(dir, oid)) != nil {
		os.Remove(f.Name())
	}
}

// lockKey takes the build lock of key, waiting for another builder to
// finish. The lock goes with the returned file: close it to release.
func lockKey(ctx context.Context, cacheDir, key string) (*os.File, error) {
	dir := filepath.Join(cacheDir, locksDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, key), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for delay := time.Millisecond; ; delay = min(2*delay, 100*time.Millisecond) {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return f, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", f.Name(), err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// newTmp creates a build directory and locks it, so removeStale can tell it
// from the remains of a crashed build.
func newTmp(cacheDir string) (dir string, lock *os.File, err error) {
	dir, err = os.MkdirTemp(cacheDir, tmpPrefix)
	if err != nil {
		return "", nil, err
	}
	lock, err = os.Open(dir)
	if err == nil {
		err = unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	}
	if err != nil {
		if lock != nil {
			lock.Close()
		}
		os.RemoveAll(dir)
		return "", nil, err
	}
	return dir, lock, nil
}

// removeStale removes tmp-* directories of builds that died: unlocked and
// not modified for staleAfter. Errors are ignored; the next build retries.
func removeStale(cacheDir string) {
	ents, err := os.ReadDir(cacheDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), tmpPrefix) {
			continue
		}
		path := filepath.Join(cacheDir, e.Name())
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < staleAfter {
			continue
		}
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			os.RemoveAll(path)
		}
		f.Close()
	}
}

// publish renames the finished build directory tmp to cacheDir/key. An
// entry already there without a valid marker (damaged by hand, or left by
// another format) is moved aside and removed; a valid one is kept, and tmp
// discarded.
func publish(tmp, cacheDir, key, commit string) (string, error) {
	final := filepath.Join(cacheDir, key)
	err := os.Rename(tmp, final)
	if err != nil && (errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY)) {
		if dir, ok := lookupEntry(cacheDir, key, commit); ok {
			os.RemoveAll(tmp)
			return dir, nil
		}
		trash, terr := os.MkdirTemp(cacheDir, tmpPrefix)
		if terr != nil {
			return "", terr
		}
		old := filepath.Join(trash, "old")
		if terr := os.Rename(final, old); terr != nil {
			os.Remove(trash)
			return "", fmt.Errorf("replacing incomplete %s: %w", final, terr)
		}
		err = os.Rename(tmp, final)
		os.RemoveAll(trash)
	}
	if err != nil {
		return "", err
	}
	syncDir(cacheDir)
	return filepath.Join(final, repoName), nil
}

func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		f.Sync()
		f.Close()
	}
}

// makeShareable gives everything under root modes an unprivileged reader
// can use, whatever the process umask was: directories 0755, files readable
// by all, executable by all when executable by the owner, writable by the
// owner only; no setuid, setgid or sticky bits. Symbolic links are left
// alone. It reports whether a file of the working tree (outside .git)
// changed, since the index then holds stale ctimes.
func makeShareable(root string) (worktreeChanged bool, err error) {
	gitDir := filepath.Join(root, ".git")
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode()
		var want fs.FileMode
		switch {
		case mode.IsDir():
			want = 0o755
		case mode.IsRegular():
			want = mode.Perm()&^0o022 | 0o444
			if mode&0o100 != 0 {
				want |= 0o111
			}
		default:
			return fmt.Errorf("%s: unexpected file type %v", path, mode.Type())
		}
		if mode&(fs.ModePerm|fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) == want {
			return nil
		}
		if err := os.Chmod(path, want); err != nil {
			return err
		}
		if mode.IsRegular() && path != gitDir && !strings.HasPrefix(path, gitDir+string(filepath.Separator)) {
			worktreeChanged = true
		}
		return nil
	})
	return worktreeChanged, err
}

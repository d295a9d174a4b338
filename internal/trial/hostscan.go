package trial

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/gob"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// A "host" environment shows the host's system directories idmapped, so
// that the agent may change them copy-on-write: the host's root-owned files
// then belong to the sandbox's root, which could read even those the host
// keeps from other users (a keytab, a database's pg_hba.conf, a private
// key). Every file that is not readable by others, and every directory that
// is not readable and searchable by others, is therefore masked: the agent
// sees what an unprivileged host user would see.
//
// Finding them means walking the directories (/usr holds some 150,000
// entries). The walk is cached per directory, keyed by its identity and its
// modification and change times, so a later trial stats each directory and
// reads again only those whose entries changed. A file made unreadable in
// place (chmod) does not change its directory: the cache notices it only
// when something in that directory is added, removed or renamed. Restricted
// files are normally created so (install -m 600, umask 077), which the cache
// sees.

// scanEntry is what the cache keeps of one directory.
type scanEntry struct {
	Path             string
	Dev, Ino         uint64
	MtimeNS, CtimeNS int64
	Restricted       []string // names of restricted children
	Subdirs          []string // names of readable, searchable child directories
	// Own is the SHA-256 of what the directory holds but its readable
	// subdirectories (see ownHash); nil until the environment digest
	// needs it.
	Own []byte
}

type hostScan struct {
	old     map[string]scanEntry
	now     []scanEntry // in walk order
	changed bool        // a directory was read again
	// oldID is the cache's identity of the scan it holds (see identity),
	// nil when it had none.
	oldID []byte
	id    []byte // identity's answer, once asked
}

// scanFile is the scan cache's content: the scan in walk order and its
// identity, written together so that one never goes with another's.
type scanFile struct {
	ID   []byte
	List []scanEntry
}

// scanHost walks dirs and returns the scan (to be saved by the caller) and
// every restricted path, sorted.
func scanHost(dirs []string, cacheFile string) (*hostScan, []string, error) {
	s := &hostScan{old: map[string]scanEntry{}}
	if f, err := os.Open(cacheFile); err == nil {
		// A list in walk order decodes much faster than a map. A cache
		// that does not decode (damaged, or an older format) is read again.
		var sf scanFile
		if derr := gob.NewDecoder(bufio.NewReaderSize(f, 1<<20)).Decode(&sf); derr == nil {
			s.old = make(map[string]scanEntry, len(sf.List))
			for _, e := range sf.List {
				s.old[e.Path] = e
			}
			if len(sf.ID) == sha256.Size {
				s.oldID = sf.ID
			}
		}
		f.Close()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("reading the host scan cache: %w", err)
	}
	out, err := s.walkAll(dirs)
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(out)
	return s, out, nil
}

// walkAll walks dirs: each one's own entry first, then its subdirectories
// as separate subtrees, several at a time (the walk is a stat per
// directory); results are merged in walk order.
func (s *hostScan) walkAll(dirs []string) ([]string, error) {
	var out []string
	type job struct {
		dir string
		sub *hostScan
		out []string
		err error
	}
	var jobs []*job
	for _, d := range dirs {
		top := &hostScan{old: s.old}
		e, ok, err := top.entry(d)
		if err != nil {
			return nil, fmt.Errorf("scanning the host's %s for unreadable files: %w", d, err)
		}
		if !ok {
			continue
		}
		s.now = append(s.now, top.now...)
		s.changed = s.changed || top.changed
		for _, n := range e.Restricted {
			out = append(out, filepath.Join(d, n))
		}
		for _, n := range e.Subdirs {
			jobs = append(jobs, &job{dir: filepath.Join(d, n), sub: &hostScan{old: s.old}})
		}
	}
	next := make(chan *job)
	var wg sync.WaitGroup
	for range min(4, max(len(jobs), 1)) {
		wg.Go(func() {
			for j := range next {
				j.err = j.sub.walk(j.dir, &j.out)
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	for _, j := range jobs {
		if j.err != nil {
			return nil, fmt.Errorf("scanning the host's %s for unreadable files: %w", j.dir, j.err)
		}
		s.now = append(s.now, j.sub.now...)
		s.changed = s.changed || j.sub.changed
		out = append(out, j.out...)
	}
	return out, nil
}

// entry returns the cached or freshly read entry of dir, recording it;
// ok is false when dir is missing or not a directory.
func (s *hostScan) entry(dir string) (scanEntry, bool, error) {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return scanEntry{}, false, nil
		}
		return scanEntry{}, false, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return scanEntry{}, false, nil
	}
	e, ok := s.old[dir]
	if !ok || e.Dev != st.Dev || e.Ino != st.Ino || e.MtimeNS != st.Mtim.Nano() || e.CtimeNS != st.Ctim.Nano() {
		var err error
		if e, err = readScanEntry(dir, &st); err != nil {
			return e, false, err
		}
		s.changed = true
	}
	s.now = append(s.now, e)
	return e, true, nil
}

func (s *hostScan) walk(dir string, out *[]string) error {
	e, ok, err := s.entry(dir)
	if err != nil || !ok {
		return err
	}
	for _, n := range e.Restricted {
		*out = append(*out, filepath.Join(dir, n))
	}
	for _, n := range e.Subdirs {
		if err := s.walk(filepath.Join(dir, n), out); err != nil {
			return err
		}
	}
	return nil
}

func readScanEntry(dir string, st *unix.Stat_t) (scanEntry, error) {
	e := scanEntry{Path: dir, Dev: st.Dev, Ino: st.Ino, MtimeNS: st.Mtim.Nano(), CtimeNS: st.Ctim.Nano()}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return e, err
	}
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return e, err
	}
	slices.Sort(names)
	for _, n := range names {
		var cst unix.Stat_t
		if err := unix.Fstatat(fd, n, &cst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return e, err
		}
		switch cst.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			// Not followed: what it points at is judged where it lies.
		case unix.S_IFDIR:
			if cst.Mode&0o005 != 0o005 {
				e.Restricted = append(e.Restricted, n)
			} else {
				e.Subdirs = append(e.Subdirs, n) // submounts too: the view is recursive
			}
		default:
			if cst.Mode&0o004 == 0 {
				e.Restricted = append(e.Restricted, n)
			}
		}
	}
	return e, nil
}

// identity is the SHA-256 of the scanned directories' paths, identities
// and times, in walk order: every entry added, removed or renamed in one of
// them changes it. When no directory changed since the cache was written,
// it is the cache's, without hashing the scan again.
func (s *hostScan) identity() []byte {
	if s.id != nil {
		return s.id
	}
	if !s.changed && len(s.now) == len(s.old) && s.oldID != nil {
		s.id = s.oldID
		return s.id
	}
	h := sha256.New()
	var buf [32]byte
	for _, e := range s.now {
		h.Write([]byte(e.Path))
		binary.LittleEndian.PutUint64(buf[0:], e.Dev)
		binary.LittleEndian.PutUint64(buf[8:], e.Ino)
		binary.LittleEndian.PutUint64(buf[16:], uint64(e.MtimeNS))
		binary.LittleEndian.PutUint64(buf[24:], uint64(e.CtimeNS))
		h.Write([]byte{0})
		h.Write(buf[:])
	}
	s.id = h.Sum(nil)
	return s.id
}

func (s *hostScan) save(cacheFile string) error {
	if err := os.MkdirAll(filepath.Dir(cacheFile), 0o700); err != nil {
		return fmt.Errorf("writing the host scan cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(cacheFile), ".hostscan-*")
	if err != nil {
		return fmt.Errorf("writing the host scan cache: %w", err)
	}
	defer os.Remove(tmp.Name())
	w := bufio.NewWriterSize(tmp, 1<<20)
	if err := gob.NewEncoder(w).Encode(scanFile{ID: s.identity(), List: s.now}); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the host scan cache: %w", err)
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the host scan cache: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the host scan cache: %w", err)
	}
	return os.Rename(tmp.Name(), cacheFile)
}

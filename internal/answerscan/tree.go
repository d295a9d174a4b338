package answerscan

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"
)

// Limits bound what is read of one directory tree.
type Limits struct {
	Files      int   // files read; the rest are left out
	FileBytes  int64 // read of one file; the rest of it is left out
	TotalBytes int64 // read in all; files past it are left out
}

// DefaultLimits are generous for an agent's scaffold and its installed
// tools.
func DefaultLimits() Limits {
	return Limits{Files: 200_000, FileBytes: 1 << 30, TotalBytes: 1 << 30}
}

func (l Limits) orDefault() Limits {
	d := DefaultLimits()
	return Limits{Files: cmp.Or(l.Files, d.Files), FileBytes: cmp.Or(l.FileBytes, d.FileBytes), TotalBytes: cmp.Or(l.TotalBytes, d.TotalBytes)}
}

// TreeStats says what was read of a tree.
type TreeStats struct {
	Files   int   `json:"files"`   // regular files read, whole or in part
	Bytes   int64 `json:"bytes"`   // bytes read
	Binary  int   `json:"binary"`  // of them, files with a NUL byte: their printable runs were searched
	Partial int   `json:"partial"` // of them, files read only up to Limits.FileBytes
	LeftOut int   `json:"left_out"`
	// Skipped counts entries never read: symbolic links (not followed),
	// fifos, sockets, devices, and entries that could not be read.
	Skipped int `json:"skipped"`
}

// minRun is the shortest run of printable bytes kept from a binary file.
const minRun = 8

// Files are read a chunk at a time; each chunk after the first begins with
// the last overlap bytes of the one before, so a fragment across the cut
// is whole in one of them (a line longer than that is not).
const (
	chunkBytes   = 8 << 20
	overlapBytes = 64 << 10
)

// A chunk is a piece of a file as walkTree gives it: its text (a binary's
// printable runs, each on a line of its own), the number of the line it
// begins on (counted in the file as read, for a text file), whether the
// file is binary, and whether this is its first chunk, its last.
type chunk struct {
	data        []byte
	line        int
	binary      bool
	first, last bool
}

// walkTree calls fn with each regular file beneath root, in lexical order,
// with its path relative to root, a chunk at a time, within lim. It never
// follows a symbolic link, never opens anything but a regular file (a fifo
// cannot block it), and never leaves root. skipGit leaves out .git
// directories.
func walkTree(root string, lim Limits, skipGit bool, fn func(rel string, c chunk)) (TreeStats, error) {
	var st TreeStats
	r, err := os.OpenRoot(root)
	if err != nil {
		return st, err
	}
	defer r.Close()
	var buf []byte // grown to the largest chunk read so far, and its overlap
	err = fs.WalkDir(r.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			if rel == "." {
				return err
			}
			st.Skipped++
			return nil // an unreadable directory: the rest goes on
		}
		if d.IsDir() {
			if skipGit && d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			st.Skipped++
			return nil
		}
		if st.Files >= lim.Files || st.Bytes >= lim.TotalBytes {
			st.LeftOut++
			return nil
		}
		f, size, err := openRegular(r, rel)
		if err != nil {
			st.Skipped++
			return nil
		}
		defer f.Close()
		st.Files++
		limit := min(lim.FileBytes, lim.TotalBytes-st.Bytes)
		if need := int(min(chunkBytes, limit, size+1)) + overlapBytes; len(buf) < need {
			buf = make([]byte, need)
		}
		c := chunk{line: 1}
		var read int64
		keep := 0 // bytes carried from the chunk before
		for c.first = true; ; c.first = false {
			n, rerr := io.ReadFull(f, buf[keep:keep+int(min(int64(len(buf)-keep), chunkBytes, limit-read))])
			read += int64(n)
			data := buf[:keep+n]
			if c.first {
				c.binary = bytes.IndexByte(data[:min(len(data), 8<<10)], 0) >= 0
			}
			c.last = rerr != nil || read >= limit
			if c.last && rerr == nil {
				var one [1]byte
				if m, _ := f.Read(one[:]); m > 0 {
					st.Partial++
				}
			}
			if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
				st.Skipped++ // read what could be read
			}
			c.data = data
			if c.binary {
				c.data = printableRuns(data)
			}
			fn(rel, c)
			if c.last {
				break
			}
			keep = min(overlapBytes, len(data))
			if !c.binary {
				c.line += bytes.Count(data[:len(data)-keep], []byte("\n"))
			}
			copy(buf, data[len(data)-keep:])
		}
		st.Bytes += read
		if c.binary {
			st.Binary++
		}
		return nil
	})
	return st, err
}

// openRegular opens rel beneath r for reading if it is a regular file: not
// through a symbolic link, never blocking on a fifo put in its place. It
// returns its size.
func openRegular(r *os.Root, rel string) (*os.File, int64, error) {
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: not a regular file", rel)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// printableRuns keeps the runs of at least minRun printable ASCII bytes
// (tabs and line breaks included) of a binary file, one a line: the
// strings a program carries.
func printableRuns(data []byte) []byte {
	out := make([]byte, 0, len(data)/4)
	start := -1
	for i := 0; i <= len(data); i++ {
		printable := i < len(data) && (data[i] >= ' ' && data[i] < 0x7f || data[i] == '\t' || data[i] == '\n' || data[i] == '\r')
		switch {
		case printable && start < 0:
			start = i
		case !printable && start >= 0:
			if i-start >= minRun {
				out = append(append(out, data[start:i]...), '\n')
			}
			start = -1
		}
	}
	return out
}

// ReadTree reads the text files beneath root, within lim (zero fields: the
// defaults), as Docs named prefix/relative-path: a task's hidden tests or
// solution for Material.Hidden. Binary files are left out.
func ReadTree(root, prefix string, lim Limits) ([]Doc, TreeStats, error) {
	var docs []Doc
	var cur []byte
	st, err := walkTree(root, lim.orDefault(), false, func(rel string, c chunk) {
		if c.binary {
			return
		}
		if !c.first { // its overlap is read already
			c.data = c.data[min(overlapBytes, len(c.data)):]
		}
		cur = append(cur, c.data...)
		if c.last {
			docs = append(docs, Doc{Name: path.Join(prefix, rel), Data: cur})
			cur = nil
		}
	})
	return docs, st, err
}

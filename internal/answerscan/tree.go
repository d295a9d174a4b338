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
	return Limits{Files: 200_000, FileBytes: 64 << 20, TotalBytes: 1 << 30}
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

// walkTree calls fn with each regular file beneath root, in lexical order,
// with its path relative to root and its content (the printable runs of a
// binary one, each on a line of its own), within lim. It never follows a
// symbolic link, never opens anything but a regular file (a fifo cannot
// block it), and never leaves root. skipGit leaves out .git directories.
func walkTree(root string, lim Limits, skipGit bool, fn func(rel string, data []byte, binary bool)) (TreeStats, error) {
	var st TreeStats
	r, err := os.OpenRoot(root)
	if err != nil {
		return st, err
	}
	defer r.Close()
	buf := make([]byte, 0, 64<<10)
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
		want := min(lim.FileBytes, lim.TotalBytes-st.Bytes)
		data, whole, err := readRegular(r, rel, want, buf[:0])
		if err != nil {
			st.Skipped++
			return nil
		}
		buf = data[:0]
		st.Files++
		st.Bytes += int64(len(data))
		if !whole {
			st.Partial++
		}
		binary := bytes.IndexByte(data[:min(len(data), 8<<10)], 0) >= 0
		if binary {
			st.Binary++
			data = printableRuns(data)
		}
		fn(rel, data, binary)
		return nil
	})
	return st, err
}

// readRegular reads at most limit bytes of the regular file rel beneath r
// into buf, and reports whether that was all of it.
func readRegular(r *os.Root, rel string, limit int64, buf []byte) ([]byte, bool, error) {
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	if !fi.Mode().IsRegular() {
		return nil, false, fmt.Errorf("%s: not a regular file", rel)
	}
	if n := min(fi.Size(), limit) + 1; int64(cap(buf)) < n {
		buf = make([]byte, 0, n)
	}
	data := buf[:0]
	for {
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		if int64(len(data)) >= limit {
			var one [1]byte
			n, _ := f.Read(one[:])
			return data, n == 0, nil
		}
		n, err := f.Read(data[len(data):min(int64(cap(data)), limit)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, true, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
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
	st, err := walkTree(root, lim.orDefault(), false, func(rel string, data []byte, binary bool) {
		if !binary {
			docs = append(docs, Doc{Name: path.Join(prefix, rel), Data: bytes.Clone(data)})
		}
	})
	return docs, st, err
}

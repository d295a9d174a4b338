package trial

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/trapfs"
)

// AuditRef says what the audit watched in the agent phase and what it saw.
type AuditRef struct {
	// Hidden is how opens of hidden paths were watched: "trap" (a
	// host-served filesystem over /tests, /solution and every masked path)
	// or "off". Network is how connects were watched: "seccomp-notify" or
	// "off".
	Hidden  string         `json:"hidden"`
	Network string         `json:"network"`
	Events  int            `json:"events"`   // events on the timeline
	Counts  map[string]int `json:"counts"`   // what the agent caused, by event kind, kept or not
	LeftOut map[string]int `json:"left_out"` // of those, not kept (over the limits), by kind
}

// traps is the trap filesystem of one agent phase and the mounts made of it.
type traps struct {
	fs    *trapfs.FS
	trees []sandbox.Tree
	dirs  []string // trapped paths absent from the environment (mount points to hide)
}

// startTraps mounts the trap filesystem for the agent phase: a trap
// directory at /tests and /solution where the environment has none, and a
// trap file or directory on top of every mask (the masks stay beneath).
// Hiding stays with the mounts; the trap only records what reaches it.
func (r *runner) startTraps(l *layout) (*traps, error) {
	tr := &traps{}
	var nodes []trapfs.Node
	var dsts []string
	hidden := []string{TestsPath}
	if !r.o.Solution {
		hidden = append(hidden, SolutionPath)
	}
	for _, h := range hidden {
		if under(r.o.Task.Environment.Workdir, h) {
			continue // a task working in /tests keeps it (and is judged by policy)
		}
		exists, err := r.inEnvironment(h)
		if err != nil {
			return nil, err
		}
		if exists {
			continue
		}
		nodes = append(nodes, trapfs.Node{Path: h, Dir: true})
		dsts = append(dsts, h)
		tr.dirs = append(tr.dirs, h)
	}
	for _, m := range l.masks {
		fi, err := os.Lstat(m)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return nil, fmt.Errorf("looking at masked path %s: %w", m, err)
		case fi.IsDir():
			nodes = append(nodes, trapfs.Node{Path: m, Dir: true})
		case fi.Mode().IsRegular():
			nodes = append(nodes, trapfs.Node{Path: m})
		default:
			continue // a symlink or special file: masked, not watched
		}
		dsts = append(dsts, m)
	}
	if len(nodes) == 0 {
		return tr, nil
	}
	f, err := trapfs.Mount(nodes, r.hiddenAccess)
	if err != nil {
		return nil, fmt.Errorf("mounting the audit trap (pass --no-audit to run without recording attempts on hidden paths): %w", err)
	}
	tr.fs = f
	for i, d := range dsts {
		m, err := f.Clone(i)
		if err != nil {
			tr.close()
			return nil, fmt.Errorf("mounting the audit trap at %s: %w", d, err)
		}
		tr.trees = append(tr.trees, sandbox.Tree{Dst: d, Mount: m})
	}
	return tr, nil
}

// close releases the trap's mounts and stops serving it.
func (tr *traps) close() error {
	if tr == nil {
		return nil
	}
	for _, t := range tr.trees {
		t.Mount.Close()
	}
	tr.trees = nil
	if tr.fs == nil {
		return nil
	}
	return tr.fs.Close() // idempotent
}

// dropped is how many accesses the trap saw but could not deliver (its
// queue was full): counted, so none vanishes without a trace.
func (tr *traps) dropped() int {
	if tr == nil || tr.fs == nil {
		return 0
	}
	return int(tr.fs.Dropped())
}

// inEnvironment reports whether path exists in the environment's root.
func (r *runner) inEnvironment(path string) (bool, error) {
	if r.env.rootfs == sandbox.RootfsHost {
		return false, nil // the root is a skeleton without it
	}
	_, err := os.Lstat(filepath.Join(r.env.rootfs, path))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// hiddenAccess records one access to a trap.
func (r *runner) hiddenAccess(a trapfs.Access) {
	r.audit.Observe("hidden."+a.Op, detail("path", a.Path, "pid", a.PID, "uid", a.UID), a.Time)
}

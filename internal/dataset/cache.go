package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/task"
)

// LockSchema names the format of a cached dataset's lock.
const LockSchema = "proctor.dataset/v1"

// LockFile is a cached dataset's lock, in its directory.
const LockFile = "dataset.json"

// Default caps on one task.
const (
	DefaultMaxTaskBytes = 4 << 30
	DefaultMaxTaskFiles = 100_000
)

// Options say where the cache is and how to fill it.
type Options struct {
	// CacheDir is Proctor's cache directory; datasets live in its
	// "datasets" directory.
	CacheDir string
	// Progress, when set, gets a line for each step.
	Progress io.Writer
	// MaxTaskBytes and MaxTaskFiles cap each task (0: the defaults).
	MaxTaskBytes int64
	MaxTaskFiles int
	// GitEnv is added to git's environment (GIT_CONFIG_COUNT=… and the
	// like).
	GitEnv []string
	// Now gives the time recorded as pulled (nil: time.Now).
	Now func() time.Time
}

func (o *Options) root() string { return filepath.Join(o.CacheDir, "datasets") }

func (o *Options) say(format string, a ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "proctor: "+format+"\n", a...)
	}
}

// Lock is what a cached dataset holds, in its dataset.json: written once,
// when it is pulled. A plain value.
type Lock struct {
	Schema      string       `json:"schema"`
	Name        string       `json:"name"`
	Version     string       `json:"version"`
	Description string       `json:"description,omitempty"`
	Registry    string       `json:"registry"` // where the registry was read from
	Pulled      time.Time    `json:"pulled"`
	Tasks       []LockedTask `json:"tasks"`
	// Dir is the dataset's directory (not stored).
	Dir string `json:"-"`
}

// Ref is the dataset's NAME@VERSION.
func (l *Lock) Ref() Ref { return Ref{Name: l.Name, Version: l.Version} }

// LockedTask is one task of a cached dataset.
type LockedTask struct {
	Name   string `json:"name"`
	GitURL string `json:"git_url"`
	Commit string `json:"commit"`
	// Pinned says the registry named the commit; false when it named
	// none and the repository's default branch was fetched at pull.
	Pinned bool   `json:"pinned"`
	Path   string `json:"path"`
	Digest string `json:"digest"` // the task directory's, as cached (read-only)
}

// TaskDir is the directory of the cached task t.
func (l *Lock) TaskDir(t *LockedTask) string { return filepath.Join(l.Dir, "tasks", t.Name) }

// setDir is where the dataset ref is cached.
func (o *Options) setDir(ref Ref) string {
	return filepath.Join(o.root(), "sets", url.PathEscape(ref.Name)+"@"+url.PathEscape(ref.Version))
}

// Pull caches the dataset ref of reg: each task's repository fetched at its
// commit, its files copied out read-only, its digest pinned. A dataset
// already cached is checked (its digests, and that the registry still
// names the same tasks at the same commits) and left as it is, with no
// fetch. One pull at a time holds the cache's lock.
func Pull(ctx context.Context, o Options, reg *Registry, ref Ref) (*Lock, error) {
	ds, err := reg.Find(ref)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(o.root(), "sets"), 0o755); err != nil {
		return nil, err
	}
	unlock, err := lockDir(o.root())
	if err != nil {
		return nil, err
	}
	defer unlock()
	if l, err := Open(o, ref); err == nil {
		if err := l.Verify(); err != nil {
			return nil, err
		}
		if err := l.sameAs(ds); err != nil {
			return nil, err
		}
		o.say("dataset %s: already cached in %s", ref, l.Dir)
		return l, nil
	} else if !errors.Is(err, ErrNotCached) {
		return nil, err
	}

	staging, err := os.MkdirTemp(o.root(), ".pull-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if staging != "" {
			makeWritable(staging)
			os.RemoveAll(staging)
		}
	}()
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	l := &Lock{Schema: LockSchema, Name: ds.Name, Version: ds.Version, Description: ds.Description,
		Registry: reg.Source, Pulled: now().UTC().Truncate(time.Second), Tasks: []LockedTask{}, Dir: staging}
	lim := limits{bytes: o.MaxTaskBytes, files: o.MaxTaskFiles}
	if lim.bytes <= 0 {
		lim.bytes = DefaultMaxTaskBytes
	}
	if lim.files <= 0 {
		lim.files = DefaultMaxTaskFiles
	}
	g := &git{env: o.GitEnv}
	fetched := map[string]string{} // url + "@" + commit asked → commit
	for _, spec := range ds.Tasks {
		lt, err := pullTask(ctx, o, g, l, spec, lim, fetched)
		if err != nil {
			return nil, &TaskError{Dataset: ref.String(), Task: spec.Name, Err: err}
		}
		l.Tasks = append(l.Tasks, *lt)
		o.say("dataset %s: task %s: %s at %.12s: %s", ref, spec.Name, spec.Path, lt.Commit, lt.Digest)
	}
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(staging, LockFile), append(data, '\n'), 0o444); err != nil {
		return nil, err
	}
	for _, p := range []string{filepath.Join(staging, "tasks"), staging} {
		if err := os.Chmod(p, 0o555); err != nil {
			return nil, err
		}
	}
	dir := o.setDir(ref)
	if err := os.Rename(staging, dir); err != nil {
		return nil, fmt.Errorf("dataset %s: %w", ref, err)
	}
	staging = ""
	l.Dir = dir
	return l, nil
}

// pullTask fetches one task into l's staging directory.
func pullTask(ctx context.Context, o Options, g *git, l *Lock, spec TaskSpec, lim limits, fetched map[string]string) (*LockedTask, error) {
	repo := repoDir(o.root(), spec.GitURL)
	key := spec.GitURL + "@" + spec.Commit
	commit, ok := fetched[key]
	if !ok {
		if err := g.ensureRepo(ctx, repo); err != nil {
			return nil, err
		}
		what := spec.Commit
		if what == "" {
			what = "its default branch"
		}
		o.say("dataset %s: fetching %s at %s", l.Ref(), spec.GitURL, what)
		c, err := g.fetch(ctx, repo, spec.GitURL, spec.Commit)
		if err != nil {
			return nil, err
		}
		fetched[key], commit = c, c
	}
	es, err := g.listTree(ctx, repo, commit, spec.Path, lim)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(l.Dir, "tasks", spec.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := g.extract(ctx, repo, es, dir); err != nil {
		return nil, err
	}
	if err := makeReadOnly(dir); err != nil {
		return nil, err
	}
	d, err := task.Digest(dir)
	if err != nil {
		return nil, err
	}
	return &LockedTask{Name: spec.Name, GitURL: spec.GitURL, Commit: commit, Pinned: spec.Commit != "",
		Path: spec.Path, Digest: d}, nil
}

// sameAs checks that the registry's dataset names the tasks the lock holds.
func (l *Lock) sameAs(ds *Dataset) error {
	differ := func(what string) error {
		return fmt.Errorf("dataset %s: cached in %s, but the registry now %s: remove that directory (chmod -R u+w first) to pull it again", l.Ref(), l.Dir, what)
	}
	if len(ds.Tasks) != len(l.Tasks) {
		return differ(fmt.Sprintf("lists %d tasks, not %d", len(ds.Tasks), len(l.Tasks)))
	}
	for i, s := range ds.Tasks {
		t := l.Tasks[i]
		if s.Name != t.Name || s.GitURL != t.GitURL || s.Path != t.Path || (s.Commit != "" && s.Commit != t.Commit) || (s.Commit == "") == t.Pinned {
			return differ(fmt.Sprintf("names task %s otherwise (%s %s at %q)", s.Name, s.GitURL, s.Path, s.Commit))
		}
	}
	return nil
}

// Open reads the lock of the cached dataset ref. It touches no network;
// an uncached dataset is ErrNotCached. Verify checks its tasks.
func Open(o Options, ref Ref) (*Lock, error) {
	dir := o.setDir(ref)
	l, err := readLock(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("dataset %s: %w in %s", ref, ErrNotCached, o.root())
	}
	if err != nil {
		return nil, err
	}
	if l.Name != ref.Name || l.Version != ref.Version {
		return nil, fmt.Errorf("%s: names %s, not %s: %w", filepath.Join(dir, LockFile), l.Ref(), ref, ErrTampered)
	}
	return l, nil
}

// readLock reads and checks a dataset's lock, strictly.
func readLock(dir string) (*Lock, error) {
	p := filepath.Join(dir, LockFile)
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var l Lock
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if l.Schema != LockSchema {
		return nil, fmt.Errorf("%s: schema %q, want %q", p, l.Schema, LockSchema)
	}
	for i, t := range l.Tasks {
		if !taskName.MatchString(t.Name) || !strings.HasPrefix(t.Digest, task.DigestPrefix) {
			return nil, fmt.Errorf("%s: tasks[%d]: a bad name or digest", p, i)
		}
	}
	l.Dir = dir
	return &l, nil
}

// Verify recomputes each cached task's digest: one that differs from the
// lock's is a *TamperError.
func (l *Lock) Verify() error {
	for i := range l.Tasks {
		t := &l.Tasks[i]
		dir := l.TaskDir(t)
		d, err := task.Digest(dir)
		if errors.Is(err, task.ErrMissing) {
			return &TamperError{Dataset: l.Ref().String(), Task: t.Name, Dir: dir, Want: t.Digest}
		}
		if err != nil {
			return &TamperError{Dataset: l.Ref().String(), Task: t.Name, Dir: dir, Want: t.Digest, Got: err.Error()}
		}
		if d != t.Digest {
			return &TamperError{Dataset: l.Ref().String(), Task: t.Name, Dir: dir, Want: t.Digest, Got: d}
		}
	}
	return nil
}

// TaskDirs opens the cached dataset ref, verifies every task and returns
// their directories, in the registry's order.
func TaskDirs(o Options, ref Ref) ([]string, error) {
	l, err := Open(o, ref)
	if err != nil {
		return nil, err
	}
	if err := l.Verify(); err != nil {
		return nil, err
	}
	dirs := make([]string, len(l.Tasks))
	for i := range l.Tasks {
		dirs[i] = l.TaskDir(&l.Tasks[i])
	}
	return dirs, nil
}

// List reads every cached dataset's lock, sorted by name and version. It
// does not verify them.
func List(o Options) ([]*Lock, error) {
	des, err := os.ReadDir(filepath.Join(o.root(), "sets"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []*Lock
	for _, de := range des {
		if !de.IsDir() || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		l, err := readLock(filepath.Join(o.root(), "sets", de.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b *Lock) int {
		return strings.Compare(a.Name+"\x00"+a.Version, b.Name+"\x00"+b.Version)
	})
	return out, nil
}

// lockDir holds an exclusive flock on dir/.lock until the returned func.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", dir, err)
	}
	return func() { f.Close() }, nil
}

// makeReadOnly clears every write bit below dir (dir included); symlinks
// are left as they are.
func makeReadOnly(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch {
		case de.IsDir():
			dirs = append(dirs, p)
		case de.Type().IsRegular():
			fi, err := de.Info()
			if err != nil {
				return err
			}
			return os.Chmod(p, fi.Mode().Perm()&^0o222)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- { // deepest first
		if err := os.Chmod(dirs[i], 0o555); err != nil {
			return err
		}
	}
	return nil
}

// makeWritable gives the owner write on every directory below dir, so
// that it can be removed.
func makeWritable(dir string) {
	filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err == nil && de.IsDir() {
			os.Chmod(p, 0o755)
		}
		return nil
	})
}

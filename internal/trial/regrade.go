package trial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/hermetic"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/workspace"
)

// RegradeOptions configure a regrade: the grading phase alone, run again
// from a trial's changeset archive.
type RegradeOptions struct {
	Task       *task.Task
	Archive    string // the trial's changeset.tar
	Digest     string // the changeset digest the trial recorded: the archive must have it
	Out        string // where the new verdict and grader log go: created, or empty
	CacheDir   string
	ScratchDir string
	Storage    string // as Options.Storage
	Limits     workspace.Limits
	Progress   io.Writer
	// AgentPhase is how the trial's agent phase ended (from its verdict):
	// a timeout or a limit there shapes the status as it did then.
	AgentPhase Phase
	// Smuggled are the trial's smuggled_answer violations (from its
	// verdict): found in what the agent brought, which a regrade does not
	// have, they are carried as recorded.
	Smuggled []Violation
	// Tooling is the trial's tooling.json and ToolingDigest the digest its
	// verdict recorded: the regrade keeps the agent out of the same
	// tooling. Empty: the profile is the task's, as a new trial gets it.
	Tooling, ToolingDigest string
	// Recording is the directory holding the trial's recording of the
	// verifier's fetches (its bundle's directory) and RecordingDigest the
	// digest its verdict recorded: the grader gets that replayed, and
	// needs no network. Empty with Tooling set: a trial from before
	// hermetic grading, graded with no network.
	Recording, RecordingDigest string
	// Net is the run's network, for a regrade that learns the task's
	// profile and recording afresh (no Tooling given): the same options
	// find the same cached ones.
	Net NetOptions
}

// Regrade runs the policy and the grading phase of a trial again, on the
// changeset it froze, against the task as it is now, and writes a verdict
// whose agent phase did not run. The same archive and the same task give
// the same decisions and, for a deterministic grader, the same verdict.
func Regrade(ctx context.Context, o RegradeOptions) (*Verdict, error) {
	if o.Task == nil {
		return nil, errors.New("no task")
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("proctor regrade needs root: its copy-on-write layers are idmapped mounts")
	}
	if o.Limits == (workspace.Limits{}) {
		o.Limits = workspace.DefaultLimits()
	}
	storage, err := storageFor(o.Storage, true, o.Task.Environment.StorageMB)
	if err != nil {
		return nil, err
	}
	f, err := OpenRegularFile(o.Archive)
	if err != nil {
		return nil, fmt.Errorf("reading the changeset: %w", err)
	}
	cs, err := workspace.ReadArchive(f, o.Limits)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Archive, err)
	}
	if cs.Digest != o.Digest {
		return nil, fmt.Errorf("%s: digest %s, but the trial recorded %s: not the trial's changeset", o.Archive, cs.Digest, o.Digest)
	}
	t := o.Task
	v := &Verdict{
		Schema:        Schema,
		Task:          TaskRef{Name: t.Name},
		PassThreshold: t.Proctor.PassThreshold,
		Grading:       t.Proctor.Grading,
		Violations:    append([]Violation{}, o.Smuggled...),
		Phases:        map[string]Phase{PhaseAgent: o.AgentPhase, PhaseGrader: {LimitsHit: []sandbox.Limit{}}},
		Workspace:     WorkspaceRef{Workdir: t.Environment.Workdir},
		Environment:   EnvironmentRef{Rootfs: t.Proctor.Rootfs},
		Changeset: ChangesetRef{Digest: cs.Digest, Files: cs.Files, Bytes: cs.Bytes, Entries: len(cs.Entries),
			Dropped: []workspace.Dropped{}, LeftOut: []workspace.Dropped{}, Archive: o.Archive},
		Artifacts: []string{},
		TimingsMS: map[string]int64{},
		Storage:   storage,
	}
	r := &runner{o: Options{Task: t, Out: o.Out, CacheDir: o.CacheDir, ScratchDir: o.ScratchDir, Storage: o.Storage,
		LogCap: DefaultLogCap, Limits: o.Limits, Progress: o.Progress, Net: o.Net}, v: v, storage: storage}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	if err := r.checkInputs(); err != nil {
		return nil, err
	}
	v.Pinned = r.pinned()
	if err := makeOut(o.Out); err != nil {
		return nil, err
	}
	err = r.beside(func() error {
		if err := r.loadFrozen(ctx, &Frozen{Tooling: o.Tooling, ToolingDigest: o.ToolingDigest,
			Recording: o.Recording, RecordingDigest: o.RecordingDigest}); err != nil {
			return err
		}
		return r.regrade(ctx, o.Archive, cs)
	})
	v.settle()
	for _, a := range []string{GraderLog, ToolingFile} {
		if _, serr := os.Stat(filepath.Join(o.Out, a)); serr == nil {
			v.Artifacts = append(v.Artifacts, a)
		}
	}
	if werr := v.write(o.Out); werr != nil && err == nil {
		err = werr
	}
	return v, err
}

// regrade judges the changeset and grades it, as a trial does after freeze.
func (r *runner) regrade(ctx context.Context, archive string, cs *workspace.Changeset) error {
	if err := cleanStaleScratch(r.o.ScratchDir); err != nil {
		return err
	}
	r.startRecheck()
	return r.gradePhase(ctx, archive, cs)
}

// OpenRegularFile opens path for reading only if it is a regular file itself:
// not a symlink (to a file elsewhere, or /dev/zero), not a fifo (which would
// block), not a device.
func OpenRegularFile(path string) (*os.File, error) {
	f, err := openRegularAt(unix.AT_FDCWD, path)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%s: a symlink: refused", path)
	case errors.Is(err, errNotRegular):
		return nil, fmt.Errorf("%s: %w", path, err)
	case err != nil:
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return f, nil
}

// errNotRegular means a file opened by openRegularAt was not a regular file.
var errNotRegular = errors.New("not a regular file")

// openRegularAt opens name in dirfd for reading without following a symlink
// at its end or blocking on a fifo, and keeps it only if it is a regular
// file (errNotRegular otherwise).
func openRegularAt(dirfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, errNotRegular
	}
	return f, nil
}

// Frozen names a trial's tooling profile (its tooling.json and the digest
// its verdict recorded) and its recording of the verifier's fetches (the
// directory holding it, a bundle's, and its digest; "" for a trial from
// before hermetic grading).
type Frozen struct {
	Tooling, ToolingDigest     string
	Recording, RecordingDigest string
}

// loadFrozen gives the trial the frozen profile and recording, or with
// none the task's (cached, or learned now).
func (r *runner) loadFrozen(ctx context.Context, f *Frozen) error {
	if f == nil || f.Tooling == "" {
		return r.loadTooling(ctx, "", "", nil)
	}
	var rec *hermetic.Recording
	if f.RecordingDigest != "" {
		var err error
		if rec, err = hermetic.LoadDir(f.Recording, f.RecordingDigest); err != nil {
			return fmt.Errorf("the trial's recording of the verifier's fetches: %w", err)
		}
	}
	return r.loadTooling(ctx, f.Tooling, f.ToolingDigest, rec)
}

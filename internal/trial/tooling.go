package trial

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/hermetic"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/seccomp"
	"github.com/proctor-sandbox/proctor/internal/tooling"
	"github.com/proctor-sandbox/proctor/internal/workspace"
)

// OracleAgent runs the task's solution as the agent, as Harbor does.
const OracleAgent = "if command -v bash >/dev/null; then exec bash " + SolutionPath + "/solve.sh; else exec sh " + SolutionPath + "/solve.sh; fi"

// ToolingFile is the trial's tooling profile, beside its verdict.
const ToolingFile = "tooling.json"

// ToolingRef is the verdict's record of the profile the policy used.
type ToolingRef struct {
	Source string `json:"source"`           // "learned" or "builtin"
	Reason string `json:"reason,omitempty"` // why no learned profile was available
	Digest string `json:"digest"`           // of ToolingFile
	File   string `json:"file"`
	Cached bool   `json:"cached"` // learned by an earlier trial of the same task and environment
}

// toolingSchemaKey is in the cache key: bump it whenever what Learn
// makes of the same run changes, or trials get profiles learned by old rules.
const toolingSchemaKey = tooling.Schema + "+learn-11"

// learning collects what the traced grader of a learning run saw.
type learning struct {
	mu       sync.Mutex
	accesses []tooling.Access
	profile  *tooling.Profile
	err      error
	// noTrace: the run records the verifier's fetches only (a task with no
	// oracle has nothing to learn the tooling from).
	noTrace bool
	// recording is what the verifier fetched through the recorder.
	recording *hermetic.Recording
}

func (lr *learning) record(a seccomp.FileAccess) {
	if a.Path == "" {
		return
	}
	lr.mu.Lock()
	lr.accesses = append(lr.accesses, tooling.Access{Op: a.Op, Path: a.Path, Write: a.Write, Dir: a.Dir, Argv: a.Argv, Env: a.Env, Cwd: a.Cwd})
	lr.mu.Unlock()
}

// toolingKey names a task's profile in the cache: the task's and the
// environment's digests.
func (r *runner) toolingKey() string {
	h := sha256.New()
	env := r.inputs.env // a rootfs directory's
	if r.image != nil {
		env = r.v.Environment.Digest // set by prepare; a host's is taken beside the trial, later
	}
	fmt.Fprintf(h, "%s\n%s\n%s\n", toolingSchemaKey, r.inputs.task, env)
	if r.hostScan != nil {
		// The host view by its directories' identities and times, which
		// every added, removed or renamed entry changes; nothing the
		// environment digest fills in later.
		h.Write(r.hostScan.identity())
	}
	return hex.EncodeToString(h.Sum(nil))
}

// loadTooling gives the trial its profile: the one named (a regrade of a
// bundle), the cached one, or one learned now from the oracle; a built-in
// one when there is no oracle or it did not pass. It writes the profile
// to OUT and records it in the verdict.
func (r *runner) loadTooling(ctx context.Context, given string, givenDigest string, recording *hermetic.Recording) error {
	start := time.Now()
	var p *tooling.Profile
	var b []byte // the profile as stored: canonical JSON, as Marshal wrote it
	cached := false
	var err error
	switch {
	case given != "":
		f, oerr := OpenRegularFile(given)
		if oerr != nil {
			return fmt.Errorf("the trial's tooling profile: %w", oerr)
		}
		var rerr error
		b, rerr = io.ReadAll(io.LimitReader(f, 64<<20))
		f.Close()
		if rerr != nil {
			return fmt.Errorf("%s: %w", given, rerr)
		}
		if p, err = tooling.Parse(given, b); err != nil {
			return err
		}
		if d := tooling.DigestOf(b); givenDigest != "" && d != givenDigest {
			return fmt.Errorf("%s: digest %s, but the trial recorded %s: not the trial's profile", given, d, givenDigest)
		}
	default:
		cache := filepath.Join(r.o.CacheDir, "tooling", r.toolingKey()+".json")
		if raw, rerr := os.ReadFile(cache); rerr == nil {
			if p, err = tooling.Parse(cache, raw); err == nil {
				b, cached = raw, true
			} else {
				p = nil // a damaged cache entry is learned again
			}
		}
		// The verifier's fetches are learned by the same run: a profile
		// cached without them (or they without it) is learned again. A
		// task with no oracle is run for its fetches only when the
		// operator gave its verifier network to record: otherwise its
		// grader has none, as ever.
		key, err := r.hermeticKey()
		if err != nil {
			return err
		}
		record := r.o.Task.Solution != "" || len(r.verifierHosts()) > 0 || r.o.Net.Internet
		if record {
			if recording, err = r.cachedRecording(key); err != nil {
				return err
			}
		}
		recCached := recording != nil
		if p == nil || (record && recording == nil) {
			lp, lrec, err := r.learnTooling(ctx, record)
			if err != nil {
				return err
			}
			if p == nil {
				p = lp
				if b, err = p.Marshal(); err != nil {
					return err
				}
				if err := writeAtomic(cache, b); err != nil {
					return fmt.Errorf("caching the tooling profile: %w", err)
				}
			}
			if record && recording == nil {
				recording = lrec
				st, _, err := r.hermeticStore()
				if err != nil {
					return err
				}
				if err := st.Save(key, recording); err != nil {
					return fmt.Errorf("caching the verifier's recording: %w", err)
				}
			}
		}
		if recording != nil {
			if err := r.useRecording(recording, recCached); err != nil {
				return err
			}
		}
	}
	if given != "" && recording != nil {
		if err := r.useRecording(recording, true); err != nil {
			return err
		}
	}
	d := tooling.DigestOf(b)
	if err := os.WriteFile(filepath.Join(r.o.Out, ToolingFile), b, 0o644); err != nil {
		return fmt.Errorf("writing the tooling profile: %w", err)
	}
	r.tooling = p
	r.v.Tooling = &ToolingRef{Source: p.Source, Reason: p.Reason, Digest: d, File: ToolingFile, Cached: cached}
	r.v.TimingsMS["tooling"] = time.Since(start).Milliseconds()
	r.event("tooling", detail("source", p.Source, "digest", d, "cached", cached, "files", len(p.Files), "probed", len(p.Probed)))
	if p.Source == tooling.SourceBuiltin {
		r.say("tooling: built-in profile (%s)", p.Reason)
	} else {
		r.say("tooling: learned profile, %d files, %d looked for (%s)", len(p.Files), len(p.Probed), d)
	}
	return nil
}

func writeAtomic(name string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), ".tooling-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), name)
}

// learnTooling runs the oracle as the agent and the grader on its changes
// with every file access traced and its network through the recorder,
// and learns the profile and the verifier's fetches from that. With no
// oracle, the grader runs on the pristine environment (a do-nothing
// agent) for its fetches alone, and the profile is the built-in one, as
// it is when the oracle does not pass.
func (r *runner) learnTooling(ctx context.Context, record bool) (*tooling.Profile, *hermetic.Recording, error) {
	t := r.o.Task
	oracle := t.Solution != ""
	if !oracle && !record {
		p, err := r.builtinTooling(ctx, "the task has no solution/solve.sh to learn from")
		return p, nil, err
	}
	if oracle {
		r.say("tooling: learning the verifier's tooling and fetches from the oracle")
	} else {
		r.say("tooling: recording the verifier's fetches on the pristine environment")
	}
	out, err := os.MkdirTemp(r.o.ScratchDir, "proctor-learn-")
	if err != nil {
		return nil, nil, fmt.Errorf("learning the tooling: %w", err)
	}
	defer os.RemoveAll(out)
	o := r.o
	// The oracle is trusted: it gets the operator's network for agents,
	// not the model gateways or their recordings.
	o.Agent, o.Solution, o.Out, o.ReplayOf, o.Progress, o.NoAudit = OracleAgent, true, out, nil, nil, true
	o.Net.Gateways, o.Net.Record, o.Net.Replay = nil, false, nil
	if !oracle {
		o.Agent, o.Solution = "true", false
	}
	sub := &runner{o: o, storage: r.storage, env: r.env, ws: r.ws, hostMasks: r.hostMasks, hostScan: r.hostScan, image: r.image,
		inputs: r.inputs, hashes: r.hashes, keys: r.keys, learn: &learning{noTrace: !oracle},
		v: &Verdict{Violations: []Violation{}, TimingsMS: map[string]int64{},
			Phases:        map[string]Phase{PhaseAgent: {LimitsHit: []sandbox.Limit{}}, PhaseGrader: {LimitsHit: []sandbox.Limit{}}},
			PassThreshold: t.Proctor.PassThreshold}}
	if err := sub.run(ctx); err != nil {
		return nil, nil, fmt.Errorf("learning the tooling from the oracle: %w", err)
	}
	sub.v.settle()
	if sub.learn.err != nil {
		return nil, nil, fmt.Errorf("learning the tooling from the oracle: %w", sub.learn.err)
	}
	rec := sub.learn.recording
	if rec == nil {
		// The grader never ran (a changeset over the limits): nothing was
		// fetched, and a trial's grader may fetch nothing.
		if rec, err = hermetic.EmptyRecording(); err != nil {
			return nil, nil, err
		}
	}
	var p *tooling.Profile
	switch {
	case !oracle:
		p, err = r.builtinTooling(ctx, "the task has no solution/solve.sh to learn from")
	case !sub.v.Passed || sub.learn.profile == nil:
		p, err = r.builtinTooling(ctx, fmt.Sprintf("the oracle did not pass (status %s, reward %g): nothing learned", sub.v.Status, sub.v.Reward))
	default:
		p = sub.learn.profile
	}
	return p, rec, err
}

// builtinTooling is the fallback profile: the runners' known search
// paths, with the environment's Python interpreters asked as the grader's
// "python3 -m pytest" in the working directory would be.
func (r *runner) builtinTooling(ctx context.Context, reason string) (*tooling.Profile, error) {
	t := r.o.Task
	s, err := r.newScratch("tooling")
	if err != nil {
		return nil, err
	}
	defer s.close()
	l, err := buildLayout(s, r.env, t.Environment.Workdir, r.ws, r.hostMasks)
	if err != nil {
		return nil, err
	}
	env := &layoutEnv{l: l}
	var qs []tooling.Query
	for _, exe := range []string{"/usr/local/bin/python3", "/usr/bin/python3"} {
		if k, _, _ := env.Lstat(exe); k != tooling.Absent {
			qs = append(qs, tooling.Query{Exe: exe, Cwd: t.Environment.Workdir, Path0: t.Environment.Workdir,
				Env: r.envList(t.Verifier.Env)})
		}
	}
	interps, err := r.askPython(ctx, l, qs)
	if err != nil {
		return nil, err
	}
	return tooling.Builtin(reason, env, r.codeRoots(), []string{TestsPath, t.Environment.Workdir}, interps)
}

// codeRoots are the directories of the code under test.
func (r *runner) codeRoots() []string {
	return []string{path.Clean(r.o.Task.Environment.Workdir)}
}

// learnFrom builds the profile once the traced grader has run on l (the
// pristine layers plus the oracle's permitted changes in cs).
func (r *runner) learnFrom(ctx context.Context, l *layout, cs *workspace.Changeset, keep map[string]bool) {
	lr := r.learn
	lr.mu.Lock()
	accesses := slices.Clone(lr.accesses)
	lr.mu.Unlock()
	env := &layoutEnv{l: l, changes: map[string]workspace.Entry{}}
	var changed []string
	for _, e := range cs.Entries {
		if keep[e.Path] {
			env.changes[e.Path] = e
			if k, _ := l.pristine(e.Path); !(e.Kind == workspace.KindDir && !e.Opaque && k == pristineDir) {
				changed = append(changed, e.Path)
			}
		}
	}
	qs, err := tooling.Queries(accesses, env)
	if err != nil {
		lr.err = err
		return
	}
	interps, err := r.askPython(ctx, l, qs)
	if err != nil {
		lr.err = err
		return
	}
	tests, err := testSources(r.o.Task.Tests)
	if err != nil {
		lr.err = err
		return
	}
	lr.profile, lr.err = tooling.Learn(tooling.Input{Accesses: accesses, Env: env, CodeRoots: r.codeRoots(),
		OracleChanged: changed, Harness: append(slices.Clone(harnessPaths), "/tmp/proctor"), Interpreters: interps,
		TestSources: tests})
}

// askPython runs the queries in a sandbox over l (its uppers as they are)
// and reads the answers. No query, no sandbox.
func (r *runner) askPython(ctx context.Context, l *layout, qs []tooling.Query) ([]tooling.Interpreter, error) {
	if len(qs) == 0 {
		return nil, nil
	}
	var out, errOut bytes.Buffer
	res, err := sandbox.Run(ctx, sandbox.Spec{
		Overlays: l.overlays(),
		Binds:    []sandbox.Bind{{Src: r.o.Task.Tests, Dst: TestsPath}},
		Masks:    l.masks,
		Workdir:  "/",
		Env:      r.envList(nil),
		Args:     []string{"/bin/sh", "-c", tooling.Script(qs)},
		Limits:   sandbox.Limits{Timeout: 2 * time.Minute, OutputBytes: 16 << 20, Pids: defaultPids},
		Stdout:   &out,
		Stderr:   &errOut,
		NoAttach: true,
	})
	if err != nil {
		return nil, fmt.Errorf("asking the grader's Python for its search path: %w", err)
	}
	interps, err := tooling.ParseAnswers(qs, out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("asking the grader's Python for its search path (exit %d): %w: %s", res.ExitCode, err, firstLine(errOut.String()))
	}
	return interps, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return fmt.Sprintf("%q", s)
}

// layoutEnv is a layout's pristine lowers, with a changeset's entries over
// them: the learning run's environment, as tooling.Env.
type layoutEnv struct {
	l       *layout
	changes map[string]workspace.Entry
}

func (e *layoutEnv) Lstat(p string) (tooling.Kind, string, error) {
	if c, ok := e.changes[p]; ok {
		switch c.Kind {
		case workspace.KindWhiteout:
			return tooling.Absent, "", nil
		case workspace.KindDir:
			return tooling.Dir, "", nil
		case workspace.KindSymlink:
			return tooling.Symlink, c.Link, nil
		default:
			return tooling.File, "", nil
		}
	}
	for q := path.Dir(p); q != "/"; q = path.Dir(q) {
		if c, ok := e.changes[q]; ok && (c.Kind == workspace.KindWhiteout || c.Opaque) {
			return tooling.Absent, "", nil
		}
	}
	k, link, err := e.l.lstatLower(p)
	switch {
	case err != nil:
		return tooling.Absent, "", err
	case k == pristineDir:
		return tooling.Dir, "", nil
	case link != "":
		return tooling.Symlink, link, nil
	case k == pristineAbsent:
		return tooling.Absent, "", nil
	}
	return tooling.File, "", nil
}

// Head reads the first bytes of a pristine file (a script's "#!" line).
func (e *layoutEnv) Head(p string) ([]byte, error) {
	return e.readLower(p, 256, false)
}

// Read reads a pristine file whole, up to max bytes (the sources of the
// tooling's modules, for what they import).
func (e *layoutEnv) Read(p string, max int) ([]byte, error) {
	return e.readLower(p, max, true)
}

// ReadDir lists a pristine directory (never through a symlink).
func (e *layoutEnv) ReadDir(p string) ([]string, error) {
	f, err := e.openLower(p, unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(100000)
}

// openLower opens p in the lower of its layer, read-only with flags,
// never through a symlink and never out of the layer.
func (e *layoutEnv) openLower(p string, flags uint64) (*os.File, error) {
	ly := e.l.layerFor(p)
	if ly == nil {
		return nil, os.ErrNotExist
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, ly.dst), "/")
	if rel == "" {
		rel = "."
	}
	dfd, err := unix.Open(ly.lower, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat2(dfd, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC | flags,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), p), nil
}

// Sum is the SHA-256 (hex) of a regular pristine file, read whole.
func (e *layoutEnv) Sum(p string) (string, error) {
	f, err := e.openLower(p, unix.O_NONBLOCK)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a regular file", p)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// readLower reads at most max bytes of a regular pristine file, never
// following a symlink (resolve first); whole asks for all of it, more
// than max being an error.
func (e *layoutEnv) readLower(p string, max int, whole bool) ([]byte, error) {
	f, err := e.openLower(p, unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", p)
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		if whole {
			return nil, fmt.Errorf("%s: more than %d bytes", p, max)
		}
		b = b[:max]
	}
	return b, nil
}

// testSources reads the tests' Python sources (the task's tests/, on the
// host: the harness's, trusted), by their path inside the grader.
func testSources(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	total := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(p, ".py") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if total += len(b); total > 64<<20 {
			return fmt.Errorf("the tests' Python sources are over 64 MiB")
		}
		rel, _ := filepath.Rel(dir, p)
		out[path.Join(TestsPath, filepath.ToSlash(rel))] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the tests' sources: %w", err)
	}
	return out, nil
}

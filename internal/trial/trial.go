package trial

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/proctor-sandbox/proctor/internal/answerscan"
	"github.com/proctor-sandbox/proctor/internal/audit"
	"github.com/proctor-sandbox/proctor/internal/grade"
	"github.com/proctor-sandbox/proctor/internal/hermetic"
	"github.com/proctor-sandbox/proctor/internal/image"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/seccomp"
	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/tooling"
	"github.com/proctor-sandbox/proctor/internal/workspace"
	"github.com/proctor-sandbox/proctor/internal/workspace/gitbase"
)

// Files a trial writes under its output directory.
const (
	VerdictFile   = "verdict.json"
	AgentLog      = "agent.log"
	GraderLog     = "grader.log"
	ChangesetFile = "changeset.tar"
	AuditFile     = "audit.jsonl" // the timeline, written as it grows
)

// Phase names, the keys of Verdict.Phases.
const (
	PhaseAgent  = "agent"
	PhaseGrader = "grader"
)

// DefaultLogCap is how much of each phase's output is kept.
const DefaultLogCap = 8 << 20

// defaultPids bounds the processes of each phase.
const defaultPids = 4096

// Options configure one trial. Task and Agent are required.
type Options struct {
	Task  *task.Task
	Agent string // shell command, run with /bin/sh -c in the workdir
	// Nonce is the caller's, recorded in the verdict: a coordinator binds
	// a bundle to its trial with it.
	Nonce    string
	AgentDir string // host directory mounted read-only at /agent, or ""
	// AgentLayer is an installed agent mounted read-only at
	// recipe.LayerPath, or nil.
	AgentLayer *AgentLayer
	// Solution mounts the task's solution directory at /solution in the
	// agent sandbox: only for the oracle (proctor validate).
	Solution bool
	Out      string // output directory: created, or empty
	CacheDir string // where prepared workspaces are kept
	// ScratchDir is where each sandbox's filesystem image and mount point
	// go: a directory on a disk ("" = the temp dir when it is on a disk,
	// else /var/tmp).
	ScratchDir string
	// Storage is where the sandboxes' writable layers live: StorageDisk
	// ("" too: a filesystem image of the task's storage_mb per sandbox)
	// or StorageMemory (a tmpfs, asked for by name and recorded in the
	// verdict).
	Storage string
	LogCap  int64 // per phase; DefaultLogCap when 0
	// Key signs the trial's bundle (OUT/bundle.json). Required by Run.
	Key      ed25519.PrivateKey
	Limits   workspace.Limits
	Progress io.Writer // one line per step; nil for none
	// Net adds to the task's network: allowed hosts, model gateways.
	Net NetOptions
	// Build is how a task's environment/Dockerfile is built.
	Build BuildOptions
	// NoAudit runs the agent phase without recording its attempts on
	// hidden paths and its connects (the verdict says "off"). Hiding and
	// the network cut do not depend on it.
	NoAudit bool
	// ReplayOf, with Net.Replay, describes the recorded trial being
	// replayed (its recording's digest and calls, its changeset digest):
	// the verdict's replay section starts from it.
	ReplayOf *ReplayRef
	// Frozen are a recorded trial's tooling profile and recording of the
	// verifier's fetches, for a replay that must grade as it graded: used
	// as the bundle has them (their digests checked), never learned again.
	Frozen *Frozen
	// CPUSet gives the trial's sandboxes CPUs of their own ("1", "0-1"),
	// so that concurrent trials do not take each other's; "" shares them
	// (named in the verdict's pinned.unpinned).
	CPUSet string
}

// Run runs one trial: prepare, agent phase, freeze, grade, verdict. It
// returns the verdict it wrote to Out. An error with a nil verdict means
// nothing was run (bad options, an output directory in use); an error with a
// verdict means the trial stopped in error, and the verdict says where.
func Run(ctx context.Context, o Options) (*Verdict, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	t := o.Task
	v := &Verdict{
		Schema:        Schema,
		Task:          TaskRef{Name: t.Name},
		Agent:         AgentRef{Command: o.Agent, Layer: o.AgentLayer.ref()},
		Nonce:         o.Nonce,
		PassThreshold: t.Proctor.PassThreshold,
		Grading:       t.Proctor.Grading,
		Violations:    []Violation{},
		Phases:        map[string]Phase{PhaseAgent: {LimitsHit: []sandbox.Limit{}}, PhaseGrader: {LimitsHit: []sandbox.Limit{}}},
		Workspace:     WorkspaceRef{Workdir: t.Environment.Workdir},
		Environment:   EnvironmentRef{Rootfs: t.Proctor.Rootfs},
		Changeset:     ChangesetRef{Dropped: []workspace.Dropped{}, LeftOut: []workspace.Dropped{}},
		Artifacts:     []string{},
		TimingsMS:     map[string]int64{},
		Network:       NetworkRef{Mode: task.NetworkNone, Requested: task.NetworkNone, AllowedHosts: []string{}},
		Audit:         AuditRef{Hidden: "off", Network: "off", Counts: map[string]int{}, LeftOut: map[string]int{}},
	}
	storage, err := storageFor(o.Storage, os.Geteuid() == 0, t.Environment.StorageMB)
	if err != nil {
		return nil, err
	}
	v.Storage = storage
	r := &runner{o: o, v: v, storage: storage}
	keys, err := checkNet(&o)
	if err != nil {
		return nil, err
	}
	r.keys = keys
	// A task that cannot be prepared (a git_base that does not resolve, say)
	// is bad input: an error before anything runs or is written.
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	// Every check of the task's form, its digest included, before anything
	// runs: no trial runs an agent and then fails on the task's form.
	if err := r.checkInputs(); err != nil {
		return nil, err
	}
	v.Pinned = r.pinned()
	if o.Net.Replay != nil {
		v.Replay = &ReplayRef{}
		if o.ReplayOf != nil {
			*v.Replay = *o.ReplayOf
		}
	}
	if err := makeOut(o.Out); err != nil {
		return nil, err
	}
	if r.audit, err = audit.New(filepath.Join(o.Out, AuditFile), audit.Limits{}); err != nil {
		return nil, err
	}
	defer r.audit.Close()
	r.event("trial.start", detail("task", t.Name, "agent", o.Agent, "grading", t.Proctor.Grading))
	err = r.beside(func() error {
		if err := r.loadFrozen(ctx, o.Frozen); err != nil {
			return err
		}
		return r.run(ctx)
	})
	v.settle()
	r.audit.Seal()
	v.Audit.Events, v.Audit.Counts, v.Audit.LeftOut = r.audit.Len()+1, r.audit.Counts(), r.audit.LeftOut()
	if v.Replay != nil {
		v.Replay.Identical = v.Changeset.Digest != "" && v.Changeset.Digest == v.Replay.RecordedChangeset
	}
	for _, a := range []string{AgentLog, ChangesetFile, GraderLog, AuditFile, RecordingFile, TrajectoryFile, ToolingFile} {
		if _, serr := os.Stat(filepath.Join(o.Out, a)); serr == nil {
			v.Artifacts = append(v.Artifacts, a)
		}
	}
	r.event("verdict", detail("status", v.Status, "passed", v.Passed, "reward", v.Reward, "violations", len(v.Violations)))
	if werr := v.write(o.Out); werr != nil && err == nil {
		err = werr
	}
	if serr := r.seal(o.Key); serr != nil && err == nil {
		err = serr
	}
	return v, err
}

func (o *Options) check() error {
	if o.Task == nil {
		return errors.New("no task")
	}
	if strings.TrimSpace(o.Agent) == "" {
		return errors.New("--agent: empty command")
	}
	if err := checkCPUSet(o.CPUSet); err != nil {
		return fmt.Errorf("--%w", err)
	}
	if os.Geteuid() != 0 {
		return errors.New("proctor run needs root: its copy-on-write layers are idmapped mounts")
	}
	if _, err := storageFor(o.Storage, true, 0); err != nil {
		return err
	}
	if o.AgentDir != "" {
		abs, err := filepath.Abs(o.AgentDir)
		if err != nil {
			return fmt.Errorf("--agent-dir: %w", err)
		}
		o.AgentDir = abs
		fi, err := os.Stat(o.AgentDir)
		if err != nil {
			return fmt.Errorf("--agent-dir: %w", err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("--agent-dir %s: not a directory", o.AgentDir)
		}
	}
	if o.AgentLayer != nil {
		if err := o.AgentLayer.check(); err != nil {
			return err
		}
	}
	if len(o.Key) != ed25519.PrivateKeySize {
		return errors.New("no signing key")
	}
	if o.Solution && o.Task.Solution == "" {
		return fmt.Errorf("%s: no solution/solve.sh", o.Task.Dir)
	}
	if o.Out == "" {
		return errors.New("--out: not set")
	}
	if des, err := os.ReadDir(o.Out); err == nil && len(des) > 0 {
		return fmt.Errorf("--out %s: not empty (a trial never overwrites another's results)", o.Out)
	}
	if o.LogCap == 0 {
		o.LogCap = DefaultLogCap
	}
	if o.Limits == (workspace.Limits{}) {
		o.Limits = workspace.DefaultLimits()
	}
	return nil
}

// beside runs work with the host environment's digest taken beside it, and
// the recheck of the task's inputs beside whatever follows the agent phase
// (work starts it with startRecheck), and records the first error of any
// in the verdict (and returns it), with the timings.
func (r *runner) beside(work func() error) error {
	start := time.Now()
	digested := make(chan error, 1)
	go func() { digested <- r.digestHost() }()
	err := work()
	if r.rechecked == nil {
		r.startRecheck()
	}
	if derr := <-r.rechecked; derr != nil && err == nil {
		err = derr
	}
	if derr := <-digested; derr != nil && err == nil {
		err = derr
	}
	r.v.TimingsMS["digest"] = r.digestMS
	r.v.TimingsMS["recheck"] = r.recheckMS
	r.v.TimingsMS["total"] = time.Since(start).Milliseconds() + r.v.TimingsMS["prepare"] + r.v.TimingsMS["inputs"]
	if err != nil {
		r.v.Error = err.Error()
	}
	return err
}

// startRecheck digests the task's inputs again, in the background: they
// must be as they were when the trial started. Started once the agent
// phase is over, it covers every moment the agent ran.
func (r *runner) startRecheck() {
	r.rechecked = make(chan error, 1)
	if r.learn != nil {
		r.rechecked <- nil // the trial that asked for the learning rechecks
		return
	}
	go func() { r.rechecked <- r.recheck() }()
}

func makeOut(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	des, err := os.ReadDir(out)
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	if len(des) > 0 {
		return fmt.Errorf("--out %s: not empty (a trial never overwrites another's results)", out)
	}
	return nil
}

// runner carries one trial through its phases.
type runner struct {
	o        Options
	v        *Verdict
	env      environment
	ws       string // the workspace's lower directory, or ""
	digestMS int64  // set by digestHost, read after it is done
	// rechecked delivers recheck's result; recheckMS is its time.
	rechecked chan error
	recheckMS int64
	audit     *audit.Log        // the trial's timeline; nil in a regrade
	keys      map[string]string // the gateways' real keys, by gateway name
	// hostMasks are a "host" environment's unreadable files and
	// directories (hostscan.go).
	hostMasks []string
	hostScan  *hostScan       // the host scan, for the environment digest
	image     *image.Image    // the environment's image, for an image task
	inputs    *inputs         // the digests checkInputs took before anything ran
	hashes    *task.HashCache // the file hashes it used, for the recheck
	// tooling is the verifier's tooling the policy keeps the agent out of.
	tooling *tooling.Profile
	// storage is where the sandboxes' writable layers live.
	storage *StorageRef
	// learn is set in the oracle run that learns it (tooling.go).
	learn *learning
	// recording is what the pristine verifier fetched: the trial's
	// grader gets it replayed, and nothing else (hermetic.go).
	recording *hermetic.Recording
	// answers searches what the agent brought for the task's hidden
	// answers; answersSeen of its hits are violations already
	// (smuggle.go). Nil for the oracle.
	answers     *answerscan.Scan
	answersSeen int
}

func (r *runner) say(format string, args ...any) {
	if r.o.Progress != nil {
		fmt.Fprintf(r.o.Progress, "proctor: "+format+"\n", args...)
	}
}

func (r *runner) run(ctx context.Context) error {
	t := r.o.Task

	// A trial killed before it could unmount its scratch space leaves it
	// behind: take it away now.
	if err := cleanStaleScratch(r.o.ScratchDir); err != nil {
		return err
	}

	if err := r.searchAnswers(); err != nil {
		return err
	}

	// Agent phase.
	layoutStart := time.Now()
	agentScratch, err := r.newScratch("agent")
	if err != nil {
		return err
	}
	defer func() { agentScratch.close() }() // nil once closed below
	agentLayout, err := buildLayout(agentScratch, r.env, t.Environment.Workdir, r.ws, r.hostMasks)
	if err != nil {
		return err
	}
	r.v.TimingsMS["layout"] = time.Since(layoutStart).Milliseconds()
	err = r.agentPhase(ctx, agentLayout, agentScratch)
	r.startRecheck()
	r.collectAgentLogs(agentScratch)
	if err != nil {
		return err
	}
	if r.learn == nil {
		if err := r.collectArtifacts(ctx, agentLayout, agentScratch); err != nil {
			return err
		}
	}

	// Freeze: the agent's tree is dead (sandbox.Run returns only then); its
	// upper layers become the changeset.
	archivePath := filepath.Join(r.o.Out, ChangesetFile)
	freezeStart := time.Now()
	cs, err := r.freeze(agentLayout, archivePath)
	var le *workspace.LimitError
	if errors.As(err, &le) {
		// Too much to read, let alone grade: the trial ends in limit.
		r.v.Changeset.Limit = err.Error()
		r.event("freeze.limit", detail("limit", err.Error()))
		return nil
	}
	if err != nil {
		return err
	}
	if err := agentScratch.close(); err != nil {
		return err
	}
	agentScratch = nil
	r.v.TimingsMS["freeze"] = time.Since(freezeStart).Milliseconds()

	// Grading, in a sandbox made afresh.
	return r.gradePhase(ctx, archivePath, cs)
}

// judge applies the task's policy to the changeset, with l's lowers as the
// pristine environment, and records what it decided.
func (r *runner) judge(l *layout, cs *workspace.Changeset, archivePath string) (map[string]bool, error) {
	t := r.o.Task
	view := &layoutEnv{l: l, changes: make(map[string]workspace.Entry, len(cs.Entries))}
	for _, e := range cs.Entries {
		view.changes[e.Path] = e
	}
	pol := &policy{grading: t.Proctor.Grading, workdir: t.Environment.Workdir,
		protected: t.Proctor.Protected, pristine: l.pristine, pristineDescendants: l.pristineDescendants, tooling: r.tooling,
		content: func(p string) ([]byte, error) { return archiveFile(archivePath, cs, p, 4<<20) },
		pristineSum: func(p string) (string, error) {
			pv := &layoutEnv{l: l}
			final, err := tooling.Resolve(pv, p)
			if err != nil {
				return "", err
			}
			return pv.Sum(final)
		},
		pristineContent: func(p string) ([]byte, error) {
			pv := &layoutEnv{l: l}
			final, err := tooling.Resolve(pv, p)
			if err != nil {
				return nil, err
			}
			return pv.Read(final, 4<<20)
		},
		resolve: func(p string) (string, error) { return tooling.Resolve(view, p) }}
	judged, err := pol.judge(cs.Entries)
	if err != nil {
		return nil, err
	}
	r.v.Violations = append(r.v.Violations, judged.violations...)
	r.v.Changeset.Permitted = len(judged.keep)
	r.v.Changeset.LeftOut = judged.leftOut
	if r.v.Changeset.LeftOut == nil {
		r.v.Changeset.LeftOut = []workspace.Dropped{}
	}
	for _, vi := range judged.violations {
		r.event("violation", detail("kind", vi.Kind, "path", vi.Path, "detail", vi.Detail))
		// Paths are the agent's: quoted, so no byte of them reaches a
		// terminal raw.
		r.say("violation: %s %q: %q", vi.Kind, vi.Path, vi.Detail)
	}
	return judged.keep, nil
}

// prepare resolves the environment and the workspace and records digests.
func (r *runner) prepare(ctx context.Context) error {
	t := r.o.Task
	r.say("preparing %s", t.Name)
	start := time.Now()
	r.env = environment{rootfs: t.Proctor.Rootfs}
	if t.Proctor.Rootfs == task.RootfsImage {
		if err := r.resolveImage(ctx); err != nil {
			return err
		}
	}
	if t.Proctor.Workspace != "" {
		r.ws = t.Proctor.Workspace
		if t.Proctor.GitBase != "" {
			dir, commit, err := gitbase.Prepare(ctx, t.Proctor.Workspace, t.Proctor.GitBase, filepath.Join(r.o.CacheDir, "workspaces"))
			if err != nil {
				return fmt.Errorf("%s: [proctor].git_base: %w", filepath.Join(t.Dir, "task.toml"), err)
			}
			r.ws, r.v.Workspace.Commit = dir, commit
		}
	}
	r.v.TimingsMS["prepare"] = time.Since(start).Milliseconds()
	if r.env.rootfs == sandbox.RootfsHost {
		scanStart := time.Now()
		var dirs []string
		for _, d := range sandbox.HostDirs {
			if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
				dirs = append(dirs, d)
			}
		}
		scan, masks, err := scanHost(dirs, filepath.Join(r.o.CacheDir, "hostscan"))
		if err != nil {
			return err
		}
		r.hostMasks, r.hostScan = masks, scan
		r.v.TimingsMS["host_scan"] = time.Since(scanStart).Milliseconds()
	}
	return nil
}

// recheck walks the task's inputs again: a task edited while its trial
// runs is an error, not a verdict on a tree nobody ran.
func (r *runner) recheck() error {
	start := time.Now()
	defer func() { r.recheckMS = time.Since(start).Milliseconds() }()
	again, err := digestInputs(r.o.Task, r.o.AgentDir, r.hashes)
	if err != nil {
		return fmt.Errorf("the task changed while its trial ran: %w", err)
	}
	return r.inputs.same(again)
}

// digestHost takes, beside the agent phase, the digest of a "host"
// environment (the first time it reads all of /usr). Nothing the agent
// does can change it (the host's directories are read-only lower layers);
// the verdict waits for it.
func (r *runner) digestHost() error {
	start := time.Now()
	defer func() { r.digestMS = time.Since(start).Milliseconds() }()
	if r.o.Task.Proctor.Rootfs != sandbox.RootfsHost {
		return nil
	}
	missing := 0
	for _, e := range r.hostScan.now {
		if len(e.Own) == 0 {
			missing++
		}
	}
	if missing > 1000 {
		r.say("digesting the host environment: %d directories to read (the first time reads all of /usr; later trials reuse it)", missing)
	}
	var err error
	r.v.Environment.Digest, err = hostDigest(r.hostScan, sandbox.HostDirs,
		filepath.Join(r.o.CacheDir, "hashes-host"), filepath.Join(r.o.CacheDir, "hostscan"))
	if err != nil {
		return fmt.Errorf("digesting the environment: %w", err)
	}
	return nil
}

// envMap is envList's map before the harness's own values.
func (r *runner) envMap(extra map[string]string) map[string]string {
	m := maps.Clone(PinnedDefaults)
	maps.Copy(m, r.imageEnv())
	maps.Copy(m, r.o.Task.Environment.Env)
	maps.Copy(m, extra)
	maps.Copy(m, r.o.Task.Proctor.PinnedEnv)
	return m
}

func (r *runner) limits(timeout time.Duration) sandbox.Limits {
	e := r.o.Task.Environment
	return sandbox.Limits{
		MemoryBytes: e.MemoryMB << 20,
		CPUs:        e.CPUs,
		Pids:        defaultPids,
		Timeout:     timeout,
	}
}

// envList is the environment of a phase: the pinned defaults, the
// image's, the task's, then extra's, the task's pinned_env, then more's
// (K=V), each overriding the ones before, sorted by name. The harness's own
// values (more) thus always win: a task cannot put a real key where the
// gateway's dummy goes.
func (r *runner) envList(extra map[string]string, more ...string) []string {
	m := r.envMap(extra)
	for _, kv := range more {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	kv := make([]string, 0, len(m))
	for k, v := range m {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	return kv
}

// agentEnv is what the agent's phase adds to the environment: the task's
// [solution.env] when the solution is the agent, as Harbor gives solve.sh.
func (r *runner) agentEnv() map[string]string {
	if r.o.Solution {
		return r.o.Task.SolutionEnv
	}
	return nil
}

func (r *runner) agentPhase(ctx context.Context, l *layout, s *scratch) error {
	t := r.o.Task
	// The instruction is bound from a copy on the scratch space: the
	// sandbox's mount table shows a bind's source path, and the task's
	// own path says more than the agent needs to know.
	instruction := filepath.Join(s.dir, "instruction.md")
	if err := copyFile(t.Instruction, instruction); err != nil {
		return fmt.Errorf("copying the instruction: %w", err)
	}
	binds := []sandbox.Bind{{Src: instruction, Dst: InstructionPath}}
	if r.o.AgentDir != "" {
		binds = append(binds, sandbox.Bind{Src: r.o.AgentDir, Dst: AgentDirPath})
	}
	binds = append(binds, r.layerBind()...)
	if r.o.Solution {
		binds = append(binds, sandbox.Bind{Src: filepath.Dir(t.Solution), Dst: SolutionPath})
	}
	log, err := newCappedFile(filepath.Join(r.o.Out, AgentLog), r.o.LogCap)
	if err != nil {
		return err
	}
	defer log.Close()
	actx, stopAgent := context.WithCancel(ctx)
	defer stopAgent()
	if tp := r.o.Net.Replay; tp != nil {
		// The first call the recording does not hold ends the replay:
		// the agent is stopped at once (the gateway answers it 409). Set
		// before the gateways exist, as the tape asks.
		tp.OnDiverge = func(error) { stopAgent() }
	}
	n, err := r.startNet()
	if err != nil {
		return err
	}
	defer n.stop()
	tmp, err := s.tmpTree()
	if err != nil {
		return err
	}
	defer tmp.Mount.Close()
	spec := sandbox.Spec{
		Trees:    []sandbox.Tree{tmp},
		Overlays: l.overlays(),
		Binds:    binds,
		Masks:    l.masks,
		Workdir:  t.Environment.Workdir,
		Env:      r.envList(r.agentEnv(), append([]string{"PROCTOR_INSTRUCTION=" + InstructionPath}, n.env...)...),
		Args:     []string{"/bin/sh", "-c", r.o.Agent},
		Limits:   r.limits(t.Agent.Timeout),
		Pin:      r.pin(),
		Stdout:   log,
		Stderr:   log,
		Listen:   n.listen,
		Serve:    n.serveAll,
	}
	var tr *traps
	if !r.o.NoAudit {
		if tr, err = r.startTraps(l); err != nil {
			return err
		}
		defer tr.close()
		spec.Trees = append(spec.Trees, tr.trees...)
		for _, d := range tr.dirs {
			ly := l.layerFor(d)
			ly.hide = append(ly.hide, d) // the trap's mount point is not the agent's change
		}
		spec.WatchNet = r.netAttempt(n)
		r.v.Audit.Hidden, r.v.Audit.Network = "trap", "seccomp-notify"
	}
	r.say("agent phase: %s", r.o.Agent)
	r.event("agent.start", detail("command", r.o.Agent, "workdir", t.Environment.Workdir,
		"network", n.net.Mode, "listen", n.listen))
	res, err := sandbox.Run(actx, spec)
	// Every server has recorded its last request before the verdict is
	// written: the tree is dead, nothing can reach them any more.
	if serr := n.stop(); serr != nil && err == nil {
		err = fmt.Errorf("stopping the agent's network: %w", serr)
	}
	if tp := r.o.Net.Replay; tp != nil && tp.Err() != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) {
		err = nil // stopped for the divergence, which replayDone reports
	}
	if err == nil {
		err = r.saveRecording(n)
	}
	if err == nil {
		err = r.replayDone()
	}
	if err == nil {
		err = r.saveTrajectory(n)
	}
	if cerr := tr.close(); cerr != nil && err == nil {
		err = fmt.Errorf("stopping the audit trap: %w", cerr)
	}
	r.audit.Lost("hidden.unrecorded", tr.dropped())
	n.mu.Lock()
	r.v.Network = n.net
	r.v.OpenNetwork = n.net.Mode == NetworkOpen
	n.mu.Unlock()
	r.v.Models = n.models(r.o.Net.Gateways)
	r.answersDone()
	if res != nil {
		r.v.Phases[PhaseAgent] = phaseOf(res, log)
		if serr := r.noteStorage(PhaseAgent, s); serr != nil && err == nil {
			err = serr
		}
		r.notePinned(PhaseAgent, res)
		r.event("agent.end", phaseDetail(res))
		r.say("agent phase: exit %d in %d ms%s", res.ExitCode, res.WallMS, limitNote(res))
	}
	if err != nil {
		return fmt.Errorf("agent phase: %w", err)
	}
	return nil
}

func phaseDetail(res *sandbox.Result) map[string]any {
	return detail("exit_code", res.ExitCode, "signal", res.Signal, "wall_ms", res.WallMS,
		"timed_out", res.TimedOut, "limit", string(res.Limit))
}

func limitNote(res *sandbox.Result) string {
	if res.Limit == sandbox.LimitNone {
		return ""
	}
	return ", limit hit: " + string(res.Limit)
}

// freeze reads the agent's upper layers into the changeset archive.
func (r *runner) freeze(l *layout, archivePath string) (*workspace.Changeset, error) {
	f, err := os.OpenFile(archivePath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("writing the changeset: %w", err)
	}
	cs, err := workspace.Extract(l.workspaceLayers(), r.o.Limits, f)
	if cerr := f.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if err != nil {
		var le *workspace.LimitError
		if errors.As(err, &le) {
			// The limit that ended the trial, unless one that
			// constrained the agent came first (a full disk).
			p := r.v.Phases[PhaseAgent]
			hit := sandbox.Limit("changeset-" + le.What)
			if p.Limit == sandbox.LimitNone {
				p.Limit = hit
			}
			p.LimitsHit = append(p.LimitsHit, hit)
			r.v.Phases[PhaseAgent] = p
		}
		os.Remove(archivePath)
		return nil, fmt.Errorf("reading the agent's changes: %w", err)
	}
	r.v.Changeset = ChangesetRef{Digest: cs.Digest, Files: cs.Files, Bytes: cs.Bytes,
		Entries: len(cs.Entries), Dropped: cs.Dropped, LeftOut: []workspace.Dropped{}, Archive: ChangesetFile}
	if r.v.Changeset.Dropped == nil {
		r.v.Changeset.Dropped = []workspace.Dropped{}
	}
	r.event("freeze", detail("digest", cs.Digest, "entries", len(cs.Entries), "files", cs.Files, "bytes", cs.Bytes, "dropped", len(cs.Dropped)))
	r.say("changeset: %d entries, %d files, %d bytes, %s", len(cs.Entries), cs.Files, cs.Bytes, cs.Digest)
	return cs, nil
}

// gradePhase judges the changeset and runs the task's tests in a fresh
// sandbox: the pristine layers (whose lowers the policy looks things up
// in), plus the permitted changes, the tests read-only, an empty results
// dir.
func (r *runner) gradePhase(ctx context.Context, archivePath string, cs *workspace.Changeset) error {
	t := r.o.Task
	s, err := r.newScratch("grader")
	if err != nil {
		return err
	}
	defer s.close()
	l, err := buildLayout(s, r.env, t.Environment.Workdir, r.ws, r.hostMasks)
	if err != nil {
		return err
	}
	keep, err := r.judge(l, cs, archivePath)
	if err != nil {
		return err
	}
	if err := applyArchive(archivePath, cs, l, keep); err != nil {
		return err
	}
	results := filepath.Join(s.dir, "verifier")
	if err := os.Mkdir(results, 0o755); err != nil {
		return fmt.Errorf("creating the verifier's results dir: %w", err)
	}
	if err := os.Chown(results, sandbox.RootID(), sandbox.RootID()); err != nil {
		return fmt.Errorf("creating the verifier's results dir: %w", err)
	}
	tw, twBinds, twEnv, err := r.graderResultsSetup(s)
	if err != nil {
		return err
	}
	log, err := newCappedFile(filepath.Join(r.o.Out, GraderLog), r.o.LogCap)
	if err != nil {
		return err
	}
	defer log.Close()
	tmp, err := s.tmpTree()
	if err != nil {
		return err
	}
	defer tmp.Mount.Close()
	r.say("grading")
	r.event("grader.start", detail("permitted", len(keep)))
	var watch func(seccomp.FileAccess)
	if r.learn != nil && !r.learn.noTrace {
		watch = r.learn.record
	}
	gn, err := r.startGraderNet(l, s)
	if err != nil {
		return err
	}
	spec := sandbox.Spec{
		WatchFiles: watch,
		Trees:      []sandbox.Tree{tmp},
		Overlays:   l.overlays(),
		Binds: append([]sandbox.Bind{
			{Src: t.Tests, Dst: TestsPath},
			{Src: results, Dst: VerifierLogs, Writable: true},
		}, twBinds...),
		Masks:   l.masks,
		Workdir: t.Environment.Workdir,
		Env:     r.envList(t.Verifier.Env, twEnv...),
		Args:    []string{"/bin/sh", "-c", graderCommand},
		Limits:  r.limits(t.Verifier.Timeout),
		Pin:     r.pin(),
		Stdout:  log,
		Stderr:  log,
		// The tests run the agent's code: it must not trace the verifier
		// or read and write its memory.
		NoAttach: true,
	}
	if gn != nil {
		// The grader's only network: the recorder (learning) or the replay
		// of what the pristine verifier fetched (a trial).
		spec.Binds = append(spec.Binds, gn.binds...)
		spec.Env = r.envList(t.Verifier.Env, append(slices.Clone(twEnv), gn.env...)...)
		spec.Listen, spec.Serve = []string{ProxyAddr}, gn.serve
	}
	res, err := sandbox.Run(ctx, spec)
	if ferr := r.finishGraderNet(gn); ferr != nil && err == nil {
		err = ferr
	}
	if res != nil {
		r.v.Phases[PhaseGrader] = phaseOf(res, log)
		if serr := r.noteStorage(PhaseGrader, s); serr != nil && err == nil {
			err = serr
		}
		r.notePinned(PhaseGrader, res)
		r.event("grader.end", phaseDetail(res))
		r.say("grader: exit %d in %d ms%s", res.ExitCode, res.WallMS, limitNote(res))
	}
	if err != nil {
		return fmt.Errorf("grader phase: %w", err)
	}
	if r.learn != nil && !r.learn.noTrace {
		r.learnFrom(ctx, l, cs, keep)
	}
	switch {
	case res.TimedOut, res.Limit != sandbox.LimitNone && res.Signal != 0:
		return nil // settle: timeout or limit, and the reward is not read
	case res.Signal != 0:
		// The verifier did not end by itself: the code it ran (the
		// agent's) may have killed it after writing a reward of its own.
		return fmt.Errorf("grader: the verifier was killed by signal %d before it finished: no reward is trusted", res.Signal)
	}
	if tw != nil {
		return r.judgeResults(results, tw, res.ExitCode)
	}
	r.readInformationalCTRF(results)
	rw, err := grade.ReadReward(results)
	if err != nil {
		return fmt.Errorf("grader: %w", err)
	}
	r.v.Reward = rw.Value
	r.event("reward", detail("value", rw.Value, "file", rw.File))
	r.say("reward %g (from %s)", rw.Value, rw.File)
	return nil
}

// graderCommand runs the task's test script as Harbor does: with bash, or
// sh where the environment has no bash.
const graderCommand = `if command -v bash >/dev/null 2>&1; then exec bash ` + TestsPath + `/test.sh; fi; exec sh ` + TestsPath + `/test.sh`

// applyArchive writes the permitted entries of the archive into the uppers of
// l; Apply checks the archive is still the one the agent phase produced.

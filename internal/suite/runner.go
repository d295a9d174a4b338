package suite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/proctor-sandbox/proctor/internal/cgroup"
	"github.com/proctor-sandbox/proctor/internal/store"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

// RunFlags are the `proctor run` flags every trial of a suite gets, kept in
// the store so that a resumed suite runs its trials as it began them.
type RunFlags struct {
	AgentDir   string   `json:"agent_dir,omitempty"`
	Key        string   `json:"key"` // absolute path of the signing key
	CacheDir   string   `json:"cache_dir,omitempty"`
	ScratchDir string   `json:"scratch_dir,omitempty"`
	Storage    string   `json:"storage,omitempty"` // run --storage
	AllowHosts []string `json:"allow_hosts,omitempty"`
	Gateways   []string `json:"model_gateways,omitempty"`
	Config     string   `json:"config,omitempty"`
	NoAudit    bool     `json:"no_audit,omitempty"`
	Internet   bool     `json:"internet,omitempty"` // open egress for tasks that ask for the internet
	HostMap    []string `json:"host_map,omitempty"`
	// VerifierHosts and CAFiles are the grader's allow-list and upstream
	// roots while a task's verifier fetches are recorded (CAFiles are
	// paths on the machine that runs the trial).
	VerifierHosts []string `json:"verifier_allow_hosts,omitempty"`
	CAFiles       []string `json:"ca_files,omitempty"`
	Jobs          int      `json:"jobs"`
	MaxMemoryMB   int64    `json:"max_memory_mb"` // the largest task memory limit
	MaxCPUs       float64  `json:"max_cpus"`
	// A suite run on a cluster: its name there, and the worker keys whose
	// bundles count (public key file lines). The workers sign the bundles;
	// Key is then the coordinator's, which signs the trial messages.
	Suite string   `json:"cluster_suite,omitempty"`
	Trust []string `json:"trust,omitempty"`
	// AgentDirDigest is AgentDir's Merkle digest when a cluster suite was
	// planned: its trials all run that agent dir, or none does.
	AgentDirDigest string `json:"agent_dir_digest,omitempty"`
}

// args returns the run flags as `proctor run` arguments.
func (f *RunFlags) args() []string {
	a := runArgs(f.Key, f.AgentDir, f.CacheDir, f.ScratchDir, f.Storage, f.AllowHosts, f.Gateways, f.HostMap, f.NoAudit, f.Internet)
	a = append(a, verifierArgs(f.VerifierHosts, f.CAFiles)...)
	if f.Config != "" {
		a = append(a, "--config", f.Config)
	}
	return a
}

// runArgs are the `proctor run` arguments for these settings ("" and nil
// for those not set).
func runArgs(key, agentDir, cacheDir, scratchDir, storage string, hosts, gateways, hostMap []string, noAudit, internet bool) []string {
	a := []string{"--key", key, "-q"}
	for _, o := range [][2]string{{"--agent-dir", agentDir}, {"--cache-dir", cacheDir}, {"--scratch-dir", scratchDir}, {"--storage", storage}} {
		if o[1] != "" {
			a = append(a, o[0], o[1])
		}
	}
	for _, h := range hosts {
		a = append(a, "--allow-host", h)
	}
	for _, g := range gateways {
		a = append(a, "--model-gateway", g)
	}
	for _, m := range hostMap {
		a = append(a, "--host-map", m)
	}
	if noAudit {
		a = append(a, "--no-audit")
	}
	if internet {
		a = append(a, "--internet")
	}
	return a
}

// verifierArgs are the `proctor run` arguments of the verifier's network.
func verifierArgs(hosts, caFiles []string) []string {
	var a []string
	for _, h := range hosts {
		a = append(a, "--verifier-allow-host", h)
	}
	for _, f := range caFiles {
		a = append(a, "--ca-file", f)
	}
	return a
}

// suiteMaps indexes a suite's tasks and agents by name.
func suiteMaps(su *store.Suite) (map[string]store.Task, map[string]store.Agent) {
	tasks := map[string]store.Task{}
	for _, t := range su.Tasks {
		tasks[t.Name] = t
	}
	agents := map[string]store.Agent{}
	for _, a := range su.Agents {
		agents[a.Name] = a
	}
	return tasks, agents
}

// Runner runs a suite's pending trials. Exe is the proctor binary the
// trials run as (os.Executable by default); Log gets one line per trial
// finished and Progress, when set, a live status line instead.
type Runner struct {
	Dir      string
	Store    *store.Store
	Flags    RunFlags
	Exe      string
	Log      io.Writer
	Terminal bool // Log is a terminal: one status line, redrawn
}

// TrialDir is where trial t's output goes, relative to the suite directory.
func TrialDir(t *store.Trial) string {
	return filepath.Join("trials", safeName(t.Agent), safeName(t.Task), strconv.Itoa(t.Index))
}

// safeName keeps a name usable as one path element.
func safeName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == '\\' {
			return '_'
		}
		return r
	}, s)
	if s == "" || s == "." || s == ".." {
		s = "_" + s
	}
	return s
}

// Run runs every pending trial, Flags.Jobs at a time, until none is left
// or ctx ends. On ctx's end it kills the trials running, puts them back in
// the queue, and returns ctx's error: the store is then ready for Resume.
func (r *Runner) Run(ctx context.Context) error {
	if r.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		r.Exe = exe
	}
	su, err := r.Store.Suite()
	if err != nil {
		return err
	}
	tasks, agents := suiteMaps(su)
	p := newProgress(r.Store, su, r.Log, r.Terminal)
	defer p.close()

	jobs := max(r.Flags.Jobs, 1)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		firstEr error
	)
	// One slot per job; with no more jobs than CPUs, each slot has CPUs of
	// its own, which its trials are pinned to.
	cpusets := slotCPUSets(jobs)
	slots := make(chan int, jobs)
	for i := range jobs {
		slots <- i
	}
	for ctx.Err() == nil {
		slot := <-slots
		release := func() { slots <- slot }
		if ctx.Err() != nil {
			release()
			break
		}
		mu.Lock()
		stop := firstEr != nil
		mu.Unlock()
		if stop {
			release()
			break
		}
		t, err := r.Store.Claim()
		if err != nil || t == nil {
			release()
			if err != nil {
				mu.Lock()
				firstEr = err
				mu.Unlock()
			}
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer release()
			res := r.runTrial(ctx, t, agents[t.Agent], tasks[t.Task], cpusets[slot])
			if ctx.Err() != nil && res.BundleSHA256 == "" {
				return // cut by the stop: requeued below
			}
			if err := r.Store.Finish(t.ID, res); err != nil {
				mu.Lock()
				if firstEr == nil {
					firstEr = err
				}
				mu.Unlock()
				return
			}
			p.finished(t, &res)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		if err := r.requeue(); err != nil {
			return err
		}
		return ctx.Err()
	}
	return firstEr
}

// requeue puts the trials that were running back in the queue and removes
// what they wrote.
func (r *Runner) requeue() error {
	ts, err := r.Store.Trials()
	if err != nil {
		return err
	}
	for i := range ts {
		if ts[i].State == "running" {
			if err := os.RemoveAll(filepath.Join(r.Dir, TrialDir(&ts[i]))); err != nil {
				return fmt.Errorf("removing the interrupted trial's output: %w", err)
			}
		}
	}
	_, err = r.Store.Requeue()
	return err
}

// Recover prepares a suite after its runner was killed. A trial left
// running whose bundle is on disk had finished (the bundle is a trial's
// last write, and atomic): it is recorded, never run again. The others go
// back to the queue, their partial output removed. It returns how many
// were recorded and how many requeued.
func (r *Runner) Recover() (finished, requeued int, err error) {
	ts, err := r.Store.Trials()
	if err != nil {
		return 0, 0, err
	}
	for i := range ts {
		t := &ts[i]
		if t.State != "running" {
			continue
		}
		rel := TrialDir(t)
		if _, err := os.Stat(filepath.Join(r.Dir, rel, trial.BundleFile)); err == nil {
			res := readResult(filepath.Join(r.Dir, rel), rel, 0)
			if err := r.Store.Finish(t.ID, res); err != nil {
				return finished, 0, err
			}
			finished++
			continue
		}
		requeued++
	}
	if err := r.requeue(); err != nil {
		return finished, requeued, err
	}
	// What the killed runner's trials left: their scratch mounts and
	// cgroups (their processes died with it).
	if err := trial.CleanStaleScratch(r.Flags.ScratchDir); err != nil {
		return finished, requeued, err
	}
	if _, err := cgroup.CleanStale(); err != nil {
		return finished, requeued, fmt.Errorf("removing stale cgroups: %w", err)
	}
	return finished, requeued, nil
}

// runTrial runs one trial as a `proctor run` process that dies with this
// one, and reads its verdict.
func (r *Runner) runTrial(ctx context.Context, t *store.Trial, a store.Agent, tk store.Task, cpuset string) store.Result {
	rel := TrialDir(t)
	out := filepath.Join(r.Dir, rel)
	res := store.Result{Out: rel}
	if err := os.RemoveAll(out); err != nil { // a half-written earlier attempt
		res.Error = err.Error()
		return res
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		res.Error = err.Error()
		return res
	}
	args := append(append([]string{"run", "--task", tk.Dir}, agentArgs(a.Command)...), "--out", out)
	args = append(args, r.Flags.args()...)
	if cpuset != "" {
		args = append(args, "--cpuset", cpuset)
	}
	var stderr bytes.Buffer
	start := time.Now()
	err := runChild(ctx, r.Exe, args, &stderr)
	wall := time.Since(start).Milliseconds()
	if _, serr := os.Stat(filepath.Join(out, trial.BundleFile)); serr != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" && err != nil {
			msg = err.Error()
		}
		res.Error, res.WallMS = lastLine(msg), wall
		if res.Error == "" {
			res.Error = "no bundle"
		}
		return res
	}
	return readResult(out, rel, wall)
}

// readResult reads a finished trial's verdict and bundle digest.
func readResult(out, rel string, wallMS int64) store.Result {
	res := store.Result{Out: rel, WallMS: wallMS}
	v, err := readVerdict(out)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	if res.WallMS == 0 {
		res.WallMS = v.TimingsMS["total"]
	}
	res.Status, res.Passed, res.Reward = string(v.Status), v.Passed, v.Reward
	res.AgentMS, res.GraderMS = v.Phases[trial.PhaseAgent].WallMS, v.Phases[trial.PhaseGrader].WallMS
	if v.Models != nil {
		res.ModelCalls = v.Models.Calls
		for _, u := range v.Models.Usage {
			res.InputTokens += u.InputTokens
			res.OutputTokens += u.OutputTokens
		}
	}
	for _, vi := range v.Violations {
		res.Violations = append(res.Violations, vi.Kind)
	}
	if v.Error != "" {
		res.Error = v.Error
	}
	sum, err := fileSHA256(filepath.Join(out, trial.BundleFile))
	if err != nil {
		res.Error = "no bundle: " + err.Error()
		return res
	}
	res.BundleSHA256 = sum
	return res
}

// runChild runs proctor with args. The child gets SIGKILL when the thread
// that started it ends, so it never outlives this process; ctx's end kills
// it too.
func runChild(ctx context.Context, exe string, args []string, stderr io.Writer) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the parent-death signal follows this thread
		cmd := exec.Command(exe, args...)
		cmd.Stdout, cmd.Stderr = io.Discard, stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			errc <- err
			return
		}
		stop := context.AfterFunc(ctx, func() { _ = cmd.Process.Kill() })
		err := cmd.Wait()
		stop()
		errc <- err
	}()
	return <-errc
}

func readVerdict(out string) (*trial.Verdict, error) {
	data, err := os.ReadFile(filepath.Join(out, trial.VerdictFile))
	if err != nil {
		return nil, err
	}
	var v trial.Verdict
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", trial.VerdictFile, err)
	}
	return &v, nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

package suite

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/cgroup"
	"github.com/proctor-sandbox/proctor/internal/cluster"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

// ResultName is the name of a trial's output archive in the result
// bucket, for one delivery of one attempt on one worker: two runs of a
// trial never overwrite each other.
func ResultName(attempt int, delivery uint64, worker string) string {
	return fmt.Sprintf("out.%d.%d.%s.tar", attempt, delivery, worker)
}

// Worker runs trials from a cluster's queue, Jobs at a time, each as a
// `proctor run` process that dies with the worker, and stores each
// trial's output before it acks the trial.
type Worker struct {
	Conn       *cluster.Conn
	Name       string // a subject token: letters, digits, '_', '-'
	Jobs       int
	Key        string              // the private key file trials sign with
	Priv       ed25519.PrivateKey  // that key: it signs the Done messages
	KeyID      string              // its fingerprint, for the heartbeat
	Trust      []ed25519.PublicKey // coordinators whose trials are run
	Version    string
	CacheDir   string // trees unpacked by digest under CacheDir/cluster/trees
	ScratchDir string
	Storage    string // run --storage
	Exe        string // the proctor binary (os.Executable by default)
	Log        io.Writer
	// KeepAlive is how often a running trial's message is kept alive
	// (default 5 s: well under any sane AckWait).
	KeepAlive time.Duration

	mu      sync.Mutex
	running map[string]bool
	done    int
	trees   sync.Map // tree digest → *sync.Mutex: one unpacking at a time
	started time.Time
}

func (w *Worker) logf(format string, a ...any) {
	if w.Log != nil {
		fmt.Fprintf(w.Log, "proctor worker %s: "+format+"\n", append([]any{w.Name}, a...)...)
	}
}

func (w *Worker) treeDir() string { return filepath.Join(w.CacheDir, "cluster", "trees") }
func (w *Worker) workDir() string { return filepath.Join(w.CacheDir, "cluster", "work", w.Name) }

// Run takes and runs trials until ctx ends. Trials cut short by the end
// are given back at once, for another worker.
func (w *Worker) Run(ctx context.Context) error {
	if w.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		w.Exe = exe
	}
	if w.KeepAlive <= 0 {
		w.KeepAlive = 5 * time.Second
	}
	w.running, w.started = map[string]bool{}, time.Now().UTC()
	for _, d := range []string{w.treeDir(), w.workDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	// One worker of a name per cache: the lock is held until the process
	// ends, and another worker of the name is refused.
	lock, err := os.OpenFile(w.workDir()+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return fmt.Errorf("worker %s: another worker of this name uses the cache %s (give each a --name of its own)", w.Name, w.CacheDir)
	}
	defer lock.Close()
	// What an earlier worker of this name left: outputs of trials it never
	// finished (they were redelivered), and dead trials' mounts and cgroups.
	if err := os.RemoveAll(w.workDir()); err != nil {
		return err
	}
	if err := os.MkdirAll(w.workDir(), 0o700); err != nil {
		return err
	}
	w.cleanStale()
	if err := w.beat(ctx); err != nil {
		return err
	}
	hb, stopHB := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(cluster.HeartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-hb.Done():
				return
			case <-t.C:
				if err := w.beat(hb); err != nil && hb.Err() == nil {
					w.logf("warning: %v", err)
				}
			}
		}
	})
	cpusets := slotCPUSets(w.Jobs)
	errc := make(chan error, w.Jobs)
	for slot := range w.Jobs {
		wg.Go(func() { errc <- w.loop(ctx, cpusets[slot]) })
	}
	var first error
	for range w.Jobs {
		if err := <-errc; err != nil && first == nil {
			first = err
		}
	}
	stopHB()
	wg.Wait()
	leave, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	w.Conn.Leave(leave, w.Name)
	if first != nil {
		return first
	}
	return ctx.Err()
}

func (w *Worker) beat(ctx context.Context) error {
	host, _ := os.Hostname()
	w.mu.Lock()
	info := cluster.WorkerInfo{Name: w.Name, Host: host, PID: os.Getpid(), Key: w.KeyID, Version: w.Version,
		Jobs: w.Jobs, Done: w.done, Started: w.started, Running: []string{}}
	for id := range w.running {
		info.Running = append(info.Running, id)
	}
	w.mu.Unlock()
	return w.Conn.Heartbeat(ctx, info)
}

func (w *Worker) cleanStale() {
	if err := trial.CleanStaleScratch(w.ScratchDir); err != nil {
		w.logf("warning: removing stale scratch space: %v", err)
	}
	if _, err := cgroup.CleanStale(); err != nil {
		w.logf("warning: removing stale cgroups: %v", err)
	}
}

// loop runs one slot's trials until ctx ends.
func (w *Worker) loop(ctx context.Context, cpuset string) error {
	for {
		job, err := w.Conn.Next(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, cluster.ErrBadTrial) {
			w.logf("refused a message: %v", err)
			continue
		}
		if errors.Is(err, nats.ErrConnectionClosed) {
			return err // gone for good: a supervisor restarts the worker
		}
		if err != nil {
			w.logf("warning: %v", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		if _, err := job.Msg.SignedBy(w.Trust); err != nil {
			// Left for a worker that trusts its signer, if any.
			w.logf("refused trial %s: %v", job.Msg.ID, err)
			w.giveBack(job, 10*time.Second)
			continue
		}
		w.runJob(ctx, job, cpuset)
	}
}

// runJob runs one delivery of a trial: fetch its trees, run it, store its
// output, announce it, and only then ack it.
func (w *Worker) runJob(ctx context.Context, job *cluster.Job, cpuset string) {
	m := job.Msg
	every := w.KeepAlive
	if aw, err := w.Conn.AckWait(ctx); err == nil && aw/3 < every {
		every = max(aw/3, 100*time.Millisecond)
	}
	stop := cluster.KeepAlive(ctx, job, every)
	defer stop()
	w.mu.Lock()
	w.running[m.ID] = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.running, m.ID)
		w.mu.Unlock()
	}()
	done := cluster.Done{Suite: m.Suite, Trial: m.ID, Worker: w.Name, Attempt: m.Attempt, Delivery: job.Delivered(), Nonce: m.ID}
	out := filepath.Join(w.workDir(), fmt.Sprintf("%s.%d.%d", m.ID, m.Attempt, job.Delivered()))
	defer os.RemoveAll(out)
	if job.Delivered() > 1 {
		w.logf("trial %s: delivery %d (a worker before did not finish it)", m.ID, job.Delivered())
	}
	if err := w.run(ctx, m, out, cpuset); err != nil {
		if ctx.Err() != nil || errors.Is(err, errRetry) {
			if ctx.Err() == nil {
				w.logf("trial %s: %v; given back", m.ID, err)
				stop()
				w.giveBack(job, 5*time.Second)
				return
			}
			stop()
			w.giveBack(job, 0)
			return
		}
		done.Error = err.Error()
		w.logf("trial %s: %v", m.ID, err)
	} else {
		done.Result = ResultName(m.Attempt, job.Delivered(), w.Name)
		digest, err := w.store(ctx, m.ID, done.Result, out)
		if err != nil {
			w.logf("trial %s: storing its output: %v", m.ID, err)
			stop()
			w.giveBack(job, 5*time.Second)
			return
		}
		done.ResultDigest = digest
	}
	if err := done.Sign(w.Priv); err != nil {
		w.logf("trial %s: %v", m.ID, err)
		stop()
		w.giveBack(job, 5*time.Second)
		return
	}
	if err := w.Conn.PublishDone(ctx, done); err != nil {
		w.logf("trial %s: %v", m.ID, err)
		stop()
		w.giveBack(job, 5*time.Second)
		return
	}
	stop()
	if err := job.Ack(ctx); err != nil {
		// Redelivered later and run again; the coordinator keeps one.
		w.logf("warning: trial %s: %v", m.ID, err)
		return
	}
	w.mu.Lock()
	w.done++
	w.mu.Unlock()
	if job.Delivered() > 1 {
		// A worker before died with this trial: if it ran here, its
		// sandbox's scratch mount and cgroups are stale now.
		w.cleanStale()
	}
}

// errRetry marks an error another attempt may not meet (the cluster
// could not be reached): the trial is given back rather than failed.
var errRetry = errors.New("cannot reach the cluster")

// giveBack returns a trial to the queue, for another worker, after delay.
func (w *Worker) giveBack(job *cluster.Job, delay time.Duration) {
	if err := job.Nak(delay); err != nil {
		w.logf("warning: %v (it is redelivered after the ack wait)", err)
	}
}

// run runs trial m into out. An error means no trial ran: the task could
// not be fetched or checked, or proctor run made no bundle.
func (w *Worker) run(ctx context.Context, m cluster.TrialMsg, out, cpuset string) error {
	if m.TaskTree == "" {
		return fmt.Errorf("trial %s: no task_tree: the coordinator did not bind the archive to a task digest", m.ID)
	}
	taskDir, err := w.tree(ctx, cluster.Tree{Archive: m.TaskDigest, Tree: m.TaskTree})
	if err != nil {
		return fmt.Errorf("task %s: %w", m.Task, err)
	}
	agentDir := ""
	if m.AgentDir != nil {
		if agentDir, err = w.tree(ctx, *m.AgentDir); err != nil {
			return fmt.Errorf("agent dir: %w", err)
		}
	}
	args := append(append([]string{"run", "--task", taskDir}, agentArgs(m.AgentCommand)...), "--out", out, "--nonce", m.ID)
	args = append(args, runArgs(w.Key, agentDir, w.CacheDir, w.ScratchDir, w.Storage, m.AllowHosts, m.Gateways, m.HostMap, m.NoAudit, m.Internet)...)
	args = append(args, verifierArgs(m.VerifierHosts, m.CAFiles)...)
	if cpuset != "" {
		args = append(args, "--cpuset", cpuset)
	}
	var stderr bytes.Buffer
	err = runChild(ctx, w.Exe, args, &stderr)
	if _, serr := os.Stat(filepath.Join(out, trial.BundleFile)); serr != nil {
		msg := lastLine(stderr.String())
		if msg == "" && err != nil {
			msg = err.Error()
		}
		if msg == "" {
			msg = "no bundle"
		}
		return errors.New(msg)
	}
	return nil
}

// tree returns the directory of t, fetching, checking and unpacking its
// archive the first time.
func (w *Worker) tree(ctx context.Context, t cluster.Tree) (string, error) {
	hexTree, ok := strings.CutPrefix(t.Tree, cluster.DigestPrefix)
	if !ok {
		return "", fmt.Errorf("tree digest %q", t.Tree)
	}
	dst := filepath.Join(w.treeDir(), hexTree)
	mu, _ := w.trees.LoadOrStore(hexTree, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	defer mu.(*sync.Mutex).Unlock()
	if _, err := os.Stat(dst); err == nil {
		return dst, nil
	}
	f, err := os.CreateTemp(w.treeDir(), ".fetch-*.tar")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	if err := w.Conn.GetTask(ctx, t.Archive, f); err != nil {
		if errors.Is(err, cluster.ErrTampered) || errors.Is(err, cluster.ErrNotFound) {
			return "", fmt.Errorf("refused: %w", err)
		}
		return "", fmt.Errorf("%w: %w", errRetry, err)
	}
	if err := UnpackTree(f.Name(), t.Archive, t.Tree, dst); err != nil {
		if errors.Is(err, os.ErrExist) {
			return dst, nil // another worker sharing the cache unpacked it meanwhile
		}
		return "", fmt.Errorf("refused: %w", err)
	}
	return dst, nil
}

// store packs the trial's output and puts it in the result bucket,
// returning the archive's digest.
func (w *Worker) store(ctx context.Context, id, name, out string) (string, error) {
	path, digest, err := PackTreeFile(out, w.workDir())
	if err != nil {
		return "", err
	}
	defer os.Remove(path)
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := w.Conn.PutResult(ctx, id, name, f); err != nil {
		return "", err
	}
	return digest, nil
}

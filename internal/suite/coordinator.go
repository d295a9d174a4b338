package suite

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/proctor-sandbox/proctor/internal/cluster"
	"github.com/proctor-sandbox/proctor/internal/store"
	"github.com/proctor-sandbox/proctor/internal/task"
)

// Coordinator runs a suite's trials on a cluster's workers: it uploads
// each task once, publishes one message per trial, and records each
// trial's result in the suite's store as the workers finish them, after
// Accept has checked it. The store and the trial directories are what a
// local run makes, so report and resume work alike.
type Coordinator struct {
	Dir   string
	Store *store.Store
	Conn  *cluster.Conn
	// Suite names the suite on the cluster (a subject token, kept in the
	// run flags); trial n of the store is trial Suite-n on the cluster.
	Suite string
	Flags RunFlags
	// Accept checks a finished trial's output in dir before it counts:
	// the bundle signed by a trusted worker key, bound to the task and
	// agent the trial was planned with. Its error rejects the trial.
	// agentDir is the Merkle digest of --agent-dir ("" without one).
	Accept   func(dir string, t *store.Trial, tk store.Task, a store.Agent, agentDir string) error
	Log      io.Writer
	Terminal bool
	// Stats, when set, receives what the coordinator did.
	Stats *CoordStats
}

// CoordStats counts what a coordinator saw.
type CoordStats struct {
	Published, Republished int
	Recorded, Rejected     int
	Duplicates             int // results of trials recorded already: ignored
}

// ClusterID is the cluster name of the store's trial id.
func (c *Coordinator) ClusterID(id int64) string { return c.Suite + "-" + strconv.FormatInt(id, 10) }

func (c *Coordinator) storeID(clusterID string) (int64, bool) {
	s, ok := strings.CutPrefix(clusterID, c.Suite+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

func (c *Coordinator) logf(format string, a ...any) {
	if c.Log != nil {
		fmt.Fprintf(c.Log, "proctor: "+format+"\n", a...)
	}
}

// Run publishes what is not yet on the cluster and records results until
// every trial is done or failed, or ctx ends. Stopped, it loses nothing:
// the trials stay queued and their results wait in the cluster for the
// next Run on this store.
func (c *Coordinator) Run(ctx context.Context) error {
	if c.Stats == nil {
		c.Stats = &CoordStats{}
	}
	su, err := c.Store.Suite()
	if err != nil {
		return err
	}
	tasks := map[string]store.Task{}
	for _, t := range su.Tasks {
		tasks[t.Name] = t
	}
	agents := map[string]store.Agent{}
	for _, a := range su.Agents {
		agents[a.Name] = a
	}
	trees, agentDir, err := c.upload(ctx, su)
	if err != nil {
		return err
	}
	agentTree := ""
	if agentDir != nil {
		agentTree = agentDir.Tree
	}
	comp, err := c.Conn.Completions(ctx, c.Suite)
	if err != nil {
		return err
	}
	msg := func(t *store.Trial) cluster.TrialMsg {
		return cluster.TrialMsg{ID: c.ClusterID(t.ID), Suite: c.Suite, Agent: t.Agent, AgentCommand: agents[t.Agent].Command,
			Task: t.Task, TaskDigest: trees[t.Task].Archive, TaskTree: trees[t.Task].Tree, Index: t.Index,
			AgentDir: agentDir, AllowHosts: c.Flags.AllowHosts, Gateways: c.Flags.Gateways, NoAudit: c.Flags.NoAudit}
	}
	// Trials an earlier coordinator published: in the queue, or finished
	// and waiting for us, or lost (a queue made anew): publish those again.
	batch := c.Conn.NewBatch()
	err = c.Store.EachTrial(store.StateRunning, func(t *store.Trial) error {
		id := c.ClusterID(t.ID)
		queued, err := c.Conn.Queued(ctx, id)
		if err != nil {
			return err
		}
		finished, err := c.Conn.Finished(ctx, c.Suite, id)
		if err != nil || queued || finished {
			return err
		}
		c.Stats.Republished++
		return batch.Publish(ctx, msg(t))
	})
	if err != nil {
		return err
	}
	if err := batch.Wait(ctx); err != nil {
		return err
	}
	// The rest, claimed at once and published: a trial claimed and not
	// published (the coordinator stopped) is not queued, and the next Run
	// publishes it above.
	n, at, err := c.Store.ClaimAll()
	if err != nil {
		return err
	}
	if n > 0 {
		err = c.Store.EachTrial(store.StateRunning, func(t *store.Trial) error {
			if !t.Started.Equal(at) {
				return nil // an earlier coordinator's, seen to above
			}
			c.Stats.Published++
			return batch.Publish(ctx, msg(t))
		})
		if err == nil {
			err = batch.Wait(ctx)
		}
		if err != nil {
			return err
		}
	}
	p := newProgress(c.Store, su, c.Log, c.Terminal)
	defer p.close()
	counts, err := c.Store.Counts()
	if err != nil {
		return err
	}
	for left := counts[store.StatePending] + counts[store.StateRunning]; ; {
		if left == 0 {
			return c.Conn.DeleteCompletions(context.WithoutCancel(ctx), c.Suite)
		}
		m, err := comp.Next(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, cluster.ErrBadTrial) {
			c.logf("warning: %v", err)
			continue
		}
		if err != nil {
			return err
		}
		recorded, err := c.record(ctx, m, tasks, agents, agentTree, p)
		if err != nil {
			m.Nak(0)
			return err
		}
		if recorded {
			left--
		}
		if err := m.Ack(ctx); err != nil {
			return err
		}
	}
}

// upload stores every task's archive (and the agent dir's) in the cluster
// and returns them by task name. A task that changed since the suite was
// planned is refused: its trials would run on another task.
func (c *Coordinator) upload(ctx context.Context, su *store.Suite) (map[string]cluster.Tree, *cluster.Tree, error) {
	tmp, err := os.MkdirTemp(c.Dir, ".upload-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(tmp)
	put := func(dir, want, what string) (cluster.Tree, error) {
		path, digest, err := PackTreeFile(dir, tmp)
		if err != nil {
			return cluster.Tree{}, fmt.Errorf("%s: %w", what, err)
		}
		defer os.Remove(path)
		// What a worker will unpack, unpacked here first: the archive must
		// give back the very tree the suite was planned with.
		if err := UnpackTree(path, digest, want, filepath.Join(tmp, "check")); err != nil {
			return cluster.Tree{}, fmt.Errorf("%s %s: changed since the suite was planned, or cannot travel: %w", what, dir, err)
		}
		if err := os.RemoveAll(filepath.Join(tmp, "check")); err != nil {
			return cluster.Tree{}, err
		}
		f, err := os.Open(path)
		if err != nil {
			return cluster.Tree{}, err
		}
		defer f.Close()
		if err := c.Conn.PutTask(ctx, digest, f); err != nil {
			return cluster.Tree{}, fmt.Errorf("%s: %w", what, err)
		}
		return cluster.Tree{Archive: digest, Tree: want}, nil
	}
	trees := map[string]cluster.Tree{}
	for _, t := range su.Tasks {
		tr, err := put(t.Dir, t.Digest, "task "+t.Name)
		if err != nil {
			return nil, nil, err
		}
		trees[t.Name] = tr
	}
	if c.Flags.AgentDir == "" {
		return trees, nil, nil
	}
	want, err := task.Digest(c.Flags.AgentDir)
	if err != nil {
		return nil, nil, fmt.Errorf("--agent-dir: %w", err)
	}
	ad, err := put(c.Flags.AgentDir, want, "--agent-dir")
	if err != nil {
		return nil, nil, err
	}
	return trees, &ad, nil
}

// record fetches, checks and records the result a Done announces. An
// error is the coordinator's own (the store, the cluster): the Done is
// given back. A result that fails its checks is recorded as rejected.
// recorded says whether a trial was finished in the store.
func (c *Coordinator) record(ctx context.Context, m *cluster.DoneMsg, tasks map[string]store.Task, agents map[string]store.Agent, agentTree string, p *progress) (recorded bool, err error) {
	d := m.Done
	id, ok := c.storeID(d.Trial)
	if !ok {
		c.logf("warning: a result for %s, not a trial of this suite, from worker %s: ignored", d.Trial, d.Worker)
		return false, nil
	}
	t, err := c.Store.Trial(id)
	if errors.Is(err, store.ErrNoTrial) {
		c.logf("warning: a result for trial %s, which this suite does not have, from worker %s: ignored", d.Trial, d.Worker)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if t.State != store.StateRunning {
		c.Stats.Duplicates++
		c.logf("trial %s ran again (delivery %d on worker %s) after it was recorded: the later result is ignored", d.Trial, d.Delivery, d.Worker)
		return false, nil
	}
	rel := TrialDir(t)
	out := filepath.Join(c.Dir, rel)
	if d.Error != "" {
		res := store.Result{Out: rel, Error: "worker " + d.Worker + ": " + d.Error}
		if err := c.Store.Finish(t.ID, res); err != nil {
			return false, err
		}
		p.finished(t, &res)
		return true, nil
	}
	reject := func(format string, a ...any) (bool, error) {
		c.Stats.Rejected++
		res := store.Result{Out: rel, Error: "rejected: worker " + d.Worker + ": " + fmt.Sprintf(format, a...)}
		c.logf("%s × %s #%d: %s", t.Agent, t.Task, t.Index, res.Error)
		if err := c.Store.Finish(t.ID, res); err != nil {
			return false, err
		}
		p.finished(t, &res)
		return true, nil
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return false, err
	}
	f, err := os.CreateTemp(filepath.Dir(out), ".result-*.tar")
	if err != nil {
		return false, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	h := sha256.New()
	if err := c.Conn.GetResult(ctx, d.Trial, d.Result, io.MultiWriter(f, h)); err != nil {
		if errors.Is(err, cluster.ErrNotFound) {
			return reject("its result %s is not in the cluster", d.Result)
		}
		return false, err
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != d.ResultDigest {
		return reject("its result %s has the digest %s, not the %s announced", d.Result, got, d.ResultDigest)
	}
	if err := os.RemoveAll(out); err != nil { // a half-recorded earlier delivery
		return false, err
	}
	if err := unpackResult(f.Name(), d.ResultDigest, out); err != nil {
		return reject("%v", err)
	}
	if err := c.Accept(out, t, tasks[t.Task], agents[t.Agent], agentTree); err != nil {
		return reject("%v", err)
	}
	res := readResult(out, rel, 0)
	if err := c.Store.Finish(t.ID, res); err != nil {
		return false, err
	}
	c.Stats.Recorded++
	p.finished(t, &res)
	return true, nil
}

// unpackResult unpacks a trial's output archive into out. Its tree digest
// is not known beforehand: the bundle inside, checked next, binds it.
func unpackResult(path, archive, out string) error { return unpack(path, archive, out, nil) }

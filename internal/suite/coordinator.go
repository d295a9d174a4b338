package suite

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/proctor-sandbox/proctor/internal/cluster"
	"github.com/proctor-sandbox/proctor/internal/store"
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
	// the bundle signed by a trusted worker key, bound to the trial as
	// planned. Its error rejects the result.
	Accept func(dir string, p Planned) error
	// Key signs the trial messages; Trust are the worker keys whose Done
	// messages are taken.
	Key      ed25519.PrivateKey
	Trust    []ed25519.PublicKey
	Log      io.Writer
	Terminal bool
	// Stats, when set, receives what the coordinator did.
	Stats *CoordStats

	msg func(*store.Trial) (cluster.TrialMsg, error) // set by Run
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
	return n, err == nil && n > 0 && c.ClusterID(n) == clusterID
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
	tasks, agents := suiteMaps(su)
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
	c.msg = func(t *store.Trial) (cluster.TrialMsg, error) {
		m := cluster.TrialMsg{ID: c.ClusterID(t.ID), Suite: c.Suite, Agent: t.Agent, AgentCommand: agents[t.Agent].Command,
			Task: t.Task, TaskDigest: trees[t.Task].Archive, TaskTree: trees[t.Task].Tree, Index: t.Index,
			AgentDir: agentDir, AllowHosts: c.Flags.AllowHosts, Gateways: c.Flags.Gateways, NoAudit: c.Flags.NoAudit, Internet: c.Flags.Internet, HostMap: c.Flags.HostMap,
			VerifierHosts: c.Flags.VerifierHosts, CAFiles: c.Flags.CAFiles,
			Attempt: t.Attempt}
		return m, m.Sign(c.Key)
	}
	publish := func(b *cluster.Batch, t *store.Trial) error {
		m, err := c.msg(t)
		if err != nil {
			return err
		}
		return b.Publish(ctx, m)
	}
	// Trials an earlier coordinator published: in the queue, or finished
	// and waiting for us, or lost (a queue made anew): publish those again.
	if err := c.reconcile(ctx); err != nil {
		return err
	}
	batch := c.Conn.NewBatch()
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
			return publish(batch, t)
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
		nctx, cancel := context.WithTimeout(ctx, reconcileEvery)
		m, err := comp.Next(nctx)
		// Idle: the wait ran out (pull reports it a little before the
		// context's own timer fires), not the coordinator's context.
		idle := errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if idle {
			// Nothing came for a while: a trial whose message was lost
			// (deleted, or terminated by another version) would never come.
			if err := c.reconcile(ctx); err != nil {
				return err
			}
			continue
		}
		if errors.Is(err, cluster.ErrBadTrial) {
			c.logf("warning: %v", err)
			continue
		}
		if err != nil {
			return err
		}
		stop := m.KeepAlive()
		recorded, err := c.record(ctx, m, tasks, agents, agentTree, p)
		stop()
		if err != nil {
			m.Nak(0)
			return err
		}
		if m.Done.Result != "" {
			// Recorded here or refused: the cluster need not keep it.
			if err := c.Conn.DeleteResult(ctx, m.Done.Trial, m.Done.Result); err != nil {
				c.logf("warning: %v", err)
			}
		}
		if recorded {
			left--
		}
		if err := m.Ack(ctx); err != nil {
			return err
		}
	}
}

// reconcileEvery is how long the coordinator waits for a result before it
// looks for trials that are neither queued nor finished.
var reconcileEvery = time.Minute

// reconcile publishes again, as a new attempt (a new message ID, which
// deduplication cannot drop), every running trial that is neither in the
// queue nor finished and waiting.
func (c *Coordinator) reconcile(ctx context.Context) error {
	var lost []store.Trial
	err := c.Store.EachTrial(store.StateRunning, func(t *store.Trial) error {
		id := c.ClusterID(t.ID)
		queued, err := c.Conn.Queued(ctx, id)
		if err != nil {
			return err
		}
		finished, err := c.Conn.Finished(ctx, c.Suite, id)
		if err != nil || queued || finished {
			return err
		}
		lost = append(lost, *t)
		return nil
	})
	if err != nil {
		return err
	}
	for i := range lost {
		t := &lost[i]
		n, err := c.Store.Retry(t.ID)
		if err != nil {
			return err
		}
		t.Attempt = n
		m, err := c.msg(t)
		if err != nil {
			return err
		}
		if err := c.Conn.Publish(ctx, m); err != nil {
			return err
		}
		c.Stats.Republished++
		c.logf("trial %s was neither queued nor finished: published again (attempt %d)", m.ID, n)
	}
	return nil
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
		// What a worker will unpack, read here first: the archive must
		// give back the very tree the suite was planned with.
		if err := VerifyTree(path, digest, want); err != nil {
			return cluster.Tree{}, fmt.Errorf("%s %s: changed since the suite was planned: %w", what, dir, err)
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
	want := c.Flags.AgentDirDigest
	if want == "" {
		return nil, nil, fmt.Errorf("--agent-dir %s: no digest planned with the suite", c.Flags.AgentDir)
	}
	ad, err := put(c.Flags.AgentDir, want, "--agent-dir")
	if err != nil {
		return nil, nil, err
	}
	return trees, &ad, nil
}

// MaxAttempts is how many times a trial is published before a failure to
// run it, or a rejected result, is recorded as its outcome.
const MaxAttempts = 3

// MaxResultBytes bounds a result archive the coordinator fetches.
const MaxResultBytes = 4 << 30

// record fetches, checks and records the result a Done announces. An
// error is the coordinator's own (the store, the cluster): the Done is
// given back. A Done not signed by a trusted worker, a worker's failure to
// run the trial and a result that fails its checks are rejected: the
// trial is published again, up to MaxAttempts, and then recorded as not
// run with the reason. recorded says whether a trial was finished in the
// store.
func (c *Coordinator) record(ctx context.Context, m *cluster.DoneMsg, tasks map[string]store.Task, agents map[string]store.Agent, agentTree string, p *progress) (recorded bool, err error) {
	d := m.Done
	id, ok := c.storeID(d.Trial)
	if !ok {
		c.logf("warning: a result for %s, not a trial of this suite: ignored", d.Trial)
		return false, nil
	}
	t, err := c.Store.Trial(id)
	if errors.Is(err, store.ErrNoTrial) {
		c.logf("warning: a result for trial %s, which this suite does not have: ignored", d.Trial)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if t.State != store.StateRunning {
		c.Stats.Duplicates++
		c.logf("trial %s ran again (delivery %d on worker %s) after it was recorded: the later result is ignored", d.Trial, d.Delivery, printable(d.Worker))
		return false, nil
	}
	rel := TrialDir(t)
	out := filepath.Join(c.Dir, rel)
	reject := func(format string, a ...any) (bool, error) {
		c.Stats.Rejected++
		why := "rejected: worker " + printable(d.Worker) + ": " + printable(fmt.Sprintf(format, a...))
		if err := os.RemoveAll(out); err != nil {
			return false, err
		}
		if t.Attempt < MaxAttempts {
			n, err := c.Store.Retry(t.ID)
			if err != nil {
				return false, err
			}
			t.Attempt = n
			msg, err := c.msg(t)
			if err != nil {
				return false, err
			}
			if err := c.Conn.Publish(ctx, msg); err != nil {
				return false, err
			}
			c.logf("%s × %s #%d: %s; published again (attempt %d of %d)", t.Agent, t.Task, t.Index, why, n, MaxAttempts)
			return false, nil
		}
		res := store.Result{Out: rel, Error: why}
		c.logf("%s × %s #%d: %s (attempt %d of %d: recorded as not run)", t.Agent, t.Task, t.Index, why, t.Attempt, MaxAttempts)
		if err := c.Store.Finish(t.ID, res); err != nil {
			return false, err
		}
		p.finished(t, &res)
		return true, nil
	}
	if _, err := d.SignedBy(c.Trust); err != nil {
		return reject("its message: %v", err)
	}
	if d.Error != "" {
		return reject("could not run the trial: %s", d.Error)
	}
	if d.Nonce != d.Trial {
		return reject("its result is for %q", d.Nonce)
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
	lw := &limitWriter{w: io.MultiWriter(f, h), left: MaxResultBytes}
	if err := c.Conn.GetResult(ctx, d.Trial, d.Result, lw); err != nil {
		switch {
		case errors.Is(err, cluster.ErrNotFound):
			return reject("its result %s is not in the cluster", d.Result)
		case errors.Is(err, errTooBig):
			return reject("its result %s is over %d bytes", d.Result, MaxResultBytes)
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
	planned := Planned{Trial: t, Task: tasks[t.Task], Agent: agents[t.Agent], AgentDir: agentTree, Nonce: c.ClusterID(t.ID)}
	if err := c.Accept(out, planned); err != nil {
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

// Planned is what a trial was planned to be, for Accept to hold a result
// to: the bundle's verdict must carry Nonce, the trial's cluster ID.
type Planned struct {
	Trial    *store.Trial
	Task     store.Task
	Agent    store.Agent
	AgentDir string // the Merkle digest of --agent-dir, "" without one
	Nonce    string
}

var errTooBig = errors.New("too big")

// limitWriter fails once more than left bytes are written.
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		return 0, errTooBig
	}
	l.left -= int64(len(p))
	return l.w.Write(p)
}

// printable keeps s to one line of printable text: names and reasons from
// the cluster reach terminals and the store.
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || !unicode.IsPrint(r) && r != ' ' {
			return '?'
		}
		return r
	}, s)
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

// unpackResult unpacks a trial's output archive into out. Its tree digest
// is not known beforehand: the bundle inside, checked next, binds it.
func unpackResult(path, archive, out string) error { return unpackFiles(path, archive, out) }

package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TrialMsg is one trial to run, as it travels through the queue (JSON).
// It is self-contained: a worker needs nothing else, beyond the archives it
// names, to run the trial as the coordinator planned it.
type TrialMsg struct {
	ID           string `json:"id"`    // unique per trial; the JetStream message ID and the last token(s) of its subject (see [ValidID])
	Suite        string `json:"suite"` // suite name
	Agent        string `json:"agent"` // agent name
	AgentCommand string `json:"agent_command,omitempty"`
	Task         string `json:"task"`        // task name
	TaskDigest   string `json:"task_digest"` // archive digest in PROCTOR_TASKS
	Index        int    `json:"index"`       // repetition of (agent, task), from 0
	// TaskTree is the Merkle digest (internal/task.DigestTree) the archive must
	// unpack to; the worker checks it before it runs anything.
	TaskTree string `json:"task_tree,omitempty"`
	// AgentDir, when set, is the archive of the directory mounted at /agent.
	AgentDir *Tree `json:"agent_dir,omitempty"`
	// The network the agent may use, as the run flags of the same names.
	AllowHosts []string `json:"allow_hosts,omitempty"`
	Gateways   []string `json:"model_gateways,omitempty"`
	NoAudit    bool     `json:"no_audit,omitempty"`
	Internet   bool     `json:"internet,omitempty"`
	HostMap    []string `json:"host_map,omitempty"`
	// The verifier's network while its fetches are recorded (CA files
	// are paths on the worker).
	VerifierHosts []string `json:"verifier_allow_hosts,omitempty"`
	CAFiles       []string `json:"ca_files,omitempty"`
	// Attempt counts the coordinator's publications of the trial, from 1:
	// a trial that could not run or whose result was rejected is published
	// again, under a message ID of its own.
	Attempt int `json:"attempt,omitempty"`
	// Key and Sig: the coordinator's signature (see Sign).
	Key string `json:"signer_key,omitempty"`
	Sig string `json:"sig,omitempty"`
}

// msgID is the JetStream message ID of m: the trial ID, and its attempt
// after the first.
func (m TrialMsg) msgID() string {
	if m.Attempt > 1 {
		return fmt.Sprintf("%s#%d", m.ID, m.Attempt)
	}
	return m.ID
}

// Tree names a directory stored as an archive in PROCTOR_TASKS: the archive's
// digest, and the Merkle digest of the tree it unpacks to.
type Tree struct {
	Archive string `json:"archive"`
	Tree    string `json:"tree"`
}

// ValidID reports whether id may name a trial or a suite: 1-200 of ASCII
// letters, digits, '_', '-' and '.', neither starting nor ending with '.'
// and without "..", so that it is one or more subject tokens.
func ValidID(id string) bool {
	if id == "" || len(id) > 200 || id[0] == '.' || id[len(id)-1] == '.' || strings.Contains(id, "..") {
		return false
	}
	return !strings.ContainsFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
	})
}

// validToken reports whether s is one subject token of ValidID's letters.
func validToken(s string) bool { return ValidID(s) && !strings.Contains(s, ".") }

// checkID checks m.ID alone: it names results as well as the message.
func (m TrialMsg) checkID() error {
	switch {
	case m.ID == "":
		return fmt.Errorf("%w: no id", ErrBadTrial)
	case !ValidID(m.ID):
		return fmt.Errorf("%w: id %q: want 1-200 of letters, digits, '_', '-' and '.' (not at either end, not twice in a row)", ErrBadTrial, m.ID)
	}
	return nil
}

func (m TrialMsg) check() error {
	if err := m.checkID(); err != nil {
		return err
	}
	switch {
	case m.Task == "" || m.Agent == "":
		return fmt.Errorf("%w: trial %s: no task or agent", ErrBadTrial, m.ID)
	case m.Index < 0:
		return fmt.Errorf("%w: trial %s: negative index", ErrBadTrial, m.ID)
	case m.Suite != "" && !validToken(m.Suite):
		return fmt.Errorf("%w: trial %s: suite %q: want 1-200 of letters, digits, '_' and '-'", ErrBadTrial, m.ID, m.Suite)
	}
	if _, err := checkDigest(m.TaskDigest); err != nil {
		return fmt.Errorf("%w: trial %s: %w", ErrBadTrial, m.ID, err)
	}
	if m.TaskTree != "" {
		if _, err := checkDigest(m.TaskTree); err != nil {
			return fmt.Errorf("%w: trial %s: task_tree: %w", ErrBadTrial, m.ID, err)
		}
	}
	if m.AgentDir != nil {
		for _, d := range []string{m.AgentDir.Archive, m.AgentDir.Tree} {
			if _, err := checkDigest(d); err != nil {
				return fmt.Errorf("%w: trial %s: agent_dir: %w", ErrBadTrial, m.ID, err)
			}
		}
	}
	return nil
}

// trialSubject is the subject trial id is published on.
func trialSubject(id string) string { return TrialSubjectPrefix + id }

// Publish queues the trial. Publishing a trial with the same ID again
// within the duplicate window stores nothing: it is safe to retry.
func (c *Conn) Publish(ctx context.Context, m TrialMsg) error {
	_, err := c.publish(ctx, m)
	return err
}

// publish is Publish that also says whether the server dropped m as a duplicate.
func (c *Conn) publish(ctx context.Context, m TrialMsg) (duplicate bool, err error) {
	if err := m.check(); err != nil {
		return false, fmt.Errorf("publishing trial: %w", err)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return false, fmt.Errorf("publishing trial %s: %w", m.ID, err)
	}
	ack, err := c.js.Publish(ctx, trialSubject(m.ID), data,
		jetstream.WithMsgID(m.msgID()), jetstream.WithExpectStream(TrialStream))
	if err != nil {
		return false, fmt.Errorf("publishing trial %s: %w", m.ID, err)
	}
	return ack.Duplicate, nil
}

// Batch publishes trials without waiting for each one's ack: at most
// batchWindow in flight, so a coordinator queues thousands in seconds
// with bounded memory. Not safe for concurrent use.
type Batch struct {
	c    *Conn
	futs []jetstream.PubAckFuture
	ids  []string
}

const batchWindow = 256

// NewBatch returns a Batch publishing through c.
func (c *Conn) NewBatch() *Batch { return &Batch{c: c} }

// Publish queues m as Conn.Publish does, waiting only when the window is
// full. An error may be any earlier trial's of the batch.
func (b *Batch) Publish(ctx context.Context, m TrialMsg) error {
	if err := m.check(); err != nil {
		return fmt.Errorf("publishing trial: %w", err)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("publishing trial %s: %w", m.ID, err)
	}
	f, err := b.c.js.PublishAsync(trialSubject(m.ID), data,
		jetstream.WithMsgID(m.msgID()), jetstream.WithExpectStream(TrialStream))
	if err != nil {
		return fmt.Errorf("publishing trial %s: %w", m.ID, err)
	}
	b.futs, b.ids = append(b.futs, f), append(b.ids, m.ID)
	if len(b.futs) >= batchWindow {
		return b.Wait(ctx)
	}
	return nil
}

// Wait waits until the server has stored every trial published so far.
func (b *Batch) Wait(ctx context.Context) error {
	defer func() { b.futs, b.ids = b.futs[:0], b.ids[:0] }()
	for i, f := range b.futs {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			return fmt.Errorf("publishing trial %s: %w", b.ids[i], err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Job is one delivery of a trial to a worker. Msg is immutable; the
// methods are safe for concurrent use.
type Job struct {
	Msg TrialMsg
	msg jetstream.Msg
	md  *jetstream.MsgMetadata
}

// Delivered returns how many times this trial has been delivered, this
// delivery included: 1 the first time, 2 after one redelivery.
func (j *Job) Delivered() uint64 { return j.md.NumDelivered }

// InProgress tells the server the trial is still running, resetting its
// AckWait. Call it more often than AckWait, or use [KeepAlive].
func (j *Job) InProgress() error {
	if err := j.msg.InProgress(); err != nil {
		return fmt.Errorf("trial %s: in progress: %w", j.Msg.ID, err)
	}
	return nil
}

// Ack removes the trial from the queue for good and waits for the server
// to confirm it. Call it only once the trial's results are stored (with
// [Conn.PutResult]) and durable: a trial acked before that and lost with
// its worker is never run again.
func (j *Job) Ack(ctx context.Context) error {
	if err := j.msg.DoubleAck(ctx); err != nil {
		return fmt.Errorf("trial %s: ack: %w", j.Msg.ID, err)
	}
	return nil
}

// Nak gives the trial back, to be redelivered after delay (at once if 0).
func (j *Job) Nak(delay time.Duration) error {
	var err error
	if delay > 0 {
		err = j.msg.NakWithDelay(delay)
	} else {
		err = j.msg.Nak()
	}
	if err != nil {
		return fmt.Errorf("trial %s: nak: %w", j.Msg.ID, err)
	}
	return nil
}

// Queued reports whether trial id is in the queue: published and not yet
// acked (waiting or in flight).
func (c *Conn) Queued(ctx context.Context, id string) (bool, error) {
	if !ValidID(id) {
		return false, fmt.Errorf("%w: id %q", ErrBadTrial, id)
	}
	return hasSubject(ctx, c.stream, trialSubject(id))
}

// hasSubject reports whether the stream holds a message on subject.
func hasSubject(ctx context.Context, s jetstream.Stream, subject string) (bool, error) {
	_, err := s.GetLastMsgForSubject(ctx, subject)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	}
	return false, fmt.Errorf("looking up %s: %w", subject, err)
}

// Next waits for a trial and returns it, until ctx is done. A message that
// is not a valid TrialMsg is terminated (never redelivered) and Next
// returns an error matching ErrBadTrial; call Next again.
func (c *Conn) Next(ctx context.Context) (*Job, error) {
	msg, err := pull(ctx, c.consumer, c.pollWait)
	if err != nil {
		return nil, err
	}
	return newJob(msg)
}

// pull waits for the next message of consumer until ctx is done, one pull
// request of at most pollWait at a time.
func pull(ctx context.Context, consumer jetstream.Consumer, pollWait time.Duration) (jetstream.Msg, error) {
	for {
		if err := ctxErr(ctx); err != nil {
			return nil, err
		}
		// One pull request at a time, each expiring on the server shortly
		// before pctx does (FetchContext sees to that), so that no trial is
		// delivered to a request nobody is reading any more.
		pctx, cancel := context.WithTimeout(ctx, pollWait)
		msg, err := consumer.Next(jetstream.FetchContext(pctx))
		expired := ctxErr(pctx) != nil
		cancel()
		if err != nil {
			if err := ctxErr(ctx); err != nil {
				return nil, err
			}
			if expired || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
				continue
			}
			return nil, fmt.Errorf("waiting for a message: %w", err)
		}
		return msg, nil
	}
}

// ctxErr is ctx.Err, reporting a deadline as exceeded a little before
// the context's own timer does: a pull request needs a few milliseconds.
func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < 5*time.Millisecond {
		return context.DeadlineExceeded
	}
	return nil
}

func newJob(msg jetstream.Msg) (*Job, error) {
	md, err := msg.Metadata()
	if err != nil {
		msg.TermWithReason("no metadata")
		return nil, fmt.Errorf("%w: %w", ErrBadTrial, err)
	}
	var m TrialMsg
	if err := json.Unmarshal(msg.Data(), &m); err != nil {
		msg.TermWithReason("not a trial")
		return nil, fmt.Errorf("%w: stream sequence %d: %w", ErrBadTrial, md.Sequence.Stream, err)
	}
	if err := m.check(); err != nil {
		msg.TermWithReason("not a trial")
		return nil, fmt.Errorf("stream sequence %d: %w", md.Sequence.Stream, err)
	}
	return &Job{Msg: m, msg: msg, md: md}, nil
}

// KeepAlive calls job.InProgress every interval (it should be well under
// AckWait, a third say) until ctx is done or stop is called, so that a long
// trial keeps its message. stop waits for the last call to return; call it
// before Ack. Errors are ignored: a job that could not be kept alive is
// redelivered, and its Ack fails.
func KeepAlive(ctx context.Context, job *Job, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				job.InProgress()
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TrialMsg is one trial to run, as it travels through the queue (JSON). It
// is a value: copy it freely.
type TrialMsg struct {
	ID           string `json:"id"`    // unique per trial; the JetStream message ID; no '/', spaces or control characters
	Suite        string `json:"suite"` // suite name
	Agent        string `json:"agent"` // agent name
	AgentCommand string `json:"agent_command,omitempty"`
	Task         string `json:"task"`        // task name
	TaskDigest   string `json:"task_digest"` // archive digest in PROCTOR_TASKS
	Index        int    `json:"index"`       // repetition of (agent, task), from 0
}

// checkID checks m.ID alone: it names results as well as the message.
func (m TrialMsg) checkID() error {
	switch {
	case m.ID == "":
		return fmt.Errorf("%w: no id", ErrBadTrial)
	case strings.ContainsFunc(m.ID, func(r rune) bool { return r == '/' || unicode.IsSpace(r) || unicode.IsControl(r) }):
		return fmt.Errorf("%w: id %q contains '/', a space or a control character", ErrBadTrial, m.ID)
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
	}
	if _, err := checkDigest(m.TaskDigest); err != nil {
		return fmt.Errorf("%w: trial %s: %w", ErrBadTrial, m.ID, err)
	}
	return nil
}

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
	ack, err := c.js.Publish(ctx, TrialSubject, data,
		jetstream.WithMsgID(m.ID), jetstream.WithExpectStream(TrialStream))
	if err != nil {
		return false, fmt.Errorf("publishing trial %s: %w", m.ID, err)
	}
	return ack.Duplicate, nil
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

// Next waits for a trial and returns it, until ctx is done. A message that
// is not a valid TrialMsg is terminated (never redelivered) and Next
// returns an error matching ErrBadTrial; call Next again.
func (c *Conn) Next(ctx context.Context) (*Job, error) {
	for {
		if err := ctxErr(ctx); err != nil {
			return nil, err
		}
		// One pull request at a time, each expiring on the server shortly
		// before pctx does (FetchContext sees to that), so that no trial is
		// delivered to a request nobody is reading any more.
		pctx, cancel := context.WithTimeout(ctx, c.pollWait)
		msg, err := c.consumer.Next(jetstream.FetchContext(pctx))
		expired := ctxErr(pctx) != nil
		cancel()
		if err != nil {
			if err := ctxErr(ctx); err != nil {
				return nil, err
			}
			if expired || errors.Is(err, nats.ErrTimeout) || errors.Is(err, jetstream.ErrNoMessages) {
				continue
			}
			return nil, fmt.Errorf("waiting for a trial: %w", err)
		}
		return newJob(msg)
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

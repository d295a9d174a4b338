package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Done is a worker's word that it finished a trial: its results are in
// the result bucket under Result, an archive whose digest is ResultDigest.
// Error says why the worker could not run the trial at all (no result);
// a trial that ran and failed has a result like any other.
type Done struct {
	Suite        string `json:"suite"`
	Trial        string `json:"trial"`             // the trial's ID
	Worker       string `json:"worker"`            // the worker's name
	Attempt      int    `json:"attempt,omitempty"` // the coordinator's publication of the trial this ran (TrialMsg.Attempt)
	Delivery     uint64 `json:"delivery"`          // the delivery of that message, from 1
	Result       string `json:"result,omitempty"`
	ResultDigest string `json:"result_digest,omitempty"`
	Error        string `json:"error,omitempty"`
	// Nonce is what the worker passed to proctor run --nonce, which the
	// bundle's verdict must hold.
	Nonce string `json:"nonce,omitempty"`
	// Key and Sig: the worker's signature (see Sign).
	Key string `json:"signer_key,omitempty"`
	Sig string `json:"sig,omitempty"`
}

func (d Done) check() error {
	switch {
	case !validToken(d.Suite):
		return fmt.Errorf("%w: done: suite %q", ErrBadTrial, d.Suite)
	case !ValidID(d.Trial):
		return fmt.Errorf("%w: done: trial %q", ErrBadTrial, d.Trial)
	case d.Result == "" && d.Error == "":
		return fmt.Errorf("%w: done: trial %s: neither a result nor an error", ErrBadTrial, d.Trial)
	}
	if d.Result != "" {
		if _, err := resultName(d.Trial, d.Result); err != nil {
			return err
		}
		if _, err := checkDigest(d.ResultDigest); err != nil {
			return fmt.Errorf("%w: done: trial %s: result_digest: %w", ErrBadTrial, d.Trial, err)
		}
	}
	return nil
}

func doneSubject(suite, trial string) string { return DoneSubjectPrefix + suite + "." + trial }

// PublishDone tells the trial's coordinator it is finished. A second Done
// for the same attempt, delivery and worker is dropped as a duplicate, so
// it is safe to retry; a Done of another (the trial ran twice) is not,
// and the coordinator keeps the first.
func (c *Conn) PublishDone(ctx context.Context, d Done) error {
	if err := d.check(); err != nil {
		return fmt.Errorf("publishing done: %w", err)
	}
	data, err := json.Marshal(d)
	if err != nil {
		return err
	}
	id := fmt.Sprintf("%s/%d/%d/%s", d.Trial, d.Attempt, d.Delivery, d.Worker)
	if _, err := c.js.Publish(ctx, doneSubject(d.Suite, d.Trial), data,
		jetstream.WithMsgID(id), jetstream.WithExpectStream(DoneStream)); err != nil {
		return fmt.Errorf("publishing done of trial %s: %w", d.Trial, err)
	}
	return nil
}

// Finished reports whether a Done of trial id of suite is waiting for its
// coordinator.
func (c *Conn) Finished(ctx context.Context, suite, id string) (bool, error) {
	if !validToken(suite) || !ValidID(id) {
		return false, fmt.Errorf("%w: suite %q, trial %q", ErrBadTrial, suite, id)
	}
	return hasSubject(ctx, c.done, doneSubject(suite, id))
}

// Completions is a coordinator's view of the Done stream of one suite: a
// durable consumer, so that a coordinator restarted reads on where the
// last one stopped.
type Completions struct {
	consumer jetstream.Consumer
	pollWait time.Duration
}

// Completions returns the Done messages of suite, creating the suite's
// consumer if it is not there.
func (c *Conn) Completions(ctx context.Context, suite string) (*Completions, error) {
	if !validToken(suite) {
		return nil, fmt.Errorf("%w: suite %q", ErrBadTrial, suite)
	}
	cons, err := c.done.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:     "DONE_" + suite,
		Description: "proctor coordinator of suite " + suite,
		AckPolicy:   jetstream.AckExplicitPolicy,
		// A coordinator killed while it holds a Done leaves it to the
		// next after this; one that is alive keeps it (DoneMsg.KeepAlive).
		AckWait:       DoneAckWait,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		FilterSubject: DoneSubjectPrefix + suite + ".>",
	})
	if err != nil {
		return nil, fmt.Errorf("creating the completions consumer of suite %s: %w", suite, err)
	}
	return &Completions{consumer: cons, pollWait: c.pollWait}, nil
}

// DoneMsg is one delivery of a Done to its coordinator.
type DoneMsg struct {
	Done Done
	msg  jetstream.Msg
}

// Next waits for the next Done until ctx is done. A message that is not a
// valid Done is terminated and Next returns an error matching ErrBadTrial.
func (cs *Completions) Next(ctx context.Context) (*DoneMsg, error) {
	msg, err := pull(ctx, cs.consumer, cs.pollWait)
	if err != nil {
		return nil, err
	}
	var d Done
	if err := json.Unmarshal(msg.Data(), &d); err != nil {
		msg.TermWithReason("not a done message")
		return nil, fmt.Errorf("%w: done message on %s: %w", ErrBadTrial, msg.Subject(), err)
	}
	if err := d.check(); err != nil {
		msg.TermWithReason("not a done message")
		return nil, err
	}
	if msg.Subject() != doneSubject(d.Suite, d.Trial) {
		msg.TermWithReason("subject and trial differ")
		return nil, fmt.Errorf("%w: done of trial %s came on %s", ErrBadTrial, d.Trial, msg.Subject())
	}
	return &DoneMsg{Done: d, msg: msg}, nil
}

// DoneAckWait is how long a Done may go unacked by its coordinator before
// it is delivered again.
const DoneAckWait = 30 * time.Second

// KeepAlive tells the server, every DoneAckWait/3 until stop is called,
// that the Done is still being recorded (a large result takes a while).
func (m *DoneMsg) KeepAlive() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(DoneAckWait / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				m.msg.InProgress()
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// Ack removes the Done for good; call it once what it says is recorded.
func (m *DoneMsg) Ack(ctx context.Context) error {
	if err := m.msg.DoubleAck(ctx); err != nil {
		return fmt.Errorf("done of trial %s: ack: %w", m.Done.Trial, err)
	}
	return nil
}

// Nak gives the Done back, to be delivered again after delay.
func (m *DoneMsg) Nak(delay time.Duration) error {
	if err := m.msg.NakWithDelay(delay); err != nil {
		return fmt.Errorf("done of trial %s: nak: %w", m.Done.Trial, err)
	}
	return nil
}

// DeleteCompletions removes the consumer of a suite that is finished.
func (c *Conn) DeleteCompletions(ctx context.Context, suite string) error {
	err := c.done.DeleteConsumer(ctx, "DONE_"+suite)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("removing the completions consumer of suite %s: %w", suite, err)
	}
	return nil
}

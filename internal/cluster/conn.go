package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Names of the JetStream resources the package creates.
const (
	TrialStream   = "PROCTOR_TRIALS"
	TrialSubjects = "proctor.trials.>"
	// TrialSubjectPrefix and the trial's ID make its subject: one subject
	// per trial, so that a coordinator can ask whether a trial is queued.
	TrialSubjectPrefix = "proctor.trials."
	WorkerConsumer     = "PROCTOR_WORKERS"
	TaskBucket         = "PROCTOR_TASKS"
	ResultBucket       = "PROCTOR_RESULTS"
	// DoneStream is the work queue of finished trials, from the workers to
	// the coordinators: subject DoneSubjectPrefix + suite + "." + trial ID.
	DoneStream        = "PROCTOR_DONE"
	DoneSubjects      = "proctor.done.>"
	DoneSubjectPrefix = "proctor.done."
	// WorkerBucket is a key-value bucket of the workers' heartbeats, each
	// forgotten HeartbeatTTL after it was written.
	WorkerBucket = "PROCTOR_WORKER_LIVENESS"
)

// Defaults for [Connect].
const (
	DefaultAckWait         = 30 * time.Second
	DefaultMaxAckPending   = 256
	DefaultDuplicateWindow = 10 * time.Minute
	// DefaultPollWait bounds one pull request of [Conn.Next]: a worker that
	// goes away leaves at most this long a pull request on the server.
	DefaultPollWait = 5 * time.Second
)

// Option configures [Connect].
type Option func(*config)

type config struct {
	natsOpts        []nats.Option
	ackWait         time.Duration
	maxAckPending   int
	duplicateWindow time.Duration
	pollWait        time.Duration
	bind            bool
}

// WithBind makes Connect use the worker consumer as it is when it exists,
// rather than setting its AckWait and MaxAckPending: for clients that only
// take trials or read the queue (workers, status), so that they leave the
// coordinator's settings alone.
func WithBind() Option { return func(c *config) { c.bind = true } }

// WithNATS passes options to nats.Connect.
func WithNATS(opts ...nats.Option) Option {
	return func(c *config) { c.natsOpts = append(c.natsOpts, opts...) }
}

// WithAckWait sets how long a delivered trial may go without an ack or an
// InProgress before it is redelivered. It is a property of the shared
// consumer, so the last Connect to set it wins: give every client the same.
func WithAckWait(d time.Duration) Option { return func(c *config) { c.ackWait = d } }

// WithMaxAckPending bounds how many trials may be delivered and not yet
// acked across all workers.
func WithMaxAckPending(n int) Option { return func(c *config) { c.maxAckPending = n } }

// WithDuplicateWindow sets how long the stream remembers trial IDs for
// deduplicating republished trials.
func WithDuplicateWindow(d time.Duration) Option {
	return func(c *config) { c.duplicateWindow = d }
}

// WithPollWait sets how long one pull request of [Conn.Next] waits.
func WithPollWait(d time.Duration) Option { return func(c *config) { c.pollWait = d } }

// Conn is a client of a Proctor cluster. It is safe for concurrent use;
// Close it when done.
type Conn struct {
	nc       *nats.Conn
	js       jetstream.JetStream
	stream   jetstream.Stream
	consumer jetstream.Consumer
	tasks    jetstream.ObjectStore
	results  jetstream.ObjectStore
	done     jetstream.Stream
	workers  jetstream.KeyValue
	pollWait time.Duration
}

// Connect connects to the NATS server at url and creates, or updates to
// the configuration given, the trial stream, the worker consumer and the
// two object stores. Doing so again with the same options changes nothing.
func Connect(ctx context.Context, url string, opts ...Option) (*Conn, error) {
	cfg := config{
		ackWait:         DefaultAckWait,
		maxAckPending:   DefaultMaxAckPending,
		duplicateWindow: DefaultDuplicateWindow,
		pollWait:        DefaultPollWait,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.ackWait <= 0 || cfg.maxAckPending <= 0 || cfg.duplicateWindow <= 0 || cfg.pollWait <= 0 {
		return nil, errors.New("connecting to cluster: ack wait, max ack pending, duplicate window and poll wait must be positive")
	}
	// Reconnect for ever: a worker outlives a restart of the server.
	natsOpts := append([]nats.Option{nats.Name("proctor"), nats.MaxReconnects(-1)}, cfg.natsOpts...)
	nc, err := nats.Connect(url, natsOpts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", redactURL(url), redactErr(err, url))
	}
	c := &Conn{nc: nc, pollWait: cfg.pollWait}
	if err := c.ensure(ctx, cfg); err != nil {
		nc.Close()
		return nil, err
	}
	return c, nil
}

func (c *Conn) ensure(ctx context.Context, cfg config) error {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return fmt.Errorf("opening jetstream: %w", err)
	}
	c.js = js
	c.stream, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        TrialStream,
		Description: "proctor trials waiting for a worker",
		Subjects:    []string{TrialSubjects},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Duplicates:  cfg.duplicateWindow,
		Discard:     jetstream.DiscardNew,
	})
	if err != nil {
		return fmt.Errorf("creating stream %s: %w", TrialStream, err)
	}
	ccfg := jetstream.ConsumerConfig{
		Durable:       WorkerConsumer,
		Description:   "proctor workers",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.ackWait,
		MaxDeliver:    -1, // a trial is retried until some worker acks it
		MaxAckPending: cfg.maxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		FilterSubject: TrialSubjects,
	}
	if cfg.bind {
		c.consumer, err = c.stream.Consumer(ctx, WorkerConsumer)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			c.consumer, err = c.stream.CreateConsumer(ctx, ccfg)
			if errors.Is(err, jetstream.ErrConsumerExists) { // made meanwhile
				c.consumer, err = c.stream.Consumer(ctx, WorkerConsumer)
			}
		}
	} else {
		c.consumer, err = c.stream.CreateOrUpdateConsumer(ctx, ccfg)
	}
	if err != nil {
		return fmt.Errorf("creating consumer %s: %w", WorkerConsumer, err)
	}
	c.done, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        DoneStream,
		Description: "proctor trials finished, for their coordinators",
		Subjects:    []string{DoneSubjects},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Duplicates:  cfg.duplicateWindow,
		Discard:     jetstream.DiscardNew,
	})
	if err != nil {
		return fmt.Errorf("creating stream %s: %w", DoneStream, err)
	}
	c.workers, err = js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      WorkerBucket,
		Description: "proctor workers' heartbeats",
		TTL:         HeartbeatTTL,
		Storage:     jetstream.MemoryStorage,
	})
	if err != nil {
		return fmt.Errorf("creating key-value bucket %s: %w", WorkerBucket, err)
	}
	c.tasks, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      TaskBucket,
		Description: "proctor task archives by digest",
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("creating object store %s: %w", TaskBucket, err)
	}
	c.results, err = js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      ResultBucket,
		Description: "proctor trial results",
		Storage:     jetstream.FileStorage,
	})
	if err != nil {
		return fmt.Errorf("creating object store %s: %w", ResultBucket, err)
	}
	return nil
}

// Close closes the connection. Jobs fetched through it and not acked are
// redelivered to other workers once their AckWait runs out.
func (c *Conn) Close() { c.nc.Close() }

// AckWait returns the worker consumer's AckWait as the server has it now:
// a worker keeps its trials alive well within it.
func (c *Conn) AckWait(ctx context.Context) (time.Duration, error) {
	ci, err := c.consumer.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading consumer %s: %w", WorkerConsumer, err)
	}
	return ci.Config.AckWait, nil
}

// Status is a snapshot of the trial queue.
type Status struct {
	Stored      uint64 // trials in the stream: waiting or in flight, not yet acked
	Pending     uint64 // trials not yet delivered to any worker
	InFlight    int    // trials delivered and not yet acked
	Redelivered int    // of InFlight, those delivered more than once
	Delivered   uint64 // deliveries so far, redeliveries included
	Acked       uint64 // ack floor: deliveries 1 … Acked are all acked (later ones may be too)
	Waiting     int    // workers' pull requests waiting for a trial
	Finished    uint64 // trials acked (finished) since the queue was made
	Tasks       uint64 // bytes stored in the task bucket
	Results     uint64 // bytes stored in the result bucket
}

// Status returns the queue's numbers as the server reports them now.
func (c *Conn) Status(ctx context.Context) (Status, error) {
	si, err := c.stream.Info(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("reading stream %s: %w", TrialStream, err)
	}
	ci, err := c.consumer.Info(ctx)
	if err != nil {
		return Status{}, fmt.Errorf("reading consumer %s: %w", WorkerConsumer, err)
	}
	st := Status{
		Stored:      si.State.Msgs,
		Pending:     ci.NumPending,
		InFlight:    ci.NumAckPending,
		Redelivered: ci.NumRedelivered,
		Delivered:   ci.Delivered.Consumer,
		Acked:       ci.AckFloor.Consumer,
		Waiting:     ci.NumWaiting,
		Finished:    si.State.LastSeq - si.State.Msgs,
	}
	for _, b := range []struct {
		os  jetstream.ObjectStore
		dst *uint64
	}{{c.tasks, &st.Tasks}, {c.results, &st.Results}} {
		s, err := b.os.Status(ctx)
		if err != nil {
			return Status{}, fmt.Errorf("reading object store status: %w", err)
		}
		*b.dst = s.Size()
	}
	return st, nil
}

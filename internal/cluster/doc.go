// Package cluster is the distributed work queue under `proctor cluster
// serve`, `proctor worker` and `proctor bench --cluster`: an embedded NATS
// server with JetStream ([Serve]), and a client ([Connect]) that publishes
// trials, hands them to workers one at a time, and keeps task archives and
// trial results in JetStream object stores.
//
// Names. Everything lives under a "PROCTOR_" prefix:
//
//	stream    PROCTOR_TRIALS    work queue (WorkQueuePolicy, file storage), subjects "proctor.trials.>";
//	                            trial ID is published to "proctor.trials.ID" with ID as the
//	                            JetStream message ID, so a republish within the duplicate
//	                            window (DuplicateWindow) is dropped, and [Conn.Queued] can
//	                            tell whether a trial is still there
//	consumer  PROCTOR_WORKERS   durable pull consumer on PROCTOR_TRIALS, explicit ack,
//	                            redelivered after AckWait unless acked or kept alive
//	stream    PROCTOR_DONE      work queue of finished trials, "proctor.done.SUITE.ID"
//	                            ([Conn.PublishDone]); each suite's coordinator reads its own
//	                            through the durable consumer DONE_SUITE ([Conn.Completions])
//	bucket    PROCTOR_TASKS     object store of task archives, named by their digest
//	bucket    PROCTOR_RESULTS   object store of results, named "trialID/name"
//	kv        PROCTOR_WORKER_LIVENESS  workers' heartbeats by name, kept HeartbeatTTL
//
// The archive digest is "sha256:" followed by the lower-case hex SHA-256 of
// the archive's bytes (not the task's Merkle digest of internal/task; binding
// one to the other is the caller's job).
//
// A worker's loop is [Conn.Next], [KeepAlive] while the trial runs, store
// its results with [Conn.PutResult], announce them with [Conn.PublishDone],
// and only then [Job.Ack]: a worker that
// dies before the ack leaves the trial to be redelivered after AckWait, so a
// trial is run at least once and its results are never lost to an early
// ack. Results must therefore be written so that a second run of the same
// trial replaces, rather than corrupts, the first.
//
// The package must never:
//
//   - trust an archive it did not hash: [Conn.PutTask] refuses bytes that
//     do not match the digest they are stored under, and [Conn.GetTask]
//     re-hashes what it reads and returns a [*TamperedError] (matching
//     [ErrTampered]) when the store holds something else;
//   - ack a job before its results are stored (the caller's side of the
//     contract, stated on [Job.Ack]);
//   - listen beyond loopback by default: [Serve] binds 127.0.0.1 unless told
//     otherwise. Anyone who can reach the server can read archives and
//     results and inject trials unless it is secured: TLS
//     ([ServeOptions].TLSCert and TLSKey) and either a token
//     ([ServeOptions].Token) or client certificates
//     ([ServeOptions].TLSClientCA, mutual TLS). Serve does not enforce that
//     pairing; `proctor cluster serve` does, refusing any other address
//     without both. Clients bring credentials as NATS users expect (user
//     and password or a token in the URL, or the files of a [ClientAuth]),
//     and an error from [Connect] never shows a password or token from the
//     URL.
//
// A [Conn] is safe for concurrent use; a [Job] belongs to the worker that
// fetched it, though its methods may be called from several goroutines (as
// [KeepAlive] does).
package cluster

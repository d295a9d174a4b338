// Package store is the crash-safe results store of `proctor bench`: one
// SQLite database, DIR/proctor.db, that holds the suite (its agents, tasks
// and run options), the plan of every trial, each trial's state and, once
// it has finished, its result.
//
// A store is written by one process at a time: [Open] takes an exclusive
// flock(2) on DIR/proctor.lock, which records the owner's pid, and holds it
// until [Store.Close] (or until the kernel releases it when the process
// dies). Every state change is one SQLite transaction in WAL mode with
// synchronous=FULL, so a result that [Store.Finish] has returned for is on
// disk, and a process killed at any moment leaves at most the trials it had
// claimed in the running state; [Store.Requeue] puts those back to pending
// when the suite is resumed.
//
// The package must never overwrite, "repair", migrate or delete a file that
// is not a Proctor store of a schema version it understands: a foreign or
// damaged DIR/proctor.db is reported as [ErrNotStore] and left byte for
// byte as it was. It never runs agents or graders itself and never reads
// trial directories; it only records what its caller tells it.
package store

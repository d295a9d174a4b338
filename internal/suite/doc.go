// Package suite runs many trials: every agent on every task, several times,
// a few at once, each an ordinary `proctor run` process with its own signed
// bundle under the suite directory, and the store (internal/store) as the
// source of truth for what is done.
//
// A suite survives its runner: a trial is claimed in the store before it
// starts and finished there, durably, only once its bundle is written.
// Killed at any moment (SIGKILL included), the runner leaves the store, the
// finished trials and nothing else: its trial processes die with it
// (parent-death signal), their sandboxes with them; Resume puts the trials
// that were running back in the queue, removes what they had written, and
// the next trial's start removes their scratch mounts and cgroups.
//
// It must never run a trial twice to completion, count a trial whose
// bundle is not on disk, or start more trials at once than the machine's
// CPUs and memory allow for the tasks' limits.
package suite

// Package audit keeps a trial's audit log: one append-only, hash-chained
// timeline (bundle.Timeline) of what happened to the trial, from the
// harness's steps (sandbox lifecycle, violations, limits hit) to what the
// agent tried (proxy and gateway decisions, attempts to open hidden paths
// or to connect anywhere).
//
// Each event is written through to a JSON-lines file as it is appended, so
// a trial that dies leaves a prefix anyone can check (ReadFile); the
// finished log goes into the signed bundle.
//
// Events the agent can cause are Observed, and bounded: past a number per
// kind and a total, they are counted, not kept, and Seal records how many
// of each kind were left out. An agent can thus neither flood the bundle
// nor make an event disappear without a trace. Events of the harness are
// Appended and never left out.
//
// The audit only records. It must never be what enforces isolation: the
// mounts, namespaces and filters do that whether or not anything is
// recorded, and nothing here may change an outcome.
package audit

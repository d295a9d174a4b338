// Package sandbox runs an untrusted process tree in isolation: its own user,
// mount, pid, network, ipc, uts and cgroup namespaces, a read-only root built
// from a host view or a directory, a seccomp filter, reduced capabilities,
// cgroup and rlimit limits, and a wall-clock deadline. It reports exactly how
// the tree ended.
//
// The work is split across two processes of the same binary:
//
//   - the host side (Run) validates the Spec, creates the cgroup, starts the
//     child in new namespaces, feeds it the spec, copies its output under a cap,
//     enforces the deadline and collects the result;
//   - the init side (RunInit, behind the hidden "__sandbox-init" subcommand) is
//     pid 1 of the new pid namespace: it builds the mount tree, pivots into it,
//     drops privileges, installs the seccomp filter, starts the command and
//     reaps every process until the command ends, then kills the rest.
//
// The package must never weaken isolation silently: a step that cannot be
// applied is an error (exit 125 at the CLI), except for resource limits when the
// caller asked for AllowDegraded, and then every missing limit is named in
// Result.Degraded. It knows nothing of tasks, grading or signing.
package sandbox

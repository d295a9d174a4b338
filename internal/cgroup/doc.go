// Package cgroup gives one sandbox's process tree a cgroup of its own: it
// creates the cgroup nested under the caller's own cgroup (so the caller's
// limits keep applying), applies memory, pids and CPU limits, places
// processes in it, reports which limits were hit, kills everything inside it
// and removes it without leaving directories behind.
//
// It works on the unified hierarchy (cgroup v2, preferred) and on legacy
// per-controller hierarchies (cgroup v1), including hybrid machines where a
// cgroup2 mount exists but holds none of the controllers that matter. Where
// each controller lives is read from /proc/self/cgroup and
// /proc/self/mountinfo, never assumed.
//
// What the package must never do:
//
//   - weaken a limit silently: if a controller that a requested limit needs is
//     unusable, New fails with a *MissingControllersError and creates nothing,
//     and the caller decides whether to run without it;
//   - move processes it was not given (in particular it never moves the
//     caller out of its cgroup to satisfy the cgroup v2 "no internal
//     processes" rule: it explains the problem instead);
//   - signal a process that is not in the group (pids are pinned with a pidfd
//     and their membership re-checked before SIGKILL);
//   - remove a cgroup it did not create, except empty "proctor-<pid>-*"
//     leftovers of dead supervisors in CleanStale;
//   - know anything about sandboxes, tasks or namespaces.
package cgroup

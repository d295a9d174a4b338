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
// On cgroup v2 the caller's cgroup cannot give its children controllers
// while processes are in it (the "no internal processes" rule). New then
// moves the caller, if it is alone there, into a leaf
// "proctor-supervisor-<pid>" beside its groups, or, for root, creates the
// groups below "<cgroup2 root>/proctor", outside the caller's cgroup; New
// documents the order. Otherwise it explains the rule and how to run.
//
// What the package must never do:
//
//   - weaken a limit silently: if a controller that a requested limit needs is
//     unusable, New fails with a *MissingControllersError and creates nothing,
//     and the caller decides whether to run without it;
//   - move processes it was not given, with one exception: on v2, New moves
//     the calling process itself (never another) into its supervisor leaf,
//     and only when the caller is the sole process in its cgroup;
//   - signal a process that is not in the group (pids are pinned with a pidfd
//     and their membership re-checked before SIGKILL);
//   - remove a cgroup it did not create, except empty "proctor-<pid>-*"
//     leftovers and "proctor-supervisor-<pid>" leaves of dead supervisors in
//     CleanStale;
//   - know anything about sandboxes, tasks or namespaces.
package cgroup

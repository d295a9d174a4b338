// Package task loads benchmark tasks in the Harbor / Terminal-Bench 2 layout
// and computes their digests.
//
// A task is a directory:
//
//	task.toml         configuration: [agent], [verifier], [environment],
//	                  [metadata] as in Harbor, and [proctor], our own
//	instruction.md    what the agent is asked to do
//	environment/      the environment; environment/workspace is the default
//	                  workspace
//	tests/test.sh     the verifier's entry point
//	solution/solve.sh the reference solution (optional for running)
//
// Load reads and checks one into an immutable *Task: Harbor's field names
// and defaults, Proctor's [proctor] table, every path resolved inside the
// task directory. Digest gives a Merkle digest of a tree (a task, a
// workspace) that anyone can recompute from its documented encoding.
//
// Every error is a *Error whose message is one line naming the file and the
// field at fault, as in
//
//	/tasks/t1/task.toml: [proctor].grading: unknown value "x" (want "workspace" or "state")
//
// What the package must never do:
//
//   - run anything: not test.sh, not solve.sh, not git, not docker; it only
//     reads files;
//   - follow a symbolic link out of the task directory: paths are resolved
//     one component at a time through an os.Root, a link whose target leaves
//     the directory is an error, and Digest follows no link at all;
//   - accept a setting it cannot honour: a task that asks for network access
//     gets an error, not a sandbox without network; settings a task supplies
//     can only make the sandbox stricter;
//   - modify the task directory.
package task

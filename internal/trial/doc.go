// Package trial runs one agent on one task: prepare the environment and the
// workspace, run the agent in a copy-on-write sandbox, freeze its changes
// into a changeset once its whole process tree is dead, carry the permitted
// part of it into a second, fresh sandbox that runs the task's tests, and
// write the verdict.
//
// The agent is an adversary. This package never runs anything on the host
// over the agent's files, never follows a path that came out of a sandbox
// (the workspace package reads the changeset beneath its layers), and never
// gives the grader anything but the pristine layers plus the changes the
// policy permits; every change it refuses is a violation in the verdict.
package trial

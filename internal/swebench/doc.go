// Package swebench turns SWE-bench instances into Proctor tasks, so that a
// SWE-bench suite runs unmodified: the workspace is the repository at
// base_commit (sanitized by the trial: no later history), the grader applies
// test_patch itself and runs the tests it names with a JUnit report, and
// the harness resolves as SWE-bench does from that report (every
// FAIL_TO_PASS and PASS_TO_PASS test passed) with its tripwire.
//
// It must never run anything from an instance or a repository (it only
// reads the instance and clones the repository's objects), never write
// outside the output directory, and never accept an instance it cannot
// grade faithfully: a malformed one is an error naming its line and field.
package swebench

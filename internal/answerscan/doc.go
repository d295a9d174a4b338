// Package answerscan finds a task's hidden answers in what an agent brought
// with it: answer keys in its instructions or scaffold files (an AGENTS.md,
// a system prompt), a solution carried among its files or inside its
// binary, and the same sent to its model in a request.
//
// No sandbox can see such a cheat: the answer arrives with the submission.
// So the harness, which holds every task's hidden tests and solution,
// builds an Index of their distinctive lines (the fragment rule is in
// rules.go: no boilerplate, long and varied enough, not quoted from the
// instruction, not in anything the agent is given) and a Scan searches the
// agent's directory tree, its command, and each model request body for
// them. Text is compared as tokens, so a fragment re-indented, rewrapped,
// with CRLF line ends, or written into a JSON string (\n, \", \u0022
// escapes, once or twice over) is found; one reworded is not.
//
// An honest agent sends its model's own answers back in its next request,
// and a program it wrote may print what an expected-output file holds: in
// model requests, a fragment counts only when it is code and the model had
// not said most of it first (Scan.Response is what it said).
//
// It must never quote a fragment in a Hit (verdicts are published, hidden
// tests are not), never follow a symbolic link or open anything but a
// regular file beneath the tree it was given, never read past its Limits,
// and never run anything.
package answerscan

// Package grade reads a grader's result out of its sandbox: the reward a
// Harbor-style verifier writes to /logs/verifier, and the structured test
// reports it may write beside it (JUnit XML, `go test -json`, CTRF JSON as
// pytest-json-ctrf writes it), and decides from a report as SWE-bench does,
// with the harness's tripwire.
//
// Everything in the verifier's results directory was written inside a
// sandbox, so it is untrusted data: files are opened beneath the directory
// without following any symlink, read with a size cap, and parsed strictly.
// The package never runs anything and never writes.
package grade

// Package testcorpus builds, at test time and with the real tools, the
// inputs people really have: git repositories in every shape git makes
// (git.go), so that every guarantee is tested on them and not only on
// fixtures made to fit. Adding a shape that once broke a guarantee is one
// entry in a list.
//
// It is for tests only. It must never be imported by code that ships in
// the proctor binary, and never reach beyond this machine: partial clones
// are served by local file:// remotes.
package testcorpus

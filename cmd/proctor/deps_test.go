package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The proctor binary ships none of the test tooling: the packages that
// make test inputs (testcorpus), stand in for upstream hosts (standin),
// make images from directories (rootimage) and validate trajectories
// (trajectory/atiftest, with its JSON Schema validator) serve tests and
// examples only.
func TestBinaryDeps(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs the go command")
		}
		t.Skip("needs the go command")
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/proctor-sandbox/proctor/internal/trial") {
		t.Fatalf("go list -deps does not name internal/trial: %q", deps)
	}
	for _, d := range deps {
		for _, banned := range []string{"/internal/testcorpus", "/internal/standin", "/internal/rootimage", "/internal/trajectory/atiftest", "/santhosh-tekuri/jsonschema/v6"} {
			if strings.HasSuffix(d, banned) {
				t.Errorf("the proctor binary imports %s", d)
			}
		}
	}
}

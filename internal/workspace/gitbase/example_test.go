package gitbase_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/proctor-sandbox/proctor/internal/workspace/gitbase"
)

// A caller that reads bases from a task file names the field at fault.
func ExampleRefError() {
	var err error = &gitbase.RefError{Ref: "v9", Repo: "/srv/repos/django"}

	err = fmt.Errorf("git_base %w", err)
	fmt.Println(err)
	var re *gitbase.RefError
	fmt.Println(errors.As(err, &re), re.Ref, errors.Is(err, gitbase.ErrNoCommit))
	// Output:
	// git_base "v9": no such commit in /srv/repos/django
	// true v9 true
}

// Preparing the starting repository of a task. (Not run: it needs a
// repository and git.)
func ExamplePrepare() {
	dir, commit, err := gitbase.Prepare(context.Background(), "/srv/repos/django", "4a72da7", "/var/cache/proctor/gitbase")
	if err != nil {
		log.Fatal(err)
	}
	// dir is shared and read-only: mount it as the lower layer of the
	// sandbox's workspace.
	fmt.Println(dir, commit)
}

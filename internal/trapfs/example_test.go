//go:build linux

package trapfs_test

import (
	"fmt"
	"log"

	"github.com/proctor-sandbox/proctor/internal/trapfs"
)

// A trap over the hidden test directory and over a masked file. The clones
// go to the sandbox, which attaches each inside its own mount namespace:
//
//	unix.MoveMount(int(clone.Fd()), "", unix.AT_FDCWD, "/tests", unix.MOVE_MOUNT_F_EMPTY_PATH)
//
// After the run, Close; the records have all been delivered when it
// returns. (No Output: it needs root and /dev/fuse.)
func ExampleMount() {
	nodes := []trapfs.Node{
		{Path: "/tests", Dir: true},
		{Path: "/etc/shadow"},
	}
	trap, err := trapfs.Mount(nodes, func(a trapfs.Access) {
		// Called in order, from one goroutine; must not block for long.
		fmt.Printf("pid %d: %s %s %s\n", a.PID, a.Op, a.Path, a.Arg)
	})
	if err != nil {
		log.Fatal(err)
	}
	for i := range nodes {
		clone, err := trap.Clone(i)
		if err != nil {
			log.Fatal(err)
		}
		_ = clone // hand it to the sandbox (e.g. as an ExtraFiles entry), then close it
		clone.Close()
	}
	// … the sandbox runs …
	if err := trap.Close(); err != nil {
		log.Fatal(err)
	}
	if n := trap.Dropped(); n > 0 {
		log.Printf("%d records dropped", n)
	}
}

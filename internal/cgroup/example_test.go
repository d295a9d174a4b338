package cgroup_test

import (
	"errors"
	"fmt"
	"log"
	"os/exec"
	"strings"

	"github.com/proctor-sandbox/proctor/internal/cgroup"
)

// A supervisor decides what to do when controllers are missing: here it
// names them and would go on without limits.
func ExampleMissingControllersError() {
	var err error = &cgroup.MissingControllersError{Controllers: []string{"memory", "pids"}}

	var mc *cgroup.MissingControllersError
	if errors.As(err, &mc) {
		fmt.Println("proctor: warning: running without", strings.Join(mc.Controllers, ", "), "limits")
	}
	fmt.Println(errors.Is(err, cgroup.ErrMissingControllers))
	// Output:
	// proctor: warning: running without memory, pids limits
	// true
}

// The life of one sandbox's group. (Not run: it needs root.)
func ExampleNew() {
	if _, err := cgroup.CleanStale(); err != nil {
		log.Print(err) // best effort
	}
	g, err := cgroup.New(cgroup.UniqueName(), cgroup.Limits{MemoryBytes: 512 << 20, Pids: 256, CPUs: 1.5})
	if err != nil {
		log.Fatal(err)
	}
	defer g.Destroy()

	cmd := exec.Command("/bin/sh", "-c", "read x; exec make test")
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	if err := g.AddProc(cmd.Process.Pid); err != nil { // before it runs anything
		log.Fatal(err)
	}
	stdin.Write([]byte{1})
	stdin.Close()
	_ = cmd.Wait()

	st, _ := g.Stats()
	fmt.Println("oom kills:", st.OOMKills, "fork failures:", st.PidsLimitHits)
}

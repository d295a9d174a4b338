package seccomp_test

import (
	"fmt"
	"os"
	"runtime"

	"github.com/proctor-sandbox/proctor/internal/seccomp"
	"golang.org/x/sys/unix"
)

func ExampleNotifyProgramFor() {
	for _, arch := range []string{"amd64", "arm64"} {
		prog, err := seccomp.NotifyProgramFor(arch)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %d instructions\n", arch, len(prog))
	}
	// Output:
	// amd64: 16 instructions
	// arm64: 14 instructions
}

// The sandbox child installs the notify filter next to Program's, tells
// the supervisor the listener's number, and closes its copy once the
// supervisor has taken it.
func ExampleInstallNotify() {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("setting no_new_privs:", err)
		return
	}
	prog, err := seccomp.NotifyProgram()
	if err != nil {
		fmt.Println(err)
		return
	}
	listener, err := seccomp.InstallNotify(prog)
	if err != nil {
		fmt.Println(err)
		return
	}
	rc, err := listener.SyscallConn() // not Fd: that would make it blocking
	if err != nil {
		fmt.Println(err)
		return
	}
	rc.Control(func(fd uintptr) { fmt.Fprintf(os.Stdout, "listener %d\n", fd) })
	// ... wait until the supervisor says it has taken the listener ...
	listener.Close()
}

// The supervisor takes the listener from the child and records until every
// process under the filter has exited.
func ExampleWatch() {
	var child, fd int // the child's pid, and the number it announced
	listener, err := seccomp.TakeListener(child, fd)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer listener.Close()
	attempts := make(chan seccomp.Attempt, 1024)
	go func() {
		for a := range attempts {
			fmt.Printf("%s %s %s %d\n", a.Syscall, a.Family, a.Addr, a.Port)
		}
	}()
	// A full channel holds up the sandbox's next notified call: better
	// than losing a record, which a flood of calls could otherwise force.
	err = seccomp.Watch(listener, func(a seccomp.Attempt) { attempts <- a })
	close(attempts)
	if err != nil {
		fmt.Println(err)
	}
}

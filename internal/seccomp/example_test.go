package seccomp_test

import (
	"fmt"
	"runtime"

	"github.com/proctor-sandbox/proctor/internal/seccomp"
	"golang.org/x/sys/unix"
)

func ExampleProgramFor() {
	for _, arch := range []string{"amd64", "arm64"} {
		prog, err := seccomp.ProgramFor(arch)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %d instructions\n", arch, len(prog))
	}
	// Output:
	// amd64: 169 instructions
	// arm64: 153 instructions
}

func ExampleDenied() {
	for _, r := range seccomp.Denied() {
		if r.Syscall == "ioctl" || r.Syscall == "iopl" {
			fmt.Printf("%s %v: %s", r.Syscall, r.Arches, r.Action)
			if r.Condition != "" {
				fmt.Printf(" if %s", r.Condition)
			}
			fmt.Println()
		}
	}
	// Output:
	// iopl [amd64]: errno EPERM
	// ioctl [amd64 arm64]: errno EPERM if low 32 bits of cmd (args[1]) is TIOCSTI or TIOCLINUX
}

// Install is called once, in the sandbox child, on a goroutine locked to
// its thread, right after setting no_new_privs on that thread. The filter
// then holds for every thread and every process started afterwards.
func ExampleInstall() {
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		fmt.Println("setting no_new_privs:", err)
		return
	}
	prog, err := seccomp.Program()
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := seccomp.Install(prog); err != nil {
		fmt.Println(err)
		return
	}
}

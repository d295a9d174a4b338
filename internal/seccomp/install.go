package seccomp

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Install loads prog into the kernel as a seccomp filter for every thread
// of the calling process, with seccomp(SECCOMP_SET_MODE_FILTER,
// SECCOMP_FILTER_FLAG_TSYNC). Filters cannot be removed: the filter also
// applies to every process started afterwards.
//
// The caller must already have set no_new_privs
// (prctl(PR_SET_NO_NEW_PRIVS, 1)) on the calling OS thread: lock the
// goroutine to its thread with runtime.LockOSThread, set no_new_privs,
// then call Install on the same goroutine. TSYNC then sets no_new_privs on
// the other threads too. Install checks the flag and returns an error
// wrapping ErrNoNewPrivs if it is not set, even where the kernel would
// accept the filter without it (CAP_SYS_ADMIN).
//
// If the kernel refuses the filter the error wraps the unix.Errno it
// returned. If it cannot synchronise some thread it installs the filter
// nowhere and Install returns a *TSyncError naming that thread.
func Install(prog []unix.SockFilter) error {
	if len(prog) == 0 || len(prog) > maxInstructions {
		return fmt.Errorf("%w: %d instructions, want 1 to %d", ErrInvalidProgram, len(prog), maxInstructions)
	}

	// The no_new_privs check and seccomp(2) must see the same thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return fmt.Errorf("seccomp: reading no_new_privs: %w", err)
	}
	if nnp != 1 {
		return ErrNoNewPrivs
	}

	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP,
		unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC,
		uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		return fmt.Errorf("seccomp: loading filter (SECCOMP_SET_MODE_FILTER, TSYNC): %w", errno)
	}
	if r != 0 {
		// With TSYNC a positive return is the id of a thread that
		// could not take the filter.
		return &TSyncError{TID: int(r)}
	}
	return nil
}

package seccomp

import (
	"errors"
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// # Recording network attempts with seccomp user notification
//
// The sandbox has an empty network namespace: no connection can leave it.
// The notify filter adds a record of every attempt to connect or send to an
// address, for the audit timeline. It is stacked on top of Program's filter
// and is an observer only:
//
//   - It never decides. Every notified call is answered
//     SECCOMP_USER_NOTIF_FLAG_CONTINUE: the kernel then runs the call as if
//     the filter were absent, with the arguments and memory the caller has
//     at that moment. One exception, which the kernel imposes: the call
//     waits, and a signal that arrives before the supervisor has received
//     the notification interrupts it. The call is then restarted (and
//     notified again) if the handler has SA_RESTART, as Go's do, and fails
//     with EINTR otherwise, which connect and the send calls may do
//     anyway. After receipt only a fatal signal interrupts it (see
//     InstallNotify).
//   - It cannot be raced into deciding. The supervisor only reads the
//     caller's memory (process_vm_readv) to describe the address. Another
//     thread of the caller can change that memory between the read and the
//     kernel's own copy, so a record can name an address other than the one
//     used (or none). The record can be wrong; the outcome never is. The
//     read could stall only on memory whose faults the caller serves
//     itself: through userfaultfd (Program's filter refuses the system
//     call, and the sandbox's /dev has no userfaultfd node) or a FUSE
//     mount (mount is refused).
//   - Calls that do not name an address cost nothing: only connect, sendto
//     with a non-NULL destination, sendmsg and sendmmsg are notified (the
//     last two always, since their address is in memory the filter cannot
//     read). Everything else is SECCOMP_RET_ALLOW in this filter; Program's
//     filter, stacked with it, does the refusing, and the kernel applies the
//     most restrictive result of the two.
//   - It fails closed, never open. If the supervisor closes the listener,
//     every pending and every later notified call fails with ENOSYS: an
//     attempt is recorded or it does not happen.
//
// Foreign ABIs. Program's filter kills the process for a system call from
// any ABI but the native one (i386 int 0x80 and its socketcall, arm32,
// x32), and KILL_PROCESS takes precedence over USER_NOTIF, so those calls
// never reach the supervisor (TestNotifyStackedWithProgram checks this).
// The notify filter does not rely on that: it notifies every call from a
// foreign ABI too, which is still no decision (the answer is CONTINUE), so
// that without Program's filter such calls are recorded, undecoded, rather
// than slipping past the record.
//
// Handing the listener over. The listener belongs to the process that
// installs the filter, and that process's own sendmsg is notified: passing
// the listener with SCM_RIGHTS would wait for a supervisor that does not
// have the listener yet, forever. The supervisor takes it instead with
// pidfd_getfd (TakeListener, or ListenerFile on a descriptor it took).
// Every copy must be closed for the fail-safe above to act: a process that
// keeps one open after the handover makes waiting calls hang, not fail.
// A filter tree holds one listener only: a process under this filter
// cannot install another filter with a listener (seccomp(2) fails with
// EBUSY).

// ErrNotifyABI is returned by Watch when the kernel's seccomp notification
// structures differ in size from the ones this package was written for.
var ErrNotifyABI = errors.New("seccomp: kernel notification structures differ from this build's")

// ErrListenerNotPollable is returned by Watch for a listener file the Go
// runtime cannot poll: one made with os.NewFile while the descriptor was in
// blocking mode (use ListenerFile), or one whose Fd method has been called
// (Fd puts the descriptor in blocking mode, for every process that shares
// it: get the number with SyscallConn and Control instead).
var ErrListenerNotPollable = errors.New("seccomp: listener file is not in non-blocking, pollable mode")

// ErrNotListener is returned by ListenerFile and TakeListener for a
// descriptor that is not a seccomp notification listener.
var ErrNotListener = errors.New("seccomp: descriptor is not a seccomp notification listener")

// retUserNotif is SECCOMP_RET_USER_NOTIF.
const retUserNotif = unix.SECCOMP_RET_USER_NOTIF

// Names of the notified system calls, as Attempt.Syscall reports them.
const (
	sysConnect  = "connect"
	sysSendto   = "sendto"
	sysSendmsg  = "sendmsg"
	sysSendmmsg = "sendmmsg"
)

// notifyNr gives, for each architecture, the numbers of the notified
// system calls (arch/x86/entry/syscalls/syscall_64.tbl and the generic
// table). They are written out for the same reason as archTable's, and
// checked against unix.SYS_* on the native architecture by the tests.
var notifyNr = map[string]map[string]uint32{
	"amd64": {sysConnect: 42, sysSendto: 44, sysSendmsg: 46, sysSendmmsg: 307},
	"arm64": {sysConnect: 203, sysSendto: 206, sysSendmsg: 211, sysSendmmsg: 269},
}

// sendtoDestArg is the index of sendto's dest_addr argument.
const sendtoDestArg = 4

// NotifyProgram returns the notify filter for the architecture this binary
// runs on (runtime.GOARCH). It returns an error wrapping
// ErrUnsupportedArch on any architecture other than amd64 and arm64.
func NotifyProgram() ([]unix.SockFilter, error) {
	return NotifyProgramFor(runtime.GOARCH)
}

// NotifyProgramFor returns the notify filter for the named architecture,
// "amd64" or "arm64", whatever the host is. The result is a new slice that
// the caller owns. The filter returns SECCOMP_RET_USER_NOTIF for
//
//   - any call from a foreign ABI (seccomp_data.arch not the native one,
//     or on amd64 a number with the x32 bit set),
//   - connect, sendmsg and sendmmsg, whatever their arguments,
//   - sendto whose dest_addr (args[4]) is not NULL, both 32-bit words
//     compared, since a pointer is 64 bits wide,
//
// and SECCOMP_RET_ALLOW for everything else.
//
//	ld  [arch]
//	jeq AUDIT_ARCH, +1
//	ret USER_NOTIF            ; foreign ABI
//	ld  [nr]
//	jge 0x40000000, +0, +1    ; amd64 only: x32 ABI
//	ret USER_NOTIF
//	jeq connect, notify
//	jeq sendmsg, notify
//	jeq sendmmsg, notify
//	jeq sendto, +0, allow
//	ld  [args[4] low]
//	jeq 0, +0, notify
//	ld  [args[4] high]
//	jeq 0, allow, notify
//	allow: ret ALLOW
//	notify: ret USER_NOTIF
func NotifyProgramFor(arch string) ([]unix.SockFilter, error) {
	insns, err := notifyInstructionsFor(arch)
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assembling %s notify filter: %w", arch, err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return prog, nil
}

func notifyInstructionsFor(arch string) ([]bpf.Instruction, error) {
	t, ok := arches[arch]
	nr, okNr := notifyNr[arch]
	if !ok || !okNr {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedArch, arch)
	}
	notify := bpf.RetConstant{Val: retUserNotif}
	allow := bpf.RetConstant{Val: retAllow}

	insns := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: t.auditArch, SkipTrue: 1},
		notify,
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if t.killX32 {
		insns = append(insns,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			notify,
		)
	}
	// The tail, numbered from 0: the jump offsets count the instructions
	// skipped, so a jump from i to allow (8) skips 8-i-1 and one to notify
	// (9) skips 9-i-1.
	insns = append(insns,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr[sysConnect], SkipTrue: 8},  // 0
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr[sysSendmsg], SkipTrue: 7},  // 1
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr[sysSendmmsg], SkipTrue: 6}, // 2
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr[sysSendto], SkipFalse: 4},  // 3
		loadArgLow(sendtoDestArg),                                          // 4
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 3},              // 5
		loadArgHigh(sendtoDestArg),                                         // 6
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipTrue: 0, SkipFalse: 1}, // 7
		allow,  // 8
		notify, // 9
	)
	return insns, nil
}

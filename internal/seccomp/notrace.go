package seccomp

import (
	"fmt"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// ptrace requests that take hold of a process the caller did not start
// traced: with them, anything running as the same user could stop, read and
// rewrite another process (a grader's verifier, say).
const (
	ptraceAttach = 16     // PTRACE_ATTACH
	ptraceSeize  = 0x4206 // PTRACE_SEIZE
)

// NoAttachProgram returns a filter to stack on Program's where processes
// must not reach into one another: ptrace ATTACH and SEIZE, and
// process_vm_readv/writev, fail with EPERM. A process may still trace a
// child that asked for it (PTRACE_TRACEME), which is how the sandbox's init
// starts the command, and debug its own children that way. The filter
// checks the system call number only: Program's filter, stacked with it,
// already kills any call from a foreign ABI, and the stricter result wins.
func NoAttachProgram() ([]unix.SockFilter, error) {
	deny := bpf.RetConstant{Val: ActionEPERM.ret()}
	allow := bpf.RetConstant{Val: retAllow}
	insns := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offNr, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_PROCESS_VM_READV, SkipFalse: 1},
		deny,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_PROCESS_VM_WRITEV, SkipFalse: 1},
		deny,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_PTRACE, SkipFalse: 4},
		bpf.LoadAbsolute{Off: offArgs, Size: 4}, // the request, low word
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: ptraceAttach, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: ptraceSeize, SkipFalse: 1},
		deny,
		allow,
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assembling the no-attach filter: %w", err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return prog, nil
}

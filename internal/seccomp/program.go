package seccomp

import (
	"fmt"
	"runtime"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Offsets into struct seccomp_data, which the kernel hands to the filter:
//
//	struct seccomp_data {
//		int   nr;                  // offset 0
//		__u32 arch;                // offset 4
//		__u64 instruction_pointer; // offset 8
//		__u64 args[6];             // offset 16, 8 bytes each
//	};
//
// A BPF load reads 32 bits in host byte order. On a little-endian machine
// the low word of args[i] is at 16+8*i and the high word at 16+8*i+4; the
// filter only ever reads the low word.
const (
	offNr   = 0
	offArch = 4
	offArgs = 16
)

// maxInstructions is BPF_MAXINSNS, the kernel's limit on program length.
const maxInstructions = unix.BPF_MAXINSNS

// Program returns the filter for the architecture this binary runs on
// (runtime.GOARCH). It returns an error wrapping ErrUnsupportedArch on any
// architecture other than amd64 and arm64.
func Program() ([]unix.SockFilter, error) {
	return ProgramFor(runtime.GOARCH)
}

// ProgramFor returns the filter for the named architecture, "amd64" or
// "arm64", whatever the host is. The result is a new slice that the caller
// owns.
func ProgramFor(arch string) ([]unix.SockFilter, error) {
	insns, err := instructionsFor(arch)
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assembling %s filter: %w", arch, err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return prog, nil
}

// instructionsFor generates the filter for arch as BPF instructions. The
// layout is a straight line: every test either falls through to the next
// test or jumps forward over a short block that ends in a return, so no
// jump is longer than a few instructions.
//
//	ld  [arch]
//	jeq AUDIT_ARCH, +1        ; native ABI: skip the kill
//	ret KILL_PROCESS
//	ld  [nr]
//	jge 0x40000000, +0, +1    ; amd64 only: x32 ABI
//	ret KILL_PROCESS
//	jgt 469, +0, +1           ; newer than this build
//	ret ERRNO|ENOSYS
//	jeq mount, +0, +1         ; one pair per unconditional rule
//	ret ERRNO|EPERM
//	...
//	jeq clone, +0, +4         ; a block per argument rule
//	ld  [args[0] low]
//	jset CLONE_NEW*, +0, +1
//	ret ERRNO|EPERM
//	ret ALLOW
//	...
//	ret ALLOW
func instructionsFor(arch string) ([]bpf.Instruction, error) {
	t, ok := arches[arch]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedArch, arch)
	}

	var b builder
	b.emit(
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: t.auditArch, SkipTrue: 1},
		bpf.RetConstant{Val: ActionKill.ret()},
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	)
	if t.killX32 {
		b.emit(
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			bpf.RetConstant{Val: ActionKill.ret()},
		)
	}
	b.emit(
		bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: maxSyscall, SkipFalse: 1},
		bpf.RetConstant{Val: ActionENOSYS.ret()},
	)

	// From here on A holds nr, except inside an argument block, which
	// always ends in a return.
	for _, r := range syscallRules {
		nr, ok := t.nr[r.name]
		if !ok {
			continue // the system call does not exist on this arch
		}
		body, err := r.body()
		if err != nil {
			return nil, fmt.Errorf("seccomp: rule for %s: %w", r.name, err)
		}
		b.ifSyscall(nr, body)
	}
	b.emit(bpf.RetConstant{Val: retAllow})

	if b.err != nil {
		return nil, fmt.Errorf("seccomp: generating %s filter: %w", arch, b.err)
	}
	if len(b.insns) > maxInstructions {
		return nil, fmt.Errorf("seccomp: %s filter has %d instructions, the kernel accepts %d",
			arch, len(b.insns), maxInstructions)
	}
	return b.insns, nil
}

// body returns the instructions run when the system call number matches
// r. They always end in a return.
func (r syscallRule) body() ([]bpf.Instruction, error) {
	deny := bpf.RetConstant{Val: r.action.ret()}
	allow := bpf.RetConstant{Val: retAllow}
	switch r.test {
	case always:
		return []bpf.Instruction{deny}, nil

	case anyBit:
		return []bpf.Instruction{
			loadArgLow(r.arg),
			bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: r.mask, SkipFalse: 1},
			deny,
			allow,
		}, nil

	case valueIn:
		tail, err := denyIfIn(r.values, deny, allow)
		if err != nil {
			return nil, err
		}
		return append([]bpf.Instruction{loadArgLow(r.arg)}, tail...), nil

	case nonZero:
		return []bpf.Instruction{
			loadArgLow(r.arg),
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: 0, SkipTrue: 2},
			loadArgHigh(r.arg),
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: 0, SkipFalse: 0, SkipTrue: 1},
			deny,
			allow,
		}, nil

	case cmdValue:
		tail, err := denyIfIn(r.values, deny, allow)
		if err != nil {
			return nil, err
		}
		return append([]bpf.Instruction{
			loadArgLow(r.arg),
			// Not the command: skip the load and tail but its last
			// instruction, allow.
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.cmd, SkipFalse: uint8(len(tail))},
			loadArgLow(r.arg2),
		}, tail...), nil
	}
	return nil, fmt.Errorf("unknown argument test %d", r.test)
}

// denyIfIn compares A with each of values: on a match it runs deny, which
// follows the last compare; otherwise it falls through the compares and
// skips deny to reach allow. The result ends in deny, allow.
func denyIfIn(values []uint32, deny, allow bpf.Instruction) ([]bpf.Instruction, error) {
	n := len(values)
	if n == 0 || n > 250 {
		return nil, fmt.Errorf("%d values to compare, want 1 to 250", n)
	}
	var out []bpf.Instruction
	for i, v := range values {
		jeq := bpf.JumpIf{Cond: bpf.JumpEqual, Val: v, SkipTrue: uint8(n - 1 - i)}
		if i == n-1 {
			jeq.SkipFalse = 1
		}
		out = append(out, jeq)
	}
	return append(out, deny, allow), nil
}

// loadArgLow loads the low 32 bits of args[i] into A (little-endian
// layout; see offArgs).
func loadArgLow(i int) bpf.Instruction {
	return bpf.LoadAbsolute{Off: uint32(offArgs + 8*i), Size: 4}
}

// loadArgHigh loads the high 32 bits of args[i] into A.
func loadArgHigh(i int) bpf.Instruction {
	return bpf.LoadAbsolute{Off: uint32(offArgs + 8*i + 4), Size: 4}
}

// builder accumulates instructions and the first error met.
type builder struct {
	insns []bpf.Instruction
	err   error
}

func (b *builder) emit(insns ...bpf.Instruction) {
	b.insns = append(b.insns, insns...)
}

// ifSyscall emits a compare of A (the system call number) with nr that
// runs body on a match and skips it otherwise. body must end in a return
// because it may overwrite A.
func (b *builder) ifSyscall(nr uint32, body []bpf.Instruction) {
	if len(body) > 255 {
		// Classic BPF jump offsets are 8 bits.
		if b.err == nil {
			b.err = fmt.Errorf("block for syscall %d is %d instructions, longer than a jump can skip", nr, len(body))
		}
		return
	}
	b.emit(bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipFalse: uint8(len(body))})
	b.emit(body...)
}

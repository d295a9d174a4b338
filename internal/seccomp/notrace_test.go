package seccomp

import (
	"runtime"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The no-attach filter refuses taking hold of another process, and nothing
// else: tracing a child that asked for it, and the ptrace requests on it,
// still work.
func TestNoAttachProgram(t *testing.T) {
	prog, err := NoAttachProgram()
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]bpf.RawInstruction, len(prog))
	for i, f := range prog {
		raw[i] = bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatal("the filter has instructions x/net/bpf cannot decode")
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	eperm := ActionEPERM.ret()
	cases := []struct {
		name string
		nr   uint32
		arg0 uint64
		want uint32
	}{
		{"ptrace ATTACH", unix.SYS_PTRACE, ptraceAttach, eperm},
		{"ptrace SEIZE", unix.SYS_PTRACE, ptraceSeize, eperm},
		{"ptrace SEIZE, high word set", unix.SYS_PTRACE, 1<<32 | ptraceSeize, eperm},
		{"ptrace TRACEME", unix.SYS_PTRACE, 0, retAllow},
		{"ptrace DETACH", unix.SYS_PTRACE, 17, retAllow},
		{"ptrace CONT", unix.SYS_PTRACE, 7, retAllow},
		{"ptrace PEEKDATA", unix.SYS_PTRACE, 2, retAllow},
		{"process_vm_readv", unix.SYS_PROCESS_VM_READV, 0, eperm},
		{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV, 0, eperm},
		{"getpid", unix.SYS_GETPID, 0, retAllow},
		{"kill", unix.SYS_KILL, ptraceAttach, retAllow},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := seccompData{nr: c.nr, arch: testArches[runtime.GOARCH].audit}
			d.args[0] = c.arg0
			got, err := vm.Run(d.packet())
			if err != nil {
				t.Fatal(err)
			}
			if uint32(got) != c.want {
				t.Errorf("filter returned %#x, want %#x", got, c.want)
			}
		})
	}
}

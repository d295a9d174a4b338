package seccomp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Return values the tests expect, spelled out independently of Action.ret.
const (
	wantAllow = 0x7fff0000      // SECCOMP_RET_ALLOW
	wantKill  = 0x80000000      // SECCOMP_RET_KILL_PROCESS
	wantEPERM = 0x00050000 | 1  // SECCOMP_RET_ERRNO | EPERM
	wantNOSYS = 0x00050000 | 38 // SECCOMP_RET_ERRNO | ENOSYS
	auditI386 = 0x40000003      // AUDIT_ARCH_I386
	auditARM  = 0x40000028      // AUDIT_ARCH_ARM
	auditX64  = 0xC000003E      // AUDIT_ARCH_X86_64
	auditA64  = 0xC00000B7      // AUDIT_ARCH_AARCH64
	highWord  = uint64(1) << 32 // a bit the kernel truncates away
	allOnesHi = uint64(0xFFFF) << 48
)

// testArch is what the tests know about each architecture, written out
// independently of the tables under test.
type testArch struct {
	audit   uint32
	foreign []uint32 // compat audit arches that must be killed
	// denied is every system call the policy requires to fail with EPERM
	// on this arch, whatever its arguments.
	denied []string
	// ordinary system calls that must be allowed with any arguments.
	ordinary map[string]uint32
}

// deniedCommon is the deny-list both arches share.
var deniedCommon = []string{
	"mount", "umount2", "pivot_root", "open_tree", "open_tree_attr", "move_mount",
	"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"unshare", "setns", "bpf", "perf_event_open",
	"keyctl", "add_key", "request_key",
	"io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
	"open_by_handle_at", "name_to_handle_at",
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	"acct", "swapon", "swapoff", "syslog", "vhangup", "kcmp", "pidfd_getfd",
	"lookup_dcookie", "quotactl", "quotactl_fd", "nfsservctl", "fanotify_init",
}

// amd64Only are denied system calls that exist only on amd64.
var amd64Only = []string{
	"iopl", "ioperm", "uselib", "_sysctl", "create_module", "get_kernel_syms", "query_module",
}

var testArches = map[string]testArch{
	"amd64": {
		audit:   auditX64,
		foreign: []uint32{auditI386, auditA64},
		denied:  slices.Concat(deniedCommon, amd64Only),
		ordinary: map[string]uint32{
			"read": 0, "write": 1, "mmap": 9, "rt_sigreturn": 15, "getpid": 39,
			"execve": 59, "wait4": 61, "ptrace": 101, "personality": 135, "prctl": 157,
			"futex": 202, "exit_group": 231, "openat": 257, "seccomp": 317,
			"file_setattr": 469,
		},
	},
	"arm64": {
		audit:   auditA64,
		foreign: []uint32{auditARM, auditX64},
		denied:  deniedCommon,
		ordinary: map[string]uint32{
			"openat": 56, "read": 63, "write": 64, "personality": 92, "exit_group": 94,
			"futex": 98, "ptrace": 117, "rt_sigreturn": 139, "prctl": 167, "getpid": 172,
			"execve": 221, "mmap": 222, "wait4": 260, "seccomp": 277,
			"file_setattr": 469,
		},
	},
}

// seccompData models struct seccomp_data.
type seccompData struct {
	nr   uint32
	arch uint32
	args [6]uint64
}

// packet serialises d for x/net/bpf's VM.
//
// The kernel runs the filter over seccomp_data in host byte order
// (little-endian here): a 32-bit load at offset o yields the native word
// there. x/net/bpf's VM was written for network packets and loads
// big-endian. So every 32-bit word the filter may load is written
// big-endian at the offset where the kernel would find it: the VM then
// loads the same value the kernel would. A 64-bit argument is split the
// little-endian way, low word at 16+8*i and high word at 16+8*i+4.
func (d seccompData) packet() []byte {
	b := make([]byte, 64)
	binary.BigEndian.PutUint32(b[0:], d.nr)
	binary.BigEndian.PutUint32(b[4:], d.arch)
	// instruction_pointer (offset 8) stays zero.
	for i, a := range d.args {
		off := 16 + 8*i
		binary.BigEndian.PutUint32(b[off:], uint32(a))
		binary.BigEndian.PutUint32(b[off+4:], uint32(a>>32))
	}
	return b
}

// vmFor builds arch's filter with ProgramFor, turns the kernel-format
// instructions back into x/net/bpf instructions and loads them in its VM,
// so the tests evaluate exactly what Install would hand to the kernel.
func vmFor(t *testing.T, arch string) *bpf.VM {
	t.Helper()
	prog, err := ProgramFor(arch)
	if err != nil {
		t.Fatalf("ProgramFor(%q): %v", arch, err)
	}
	raw := make([]bpf.RawInstruction, len(prog))
	for i, f := range prog {
		raw[i] = bpf.RawInstruction{Op: f.Code, Jt: f.Jt, Jf: f.Jf, K: f.K}
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("%s: filter has instructions x/net/bpf cannot decode", arch)
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("%s: loading filter in VM: %v", arch, err)
	}
	return vm
}

type vmCase struct {
	name string
	data seccompData
	want uint32
}

// casesFor lists the crafted seccomp_data for arch and the return value
// the filter must give each.
func casesFor(t *testing.T, arch string) []vmCase {
	t.Helper()
	ta := testArches[arch]
	table := arches[arch]
	nr := func(name string) uint32 {
		n, ok := table.nr[name]
		if !ok {
			t.Fatalf("%s: no number for %s", arch, name)
		}
		return n
	}
	call := func(name string, args ...uint64) seccompData {
		d := seccompData{nr: nr(name), arch: ta.audit}
		copy(d.args[:], args)
		return d
	}
	var cs []vmCase
	add := func(name string, d seccompData, want uint32) {
		cs = append(cs, vmCase{name: name, data: d, want: want})
	}

	for _, name := range ta.denied {
		add(name, call(name), wantEPERM)
		add(name+"/args-all-ones", call(name, ^uint64(0), ^uint64(0), ^uint64(0)), wantEPERM)
	}
	for name, n := range ta.ordinary {
		add(name, seccompData{nr: n, arch: ta.audit}, wantAllow)
		d := seccompData{nr: n, arch: ta.audit}
		for i := range d.args {
			d.args[i] = ^uint64(0)
		}
		add(name+"/args-all-ones", d, wantAllow)
	}

	// clone: threads and forks pass, namespaces do not.
	const sigchld = 17
	add("clone/fork", call("clone", sigchld), wantAllow)
	add("clone/vfork", call("clone", unix.CLONE_VM|unix.CLONE_VFORK|unix.CLONE_PIDFD|sigchld), wantAllow)
	const threadFlags = unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS |
		unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID
	add("clone/thread", call("clone", threadFlags), wantAllow)
	add("clone/vm-thread-sigchld", call("clone", unix.CLONE_VM|unix.CLONE_THREAD|unix.CLONE_SIGHAND|sigchld), wantAllow)
	for _, f := range []struct {
		name string
		flag uint64
	}{
		{"CLONE_NEWNS", 0x00020000},
		{"CLONE_NEWCGROUP", 0x02000000},
		{"CLONE_NEWUTS", 0x04000000},
		{"CLONE_NEWIPC", 0x08000000},
		{"CLONE_NEWUSER", 0x10000000},
		{"CLONE_NEWPID", 0x20000000},
		{"CLONE_NEWNET", 0x40000000},
	} {
		add("clone/"+f.name, call("clone", f.flag), wantEPERM)
		add("clone/"+f.name+"+fork", call("clone", f.flag|sigchld), wantEPERM)
		add("clone/"+f.name+"+thread", call("clone", f.flag|threadFlags), wantEPERM)
		add("clone/"+f.name+"+high-word", call("clone", f.flag|allOnesHi), wantEPERM)
		// A namespace flag in another argument is not a namespace.
		add("clone/"+f.name+"-in-arg1", call("clone", sigchld, f.flag), wantAllow)
	}
	add("clone3", call("clone3"), wantNOSYS)
	add("clone3/with-args", call("clone3", 0x1000, 88), wantNOSYS)

	// socket and socketpair: only AF_VSOCK and AF_ALG are refused.
	for _, sc := range []string{"socket", "socketpair"} {
		for _, c := range []struct {
			name   string
			domain uint64
			want   uint32
		}{
			{"AF_UNIX", 1, wantAllow},
			{"AF_INET", 2, wantAllow},
			{"AF_INET6", 10, wantAllow},
			{"AF_NETLINK", 16, wantAllow},
			{"AF_PACKET", 17, wantAllow},
			{"AF_ALG", 38, wantEPERM},
			{"AF_VSOCK", 40, wantEPERM},
			{"AF_ALG+high-word", 38 | highWord, wantEPERM},
			{"AF_VSOCK+high-word", 40 | allOnesHi, wantEPERM},
		} {
			add(sc+"/"+c.name, call(sc, c.domain, unix.SOCK_STREAM, 0), c.want)
		}
		add(sc+"/AF_VSOCK-in-arg1", call(sc, 2, 40, 40), wantAllow)
	}

	// ioctl: compare the low 32 bits of cmd only.
	for _, c := range []struct {
		name string
		cmd  uint64
		want uint32
	}{
		{"TCGETS", 0x5401, wantAllow},
		{"TIOCGWINSZ", 0x5413, wantAllow},
		{"FIONREAD", 0x541B, wantAllow},
		{"TIOCSTI", 0x5412, wantEPERM},
		{"TIOCLINUX", 0x541C, wantEPERM},
		{"TIOCSTI+high-word", 0x5412 | highWord, wantEPERM},
		{"TIOCLINUX+high-word", 0x541C | allOnesHi, wantEPERM},
	} {
		add("ioctl/"+c.name, call("ioctl", 1, c.cmd, 0), c.want)
	}
	add("ioctl/TIOCSTI-as-fd", call("ioctl", 0x5412, 0x5401, 0), wantAllow)

	// Queued signals: never to pid 1 (init); anywhere else, as usual.
	for _, sc := range []string{"rt_sigqueueinfo", "rt_tgsigqueueinfo"} {
		add(sc+"/init", call(sc, 1, 11, 0x1000), wantEPERM)
		add(sc+"/init+high-word", call(sc, 1|highWord, 11, 0x1000), wantEPERM)
		add(sc+"/other", call(sc, 2, 11, 0x1000), wantAllow)
		add(sc+"/self-group", call(sc, 0, 11, 0x1000), wantAllow)
	}
	// pidfd_send_signal: a plain kill passes, caller-made siginfo does not.
	add("pidfd_send_signal/plain", call("pidfd_send_signal", 3, 15, 0, 0), wantAllow)
	add("pidfd_send_signal/info", call("pidfd_send_signal", 3, 11, 0x7ffd0000, 0), wantEPERM)
	add("pidfd_send_signal/info-high-word-only", call("pidfd_send_signal", 3, 11, 1<<32, 0), wantEPERM)
	// fcntl: F_SETSIG with a synchronous signal is refused, all else passes.
	const fSetsig, fSetown, fGetfl = 10, 8, 3
	for _, c := range []struct {
		name      string
		cmd, arg2 uint64
		want      uint32
	}{
		{"F_GETFL", fGetfl, 0, wantAllow},
		{"F_SETOWN-init", fSetown, 1, wantAllow},
		{"F_SETSIG-SIGIO", fSetsig, 29, wantAllow},
		{"F_SETSIG-RT", fSetsig, 40, wantAllow},
		{"F_SETSIG-0", fSetsig, 0, wantAllow},
		{"F_SETSIG-SIGSEGV", fSetsig, 11, wantEPERM},
		{"F_SETSIG-SIGBUS", fSetsig, 7, wantEPERM},
		{"F_SETSIG-SIGILL", fSetsig, 4, wantEPERM},
		{"F_SETSIG-SIGTRAP", fSetsig, 5, wantEPERM},
		{"F_SETSIG-SIGFPE", fSetsig, 8, wantEPERM},
		{"F_SETSIG-SIGSYS", fSetsig, 31, wantEPERM},
		{"F_SETSIG+high-words", fSetsig | highWord, 11 | allOnesHi, wantEPERM},
		{"F_GETFL-with-11", fGetfl, 11, wantAllow},
	} {
		add("fcntl/"+c.name, call("fcntl", 5, c.cmd, c.arg2), c.want)
	}

	// Numbers this build has not reviewed.
	for _, n := range []uint32{470, 471, 1000, 0x3FFFFFFF} {
		add(fmt.Sprintf("nr-%d", n), seccompData{nr: n, arch: ta.audit}, wantNOSYS)
	}
	add("nr-469", seccompData{nr: 469, arch: ta.audit}, wantAllow)

	// Foreign ABIs die whatever the number.
	for _, a := range ta.foreign {
		for _, n := range []uint32{0, 20, nr("mount"), 470} {
			add(fmt.Sprintf("arch-%#x/nr-%d", a, n), seccompData{nr: n, arch: a}, wantKill)
		}
	}
	add("arch-0", seccompData{nr: 0, arch: 0}, wantKill)

	// x32 is a second ABI on amd64 only; elsewhere the number is just
	// out of range.
	x32 := uint32(wantNOSYS)
	if arch == "amd64" {
		x32 = wantKill
	}
	for _, n := range []uint32{0, 39, nr("mount"), 0x7FFFFFFF, 0xFFFFFFFF} {
		add(fmt.Sprintf("x32/nr-%#x", n|0x40000000), seccompData{nr: n | 0x40000000, arch: ta.audit}, x32)
	}
	return cs
}

func TestProgramVM(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			vm := vmFor(t, arch)
			for _, c := range casesFor(t, arch) {
				t.Run(c.name, func(t *testing.T) {
					got, err := vm.Run(c.data.packet())
					if err != nil {
						t.Fatalf("VM: %v", err)
					}
					if uint32(got) != c.want {
						t.Errorf("nr=%d arch=%#x args=%#x: got %#x, want %#x",
							c.data.nr, c.data.arch, c.data.args, uint32(got), c.want)
					}
				})
			}
		})
	}
}

func TestProgramSize(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			prog, err := ProgramFor(arch)
			if err != nil {
				t.Fatalf("ProgramFor: %v", err)
			}
			if len(prog) == 0 || len(prog) >= 4096 {
				t.Fatalf("%d instructions, want 1 to 4095", len(prog))
			}
			t.Logf("%s: %d instructions", arch, len(prog))
		})
	}
}

// TestProgramLoads checks that the filter only ever reads nr, arch, the
// low words of args[0] to args[2] and the high word of args[2] (a pointer,
// tested whole for NULL), 32 bits at a time: reading another high word of a
// 32-bit argument, or instruction_pointer, would be a bug.
func TestProgramLoads(t *testing.T) {
	allowed := map[uint32]bool{0: true, 4: true, 16: true, 24: true, 32: true, 36: true}
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			insns, err := instructionsFor(arch)
			if err != nil {
				t.Fatal(err)
			}
			if ld, ok := insns[0].(bpf.LoadAbsolute); !ok || ld.Off != 4 {
				t.Errorf("first instruction is %v, want the arch load", insns[0])
			}
			for i, in := range insns {
				switch in := in.(type) {
				case bpf.LoadAbsolute:
					if in.Size != 4 || !allowed[in.Off] {
						t.Errorf("instruction %d: %v reads outside nr, arch and the args' low words", i, in)
					}
				case bpf.JumpIf, bpf.RetConstant:
				default:
					t.Errorf("instruction %d: unexpected %T", i, in)
				}
			}
		})
	}
}

func TestProgramForUnsupported(t *testing.T) {
	for _, arch := range []string{"386", "arm", "riscv64", "", "AMD64"} {
		t.Run(arch, func(t *testing.T) {
			prog, err := ProgramFor(arch)
			if !errors.Is(err, ErrUnsupportedArch) {
				t.Errorf("ProgramFor(%q) error = %v, want ErrUnsupportedArch", arch, err)
			}
			if prog != nil {
				t.Errorf("ProgramFor(%q) returned %d instructions with its error", arch, len(prog))
			}
		})
	}
}

// TestTables checks the per-arch tables against the policy: each denied
// name required by the tests has a number exactly where expected, no two
// names share a number, and every number is within the reviewed range.
func TestTables(t *testing.T) {
	for arch, ta := range testArches {
		t.Run(arch, func(t *testing.T) {
			table := arches[arch]
			if table.auditArch != ta.audit {
				t.Errorf("audit arch %#x, want %#x", table.auditArch, ta.audit)
			}
			seen := map[uint32]string{}
			for name, n := range table.nr {
				if other, dup := seen[n]; dup {
					t.Errorf("%s and %s both have number %d", name, other, n)
				}
				seen[n] = name
				if n > maxSyscall {
					t.Errorf("%s = %d is above maxSyscall %d", name, n, maxSyscall)
				}
			}
			for name, n := range ta.ordinary {
				if other, clash := seen[n]; clash {
					t.Errorf("ordinary %s = %d collides with %s in the table", name, n, other)
				}
			}
			for _, name := range ta.denied {
				if _, ok := table.nr[name]; !ok {
					t.Errorf("required denied syscall %s missing", name)
				}
			}
			if arch == "arm64" {
				for _, name := range slices.Concat(amd64Only, []string{"umount"}) {
					if _, ok := table.nr[name]; ok {
						t.Errorf("%s does not exist on arm64 but has a number", name)
					}
				}
			}
		})
	}
}

func TestDenied(t *testing.T) {
	rules := Denied()
	byName := map[string]Rule{}
	for _, r := range rules {
		if _, dup := byName[r.Syscall]; dup {
			t.Errorf("rule for %s listed twice", r.Syscall)
		}
		byName[r.Syscall] = r
		if r.Reason == "" {
			t.Errorf("rule for %s has no reason", r.Syscall)
		}
		if len(r.Arches) == 0 && !strings.HasPrefix(r.Syscall, "[") {
			t.Errorf("rule for %s applies to no architecture: misspelled name?", r.Syscall)
		}
	}
	want := map[string]Action{
		"[foreign arch]":    ActionKill,
		"[x32 ABI]":         ActionKill,
		"[nr > 469]":        ActionENOSYS,
		"clone3":            ActionENOSYS,
		"clone":             ActionEPERM,
		"socket":            ActionEPERM,
		"socketpair":        ActionEPERM,
		"ioctl":             ActionEPERM,
		"rt_sigqueueinfo":   ActionEPERM,
		"rt_tgsigqueueinfo": ActionEPERM,
		"pidfd_send_signal": ActionEPERM,
		"fcntl":             ActionEPERM,
	}
	for _, name := range slices.Concat(deniedCommon, amd64Only) {
		want[name] = ActionEPERM
	}
	for name, action := range want {
		t.Run(name, func(t *testing.T) {
			r, ok := byName[name]
			if !ok {
				t.Fatalf("no rule")
			}
			if r.Action != action {
				t.Errorf("action %q, want %q", r.Action, action)
			}
			conditional := slices.Contains([]string{"clone", "socket", "socketpair", "ioctl",
				"rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_send_signal", "fcntl"}, name)
			if conditional != (r.Condition != "") {
				t.Errorf("condition %q, want conditional=%v", r.Condition, conditional)
			}
		})
	}
	if len(byName) != len(want) {
		t.Errorf("%d rules, want %d: update the tests with the policy", len(byName), len(want))
	}
	for _, name := range []string{"personality", "ptrace", "seccomp", "execve"} {
		if _, ok := byName[name]; ok {
			t.Errorf("%s must stay allowed", name)
		}
	}
	if got := byName["iopl"].Arches; !slices.Equal(got, []string{"amd64"}) {
		t.Errorf("iopl applies to %v, want [amd64]", got)
	}
	if got := byName["mount"].Arches; !slices.Equal(got, []string{"amd64", "arm64"}) {
		t.Errorf("mount applies to %v, want [amd64 arm64]", got)
	}
}

package seccomp

import (
	"fmt"
	"sort"

	"golang.org/x/sys/unix"
)

// Action is what the filter does with a system call a rule matches.
type Action string

// The actions the filter uses. Allow is the default and has no rules.
const (
	ActionEPERM  Action = "errno EPERM"  // fail with EPERM
	ActionENOSYS Action = "errno ENOSYS" // fail with ENOSYS, as if absent
	ActionKill   Action = "kill"         // kill the whole process (SIGSYS)
)

// ret is the SECCOMP_RET_* value the filter returns for a.
func (a Action) ret() uint32 {
	switch a {
	case ActionEPERM:
		return unix.SECCOMP_RET_ERRNO | errnoEPERM
	case ActionENOSYS:
		return unix.SECCOMP_RET_ERRNO | errnoENOSYS
	case ActionKill:
		return unix.SECCOMP_RET_KILL_PROCESS
	}
	panic(fmt.Sprintf("seccomp: unknown action %q", a))
}

// retAllow is SECCOMP_RET_ALLOW.
const retAllow = unix.SECCOMP_RET_ALLOW

// Rule is one line of the policy, for documentation and tests. Rules are
// plain values; Denied returns a fresh slice on every call.
type Rule struct {
	// Syscall is the kernel's name for the system call, or a bracketed
	// description ("[foreign arch]", "[x32 ABI]", "[nr > 469]") for the
	// checks that apply before the number is looked at.
	Syscall string
	// Condition describes the argument test; empty when the rule applies to
	// every call.
	Condition string
	// Action is what the filter does when the rule matches.
	Action Action
	// Reason says why the rule exists.
	Reason string
	// Arches lists the architectures where the rule applies (where the
	// system call exists), in sorted order.
	Arches []string
}

// argTest says how a rule looks at an argument.
type argTest int

const (
	always   argTest = iota // no argument test
	anyBit                  // low word of args[arg] & mask != 0
	valueIn                 // low word of args[arg] is one of values
	nonZero                 // args[arg] (both words) != 0
	cmdValue                // low word of args[arg] == cmd and low word of args[arg2] is one of values
)

// syscallRule is the internal form of a Rule that matches a system call
// number, with what the generator needs to test its argument.
type syscallRule struct {
	name      string
	action    Action
	reason    string
	test      argTest
	arg       int
	mask      uint32
	values    []uint32
	cmd       uint32 // cmdValue: the value args[arg] must have
	arg2      int    // cmdValue: the argument compared with values
	condition string
}

// eperm returns unconditional EPERM rules for names, sharing one reason.
func eperm(reason string, names ...string) []syscallRule {
	rules := make([]syscallRule, len(names))
	for i, n := range names {
		rules[i] = syscallRule{name: n, action: ActionEPERM, reason: reason}
	}
	return rules
}

// syscallRules is the policy for known system call numbers, in the order
// the generator emits it. Names absent from an architecture's table are
// skipped for that architecture. It is built once and never modified.
var syscallRules = concat(
	eperm("mount and filesystem-attach calls could rearrange the sandbox's view of the filesystem",
		"mount", "umount2", "pivot_root", "open_tree", "open_tree_attr", "move_mount",
		"fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"),
	eperm("new or foreign namespaces would escape the sandbox's isolation",
		"unshare", "setns"),
	eperm("eBPF is a large kernel attack surface and can observe the host",
		"bpf"),
	eperm("perf events expose kernel and other processes' activity and are a frequent exploit vector",
		"perf_event_open"),
	eperm("the kernel keyring is not namespaced and may hold host secrets",
		"keyctl", "add_key", "request_key"),
	eperm("io_uring performs system calls the filter never sees and is a frequent exploit vector",
		"io_uring_setup", "io_uring_enter", "io_uring_register"),
	eperm("userfaultfd lets an attacker stall the kernel mid-copy, widening race windows",
		"userfaultfd"),
	eperm("file handles open files by inode, bypassing path-based confinement",
		"open_by_handle_at", "name_to_handle_at"),
	eperm("loading kernels or modules, or rebooting, affects the whole host",
		"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot"),
	eperm("raw I/O port access reaches hardware directly",
		"iopl", "ioperm"),
	eperm("the system clock is shared with the host",
		"settimeofday", "clock_settime", "clock_adjtime", "adjtimex"),
	eperm("process accounting writes host-wide records",
		"acct"),
	eperm("swap configuration is host-wide",
		"swapon", "swapoff"),
	eperm("the kernel log can leak host information and addresses",
		"syslog"),
	eperm("vhangup acts on the controlling terminal shared with the host",
		"vhangup"),
	eperm("kcmp reveals kernel object identity across processes",
		"kcmp"),
	eperm("pidfd_getfd steals file descriptors from other processes",
		"pidfd_getfd"),
	eperm("lookup_dcookie resolves kernel dentry cookies to host paths",
		"lookup_dcookie"),
	eperm("quota control is host-wide filesystem administration",
		"quotactl", "quotactl_fd"),
	eperm("obsolete system calls with no legitimate use and a history of bugs",
		"uselib", "_sysctl", "create_module", "get_kernel_syms", "query_module", "nfsservctl"),
	eperm("fanotify can watch and block file access on whole filesystems",
		"fanotify_init"),
	[]syscallRule{
		{
			name:   "clone3",
			action: ActionENOSYS,
			reason: "clone3 passes its flags in memory the filter cannot read; " +
				"ENOSYS makes C libraries fall back to clone",
		},
		{
			name:      "clone",
			action:    ActionEPERM,
			reason:    "new namespaces would escape the sandbox's isolation; threads and forks stay allowed",
			test:      anyBit,
			arg:       0,
			mask:      cloneNewMask,
			condition: "low 32 bits of flags (args[0]) contain any CLONE_NEW* flag",
		},
		{
			name:      "socket",
			action:    ActionEPERM,
			reason:    "vsock reaches the hypervisor host and AF_ALG is a frequent exploit vector",
			test:      valueIn,
			arg:       0,
			values:    []uint32{afVSOCK, afALG},
			condition: "low 32 bits of domain (args[0]) is AF_VSOCK or AF_ALG",
		},
		{
			name:      "socketpair",
			action:    ActionEPERM,
			reason:    "vsock reaches the hypervisor host and AF_ALG is a frequent exploit vector",
			test:      valueIn,
			arg:       0,
			values:    []uint32{afVSOCK, afALG},
			condition: "low 32 bits of domain (args[0]) is AF_VSOCK or AF_ALG",
		},
		{
			name:      "rt_sigqueueinfo",
			action:    ActionEPERM,
			reason:    "a queued signal to init (pid 1) is not one a kill sends: Go's runtime would take a synchronous one for its own fault and die",
			test:      valueIn,
			arg:       0,
			values:    []uint32{1},
			condition: "low 32 bits of pid (args[0]) is 1, the sandbox's init",
		},
		{
			name:      "rt_tgsigqueueinfo",
			action:    ActionEPERM,
			reason:    "a queued signal to init (pid 1) is not one a kill sends: Go's runtime would take a synchronous one for its own fault and die",
			test:      valueIn,
			arg:       0,
			values:    []uint32{1},
			condition: "low 32 bits of tgid (args[0]) is 1, the sandbox's init",
		},
		{
			name:      "pidfd_send_signal",
			action:    ActionEPERM,
			reason:    "a signal with caller-made siginfo could reach init through a pidfd; without siginfo it is an ordinary kill",
			test:      nonZero,
			arg:       2,
			condition: "info (args[2]) is not NULL",
		},
		{
			name:   "fcntl",
			action: ActionEPERM,
			reason: "F_SETSIG with a synchronous signal and F_SETOWN on init would have the kernel " +
				"send init a signal Go's runtime takes for its own fault",
			test:      cmdValue,
			arg:       1,
			cmd:       fcntlSETSIG,
			arg2:      2,
			values:    []uint32{sigILL, sigTRAP, sigBUS, sigFPE, sigSEGV, sigSYS},
			condition: "cmd (args[1]) is F_SETSIG and the signal (args[2]) is SIGILL, SIGTRAP, SIGBUS, SIGFPE, SIGSEGV or SIGSYS",
		},
		{
			name:      "ioctl",
			action:    ActionEPERM,
			reason:    "TIOCSTI and TIOCLINUX inject input into a terminal the sandbox shares with its user",
			test:      valueIn,
			arg:       1,
			values:    []uint32{ioctlTIOCSTI, ioctlTIOCLINUX},
			condition: "low 32 bits of cmd (args[1]) is TIOCSTI or TIOCLINUX",
		},
	},
)

func concat(groups ...[]syscallRule) []syscallRule {
	var all []syscallRule
	for _, g := range groups {
		all = append(all, g...)
	}
	return all
}

// Denied lists every rule of the policy, in the order the filter applies
// them: first the checks on the ABI and the number range, then the rules
// for individual system calls. Any call no rule matches is allowed.
func Denied() []Rule {
	rules := []Rule{
		{
			Syscall: "[foreign arch]",
			Action:  ActionKill,
			Reason: "a compat ABI (i386 int 0x80, arm32) numbers system calls differently " +
				"and would bypass every other rule",
			Arches: []string{"amd64", "arm64"},
		},
		{
			Syscall: "[x32 ABI]",
			Action:  ActionKill,
			Reason:  "x32 system calls (number with bit 0x40000000 set) would bypass every other rule",
			Arches:  []string{"amd64"},
		},
		{
			Syscall: fmt.Sprintf("[nr > %d]", maxSyscall),
			Action:  ActionENOSYS,
			Reason:  "system calls newer than this build are refused until reviewed",
			Arches:  []string{"amd64", "arm64"},
		},
	}
	for _, r := range syscallRules {
		var where []string
		for name, t := range arches {
			if _, ok := t.nr[r.name]; ok {
				where = append(where, name)
			}
		}
		sort.Strings(where)
		rules = append(rules, Rule{
			Syscall:   r.name,
			Condition: r.condition,
			Action:    r.action,
			Reason:    r.reason,
			Arches:    where,
		})
	}
	return rules
}

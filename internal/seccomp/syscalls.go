package seccomp

import "golang.org/x/sys/unix"

// The numbers below are written out rather than taken from unix.SYS_*:
// those constants exist only for the architecture being compiled, and
// ProgramFor must build the filter for either architecture on any host.
// sysnum_<arch>_test.go checks each table against unix.SYS_* on its own
// architecture.

// maxSyscall is the highest system call number reviewed for this build:
// 469, file_setattr, on both amd64 and arm64 (new system calls have shared
// numbers across architectures since 424, pidfd_send_signal). Anything
// higher is refused with ENOSYS until someone reviews it and raises this.
const maxSyscall = 469

// x32SyscallBit is __X32_SYSCALL_BIT: on amd64, system call numbers with
// this bit set select the x32 ABI.
const x32SyscallBit = 0x40000000

// Values from the kernel's UAPI headers. They are the same on amd64 and
// arm64 (both use the asm-generic errno and ioctl numbers), so they are
// written out instead of taken from per-architecture unix constants.
const (
	errnoEPERM  = 1  // EPERM
	errnoENOSYS = 38 // ENOSYS

	afALG   = 38 // AF_ALG
	afVSOCK = 40 // AF_VSOCK

	fcntlSETSIG = 10 // F_SETSIG: the signal sent when I/O is possible

	// The synchronous signals: Go's runtime cannot ignore them, and takes
	// one that does not come from kill or tkill for a fault of its own.
	sigILL  = 4
	sigTRAP = 5
	sigBUS  = 7
	sigFPE  = 8
	sigSEGV = 11
	sigSYS  = 31

	ioctlTIOCSTI   = 0x5412 // TIOCSTI: push a byte into a terminal's input
	ioctlTIOCLINUX = 0x541C // TIOCLINUX: includes console selection paste

	cloneNewNS     = 0x00020000 // CLONE_NEWNS
	cloneNewCgroup = 0x02000000 // CLONE_NEWCGROUP
	cloneNewUTS    = 0x04000000 // CLONE_NEWUTS
	cloneNewIPC    = 0x08000000 // CLONE_NEWIPC
	cloneNewUser   = 0x10000000 // CLONE_NEWUSER
	cloneNewPID    = 0x20000000 // CLONE_NEWPID
	cloneNewNet    = 0x40000000 // CLONE_NEWNET

	// cloneNewMask is every namespace flag clone(2) accepts. CLONE_NEWTIME
	// is absent: in clone(2) its bit is part of the exit signal, and only
	// clone3 and unshare, both refused, can use it.
	cloneNewMask = cloneNewNS | cloneNewCgroup | cloneNewUTS | cloneNewIPC |
		cloneNewUser | cloneNewPID | cloneNewNet
)

// archTable describes one architecture's system call ABI as the filter
// sees it. The tables are package-level values that are never modified.
type archTable struct {
	// auditArch is the AUDIT_ARCH_* value the kernel puts in
	// seccomp_data.arch for the native ABI.
	auditArch uint32
	// killX32 is set on amd64, where numbers with x32SyscallBit set are
	// a second ABI.
	killX32 bool
	// nr maps the kernel name of every system call the filter mentions to
	// its number. A name missing here does not exist on the architecture.
	nr map[string]uint32
}

var arches = map[string]*archTable{
	"amd64": &amd64Table,
	"arm64": &arm64Table,
}

// amd64Table follows arch/x86/entry/syscalls/syscall_64.tbl. x86_64 has no
// umount, only umount2.
var amd64Table = archTable{
	auditArch: unix.AUDIT_ARCH_X86_64,
	killX32:   true,
	nr: map[string]uint32{
		"ioctl":             16,
		"socket":            41,
		"socketpair":        53,
		"clone":             56,
		"fcntl":             72,
		"rt_sigqueueinfo":   129,
		"rt_tgsigqueueinfo": 297,
		"pidfd_send_signal": 424,
		"syslog":            103,
		"uselib":            134,
		"vhangup":           153,
		"pivot_root":        155,
		"_sysctl":           156,
		"adjtimex":          159,
		"acct":              163,
		"settimeofday":      164,
		"mount":             165,
		"umount2":           166,
		"swapon":            167,
		"swapoff":           168,
		"reboot":            169,
		"iopl":              172,
		"ioperm":            173,
		"create_module":     174,
		"init_module":       175,
		"delete_module":     176,
		"get_kernel_syms":   177,
		"query_module":      178,
		"quotactl":          179,
		"nfsservctl":        180,
		"lookup_dcookie":    212,
		"clock_settime":     227,
		"kexec_load":        246,
		"add_key":           248,
		"request_key":       249,
		"keyctl":            250,
		"unshare":           272,
		"perf_event_open":   298,
		"fanotify_init":     300,
		"name_to_handle_at": 303,
		"open_by_handle_at": 304,
		"clock_adjtime":     305,
		"setns":             308,
		"kcmp":              312,
		"finit_module":      313,
		"kexec_file_load":   320,
		"bpf":               321,
		"userfaultfd":       323,
		"io_uring_setup":    425,
		"io_uring_enter":    426,
		"io_uring_register": 427,
		"open_tree":         428,
		"move_mount":        429,
		"fsopen":            430,
		"fsconfig":          431,
		"fsmount":           432,
		"fspick":            433,
		"clone3":            435,
		"pidfd_getfd":       438,
		"mount_setattr":     442,
		"quotactl_fd":       443,
		"open_tree_attr":    467,
	},
}

// arm64Table follows the generic table (include/uapi/asm-generic/unistd.h,
// now scripts/syscall.tbl). It has no iopl, ioperm, umount, uselib,
// _sysctl, create_module, get_kernel_syms or query_module; nfsservctl and
// lookup_dcookie have numbers (the kernel answers ENOSYS) and are listed so
// that they stay refused if a kernel ever wires them up again.
var arm64Table = archTable{
	auditArch: unix.AUDIT_ARCH_AARCH64,
	killX32:   false,
	nr: map[string]uint32{
		"lookup_dcookie":    18,
		"ioctl":             29,
		"umount2":           39,
		"mount":             40,
		"pivot_root":        41,
		"nfsservctl":        42,
		"vhangup":           58,
		"quotactl":          60,
		"acct":              89,
		"unshare":           97,
		"kexec_load":        104,
		"init_module":       105,
		"delete_module":     106,
		"clock_settime":     112,
		"syslog":            116,
		"reboot":            142,
		"settimeofday":      170,
		"adjtimex":          171,
		"socket":            198,
		"socketpair":        199,
		"add_key":           217,
		"request_key":       218,
		"keyctl":            219,
		"clone":             220,
		"fcntl":             25,
		"rt_sigqueueinfo":   138,
		"rt_tgsigqueueinfo": 240,
		"pidfd_send_signal": 424,
		"swapon":            224,
		"swapoff":           225,
		"perf_event_open":   241,
		"fanotify_init":     262,
		"name_to_handle_at": 264,
		"open_by_handle_at": 265,
		"clock_adjtime":     266,
		"setns":             268,
		"kcmp":              272,
		"finit_module":      273,
		"bpf":               280,
		"userfaultfd":       282,
		"kexec_file_load":   294,
		"io_uring_setup":    425,
		"io_uring_enter":    426,
		"io_uring_register": 427,
		"open_tree":         428,
		"move_mount":        429,
		"fsopen":            430,
		"fsconfig":          431,
		"fsmount":           432,
		"fspick":            433,
		"clone3":            435,
		"pidfd_getfd":       438,
		"mount_setattr":     442,
		"quotactl_fd":       443,
		"open_tree_attr":    467,
	},
}

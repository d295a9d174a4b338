// Package seccomp provides Proctor's seccomp-BPF system call filter and the
// code that loads it into the kernel. It is pure Go: the classic BPF program
// is assembled with golang.org/x/net/bpf and installed with a raw seccomp(2)
// call, with no cgo and no libseccomp.
//
// # Policy
//
// The filter allows every system call this build knows about except a
// deny-list of dangerous ones, and fails closed for everything else. In
// order, for each system call:
//
//  1. If seccomp_data.arch is not the native audit architecture
//     (AUDIT_ARCH_X86_64 on amd64, AUDIT_ARCH_AARCH64 on arm64) the process
//     is killed. This stops the i386 (int 0x80) and arm32 compat entry
//     points, whose numbers mean different system calls.
//  2. On amd64, a number with the x32 bit (0x40000000) set kills the
//     process.
//  3. A number above the highest one reviewed for this build
//     (469, file_setattr, on both arches) fails with ENOSYS, so
//     system calls added by newer kernels stay refused until reviewed.
//  4. The deny-list listed by [Denied] fails with EPERM (clone3 with
//     ENOSYS, so that C libraries fall back to clone, whose flags the
//     filter can read).
//  5. clone with any CLONE_NEW* namespace flag, socket and socketpair for
//     AF_VSOCK and AF_ALG, and ioctl TIOCSTI and TIOCLINUX fail with EPERM.
//     Only the low 32 bits of those arguments are compared, because the
//     kernel truncates them to int or unsigned int before use.
//  6. Everything else is allowed.
//
// The argument checks read the low 32-bit word of a 64-bit argument at its
// own offset in seccomp_data. That is correct only on little-endian
// machines; both supported architectures (amd64 and arm64 as run by Linux)
// are little-endian.
//
// # What it must never do
//
// The package must never allow a system call it has not reviewed (numbers
// above 469 and foreign ABIs are refused), never compare a truncated
// argument on all 64 bits (0x1_00005412 is TIOCSTI to the kernel), never
// install a filter on one thread only (Install uses
// SECCOMP_FILTER_FLAG_TSYNC), and never install without no_new_privs: it
// refuses to, but it does not set no_new_privs itself; that is the
// caller's job, done on the same locked OS thread just before Install.
// It never uses cgo or links a C library.
package seccomp

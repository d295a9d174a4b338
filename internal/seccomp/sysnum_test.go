//go:build amd64 || arm64

package seccomp

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNativeTableMatchesUnix compares the hand-written table for the
// architecture under test with golang.org/x/sys/unix. The other
// architecture's table is checked when the tests run there.
func TestNativeTableMatchesUnix(t *testing.T) {
	if runtime.GOARCH != nativeArch {
		t.Fatalf("sysnum file for %s built on %s", nativeArch, runtime.GOARCH)
	}
	table := arches[nativeArch]
	for name, n := range table.nr {
		t.Run(name, func(t *testing.T) {
			want, ok := nativeSysnum[name]
			if !ok {
				t.Fatalf("no unix.SYS_* listed for %s in sysnum_%s_test.go", name, nativeArch)
			}
			if n != want {
				t.Errorf("table has %d, unix.SYS_* is %d", n, want)
			}
		})
	}
	for name, n := range testArches[nativeArch].ordinary {
		t.Run("ordinary/"+name, func(t *testing.T) {
			want, ok := nativeSysnum[name]
			if !ok {
				t.Fatalf("no unix.SYS_* listed for %s", name)
			}
			if n != want {
				t.Errorf("test table has %d, unix.SYS_* is %d", n, want)
			}
		})
	}
	if unix.SYS_FILE_SETATTR != maxSyscall {
		t.Errorf("maxSyscall is %d, unix.SYS_FILE_SETATTR is %d", maxSyscall, unix.SYS_FILE_SETATTR)
	}
	if table.auditArch != nativeAudit() {
		t.Errorf("audit arch %#x, want %#x", table.auditArch, nativeAudit())
	}
}

func nativeAudit() uint32 {
	if runtime.GOARCH == "amd64" {
		return unix.AUDIT_ARCH_X86_64
	}
	return unix.AUDIT_ARCH_AARCH64
}

// TestConstantsMatchUnix checks the values written out in syscalls.go
// against the unix package for this architecture.
func TestConstantsMatchUnix(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"EPERM", errnoEPERM, uint64(unix.EPERM)},
		{"ENOSYS", errnoENOSYS, uint64(unix.ENOSYS)},
		{"AF_ALG", afALG, unix.AF_ALG},
		{"AF_VSOCK", afVSOCK, unix.AF_VSOCK},
		{"TIOCSTI", ioctlTIOCSTI, unix.TIOCSTI},
		{"TIOCLINUX", ioctlTIOCLINUX, unix.TIOCLINUX},
		{"CLONE_NEWNS", cloneNewNS, unix.CLONE_NEWNS},
		{"CLONE_NEWCGROUP", cloneNewCgroup, unix.CLONE_NEWCGROUP},
		{"CLONE_NEWUTS", cloneNewUTS, unix.CLONE_NEWUTS},
		{"CLONE_NEWIPC", cloneNewIPC, unix.CLONE_NEWIPC},
		{"CLONE_NEWUSER", cloneNewUser, unix.CLONE_NEWUSER},
		{"CLONE_NEWPID", cloneNewPID, unix.CLONE_NEWPID},
		{"CLONE_NEWNET", cloneNewNet, unix.CLONE_NEWNET},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.got != c.want {
				t.Errorf("got %#x, unix has %#x", c.got, c.want)
			}
		})
	}
}

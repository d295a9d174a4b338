package seccomp

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// The files filter's numbers are this architecture's, and it assembles for
// both.
func TestFilesProgram(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		if _, err := FilesProgramFor(arch); err != nil {
			t.Errorf("%s: %v", arch, err)
		}
	}
	if _, err := FilesProgramFor("riscv64"); err == nil {
		t.Error("riscv64: no error")
	}
	want := map[string][]uintptr{
		"amd64": {unix.SYS_OPENAT, unix.SYS_OPENAT2, unix.SYS_NEWFSTATAT, unix.SYS_STATX, unix.SYS_FACCESSAT, unix.SYS_FACCESSAT2,
			unix.SYS_READLINKAT, unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_GETDENTS64},
		"arm64": {unix.SYS_OPENAT, unix.SYS_OPENAT2, unix.SYS_NEWFSTATAT, unix.SYS_STATX, unix.SYS_FACCESSAT, unix.SYS_FACCESSAT2,
			unix.SYS_READLINKAT, unix.SYS_EXECVE, unix.SYS_EXECVEAT, unix.SYS_GETDENTS64},
	}[runtime.GOARCH]
	for _, nr := range want {
		if _, ok := filesNr[runtime.GOARCH][uint32(nr)]; !ok {
			t.Errorf("system call %d is not notified", nr)
		}
	}
	a, _ := FilesProgramFor("amd64")
	b, _ := FilesProgramFor("amd64")
	if len(a) != len(b) {
		t.Fatal("two programs differ in length")
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("two programs differ at %d: the map's order leaked in", i)
		}
	}
}

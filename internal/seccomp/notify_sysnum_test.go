//go:build amd64 || arm64

package seccomp

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNotifyNumbersMatchUnix checks the notified system calls, and the
// tests' own tables, against golang.org/x/sys/unix on the native
// architecture, and the ioctl numbers against the two it defines.
func TestNotifyNumbersMatchUnix(t *testing.T) {
	want := map[string]uint32{
		"connect": unix.SYS_CONNECT, "sendto": unix.SYS_SENDTO,
		"sendmsg": unix.SYS_SENDMSG, "sendmmsg": unix.SYS_SENDMMSG,
		"socket": unix.SYS_SOCKET, "accept": unix.SYS_ACCEPT, "recvfrom": unix.SYS_RECVFROM,
		"recvmsg": unix.SYS_RECVMSG, "shutdown": unix.SYS_SHUTDOWN, "bind": unix.SYS_BIND,
		"listen": unix.SYS_LISTEN, "accept4": unix.SYS_ACCEPT4, "recvmmsg": unix.SYS_RECVMMSG,
	}
	check := func(table string, m map[string]uint32) {
		for name, nr := range m {
			if w, ok := want[name]; !ok || nr != w {
				t.Errorf("%s: %s = %d, unix.SYS_* is %d", table, name, nr, w)
			}
		}
	}
	check("notifyNr", notifyNr[runtime.GOARCH])
	check("testNet.notified", testNet[runtime.GOARCH].notified)
	check("testNet.quiet", testNet[runtime.GOARCH].quiet)
	if len(notifyNr[runtime.GOARCH]) != 4 {
		t.Errorf("notifyNr has %d calls, want 4", len(notifyNr[runtime.GOARCH]))
	}
	if ioctlNotifRecv != unix.SECCOMP_IOCTL_NOTIF_RECV || ioctlNotifSend != unix.SECCOMP_IOCTL_NOTIF_SEND {
		t.Errorf("RECV %#x, SEND %#x; unix has %#x, %#x", ioctlNotifRecv, ioctlNotifSend,
			unix.SECCOMP_IOCTL_NOTIF_RECV, unix.SECCOMP_IOCTL_NOTIF_SEND)
	}
	for _, c := range []struct {
		name      string
		got, want int
	}{
		{"AF_UNIX", afUNIX, unix.AF_UNIX}, {"AF_INET", afINET, unix.AF_INET},
		{"AF_INET6", afINET6, unix.AF_INET6}, {"AF_NETLINK", afNETLINK, unix.AF_NETLINK},
		{"AF_PACKET", afPACKET, unix.AF_PACKET}, {"AF_UNSPEC", afUNSPEC, unix.AF_UNSPEC},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, unix has %d", c.name, c.got, c.want)
		}
	}
}

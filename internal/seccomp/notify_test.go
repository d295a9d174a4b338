package seccomp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// wantNotify is SECCOMP_RET_USER_NOTIF, spelled out independently.
const wantNotify = 0x7fc00000

// testNet lists, per architecture, the notified system calls and some
// network calls that must not be notified, written out independently of
// notifyNr (notify_sysnum_test.go checks the native ones against unix).
var testNet = map[string]struct {
	notified map[string]uint32
	quiet    map[string]uint32
}{
	"amd64": {
		notified: map[string]uint32{"connect": 42, "sendto": 44, "sendmsg": 46, "sendmmsg": 307},
		quiet: map[string]uint32{"socket": 41, "accept": 43, "recvfrom": 45, "recvmsg": 47,
			"shutdown": 48, "bind": 49, "listen": 50, "accept4": 288, "recvmmsg": 299},
	},
	"arm64": {
		notified: map[string]uint32{"connect": 203, "sendto": 206, "sendmsg": 211, "sendmmsg": 269},
		quiet: map[string]uint32{"socket": 198, "bind": 200, "listen": 201, "accept": 202,
			"recvfrom": 207, "shutdown": 210, "recvmsg": 212, "accept4": 242, "recvmmsg": 243},
	},
}

// foreignNet are the network calls of the compat ABIs, by audit arch.
var foreignNet = map[uint32]map[string]uint32{
	auditI386: {"socketcall": 102, "connect": 362, "sendto": 369, "sendmsg": 370, "sendmmsg": 345},
	auditARM:  {"connect": 283, "sendto": 290, "sendmsg": 296, "sendmmsg": 374},
}

// x32Net are amd64's x32 network calls, x32 bit included.
var x32Net = map[string]uint32{
	"connect": 0x40000000 | 42, "sendto": 0x40000000 | 44,
	"sendmsg": 0x40000000 | 518, "sendmmsg": 0x40000000 | 538,
}

// vmOf loads prog, as Install would hand it to the kernel, in x/net/bpf's VM.
func vmOf(t *testing.T, prog []unix.SockFilter) *bpf.VM {
	t.Helper()
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
	return vm
}

func runVM(t *testing.T, vm *bpf.VM, d seccompData) uint32 {
	t.Helper()
	got, err := vm.Run(d.packet())
	if err != nil {
		t.Fatalf("VM: %v", err)
	}
	return uint32(got)
}

func notifyVM(t *testing.T, arch string) *bpf.VM {
	t.Helper()
	prog, err := NotifyProgramFor(arch)
	if err != nil {
		t.Fatalf("NotifyProgramFor(%q): %v", arch, err)
	}
	return vmOf(t, prog)
}

func notifyCasesFor(arch string) []vmCase {
	ta := testArches[arch]
	tn := testNet[arch]
	var cs []vmCase
	add := func(name string, d seccompData, want uint32) {
		cs = append(cs, vmCase{name: name, data: d, want: want})
	}
	call := func(nr uint32, args ...uint64) seccompData {
		d := seccompData{nr: nr, arch: ta.audit}
		copy(d.args[:], args)
		return d
	}
	ones := []uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}

	for _, name := range []string{"connect", "sendmsg", "sendmmsg"} {
		add(name, call(tn.notified[name]), wantNotify)
		add(name+"/args-all-ones", call(tn.notified[name], ones...), wantNotify)
	}
	sendto := tn.notified["sendto"]
	for _, c := range []struct {
		name string
		dest uint64
		want uint32
	}{
		{"dest-NULL", 0, wantAllow},
		{"dest-pointer", 0x7ffd_1000_0000, wantNotify},
		{"dest-low-word-only", 0x1000, wantNotify},
		{"dest-high-word-only", 1 << 32, wantNotify},
		{"dest-all-ones", ^uint64(0), wantNotify},
	} {
		add("sendto/"+c.name, call(sendto, 3, 0x1000, 64, 0, c.dest, 16), c.want)
	}
	// Only dest_addr counts: the other arguments, addrlen included, do not.
	add("sendto/dest-NULL-others-all-ones", call(sendto, ^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0), 0, ^uint64(0)), wantAllow)
	add("sendto/dest-NULL-addrlen-16", call(sendto, 3, 0x1000, 64, 0, 0, 16), wantAllow)

	for name, nr := range tn.quiet {
		add(name+"/args-all-ones", call(nr, ones...), wantAllow)
	}
	for name, nr := range ta.ordinary {
		add(name+"/args-all-ones", call(nr, ones...), wantAllow)
	}
	for _, name := range ta.denied {
		add("denied-"+name, call(arches[arch].nr[name]), wantAllow) // Program's filter refuses it
	}

	// Foreign ABIs are notified whatever the call: the notify filter
	// records them rather than let them past (Program's filter kills
	// them first; see TestNotifyStackedWithProgram).
	for _, a := range ta.foreign {
		for _, nr := range []uint32{0, 102, 362, 283, 42, 203, 470} {
			add(fmt.Sprintf("arch-%#x/nr-%d", a, nr), seccompData{nr: nr, arch: a}, wantNotify)
		}
	}
	add("arch-0", seccompData{nr: 42, arch: 0}, wantNotify)
	x32 := uint32(wantAllow) // arm64 has no x32: a number out of range
	if arch == "amd64" {
		x32 = wantNotify
	}
	for name, nr := range x32Net {
		add("x32/"+name, call(nr), x32)
	}
	add("x32/getpid", call(0x40000000|39), x32)
	return cs
}

func TestNotifyProgramVM(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			vm := notifyVM(t, arch)
			for _, c := range notifyCasesFor(arch) {
				t.Run(c.name, func(t *testing.T) {
					if got := runVM(t, vm, c.data); got != c.want {
						t.Errorf("nr=%d arch=%#x args=%#x: got %#x, want %#x",
							c.data.nr, c.data.arch, c.data.args, got, c.want)
					}
				})
			}
		})
	}
}

// stacked returns what the kernel does with a call for which stacked
// filters returned rets: the action that comes first in precedence, the
// lowest when compared as signed 32-bit numbers (seccomp_run_filters).
func stacked(rets ...uint32) uint32 {
	best := uint32(wantAllow)
	for _, r := range rets {
		if int32(r&0xffff0000) < int32(best&0xffff0000) {
			best = r
		}
	}
	return best
}

// TestNotifyStackedWithProgram checks the filters as the sandbox stacks
// them. The notify filter's guard against foreign ABIs is a second line:
// the first is Program's filter, which kills the process for any call of a
// foreign ABI, x32 included, before a notification could be sent. If that
// ever changed, this test fails: decide then whether the notify filter
// must decode those ABIs.
func TestNotifyStackedWithProgram(t *testing.T) {
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			main := vmFor(t, arch)
			notify := notifyVM(t, arch)
			both := func(d seccompData) (uint32, uint32) {
				m := runVM(t, main, d)
				return m, stacked(m, runVM(t, notify, d))
			}
			ta := testArches[arch]
			tn := testNet[arch]
			for name, nr := range tn.notified {
				d := seccompData{nr: nr, arch: ta.audit}
				d.args[sendtoDestArg] = 0x7ffd_0000
				if _, got := both(d); got != wantNotify {
					t.Errorf("native %s: stacked %#x, want USER_NOTIF", name, got)
				}
			}
			d := seccompData{nr: tn.notified["sendto"], arch: ta.audit}
			if _, got := both(d); got != wantAllow {
				t.Errorf("native sendto without dest_addr: stacked %#x, want ALLOW", got)
			}
			d = seccompData{nr: arches[arch].nr["mount"], arch: ta.audit}
			if _, got := both(d); got != wantEPERM {
				t.Errorf("mount: stacked %#x, want Program's EPERM", got)
			}
			for _, a := range ta.foreign {
				for name, nr := range foreignNet[a] {
					m, got := both(seccompData{nr: nr, arch: a})
					if m != wantKill || got != wantKill {
						t.Errorf("arch %#x %s: Program gives %#x, stacked %#x; want KILL_PROCESS for both", a, name, m, got)
					}
				}
			}
			if arch != "amd64" {
				return
			}
			for name, nr := range x32Net {
				m, got := both(seccompData{nr: nr, arch: ta.audit})
				if m != wantKill || got != wantKill {
					t.Errorf("x32 %s: Program gives %#x, stacked %#x; want KILL_PROCESS for both", name, m, got)
				}
			}
		})
	}
}

// TestNotifyProgramLoads checks that the filter reads only nr, arch and
// the two words of sendto's dest_addr.
func TestNotifyProgramLoads(t *testing.T) {
	allowed := map[uint32]bool{0: true, 4: true, 48: true, 52: true}
	for _, arch := range []string{"amd64", "arm64"} {
		t.Run(arch, func(t *testing.T) {
			insns, err := notifyInstructionsFor(arch)
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
						t.Errorf("instruction %d: %v reads outside nr, arch and args[4]", i, in)
					}
				case bpf.JumpIf, bpf.RetConstant:
				default:
					t.Errorf("instruction %d: unexpected %T", i, in)
				}
			}
		})
	}
}

func TestNotifyProgramForUnsupported(t *testing.T) {
	for _, arch := range []string{"386", "arm", "riscv64", ""} {
		prog, err := NotifyProgramFor(arch)
		if err == nil || prog != nil {
			t.Errorf("NotifyProgramFor(%q) = %d instructions, %v; want ErrUnsupportedArch", arch, len(prog), err)
		}
	}
}

func TestNotifyStructs(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"sizeof seccomp_notif", unsafe.Sizeof(notif{}), 80},
		{"sizeof seccomp_notif_resp", unsafe.Sizeof(notifResp{}), 24},
		{"sizeof seccomp_data", unsafe.Sizeof(notifData{}), 64},
		{"offsetof seccomp_notif.data", unsafe.Offsetof(notif{}.data), 16},
		{"offsetof seccomp_data.args", unsafe.Offsetof(notifData{}.args), 16},
		{"offsetof seccomp_notif_resp.flags", unsafe.Offsetof(notifResp{}.flags), 20},
		{"SECCOMP_IOCTL_NOTIF_RECV", ioctlNotifRecv, 0xc0502100},
		{"SECCOMP_IOCTL_NOTIF_SEND", ioctlNotifSend, 0xc0182101},
		{"SECCOMP_IOCTL_NOTIF_ID_VALID", ioctlNotifIDValid, 0x40082102},
		{"SECCOMP_IOCTL_NOTIF_SET_FLAGS", ioctlNotifSetFlags, 0x40082104},
	} {
		if c.got != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.got, c.want)
		}
	}
}

// sockaddrCases are test vectors for parseSockaddr; they also seed the fuzzer.
var sockaddrCases = []struct {
	name                 string
	raw                  []byte
	family, addr, unread string
	port                 int
}{
	{"inet", inet4(2, 80, 127, 0, 0, 1), "inet", "127.0.0.1", "", 80},
	{"inet-short", inet4(2, 80, 127, 0, 0, 1)[:6], "inet", "", "address of 6 bytes is shorter than 8", 0},
	{"inet6", inet6(443, netip.IPv6Loopback(), 0), "inet6", "::1", "", 443},
	{"inet6-scope", inet6(9, netip.MustParseAddr("fe80::1"), 2), "inet6", "fe80::1%2", "", 9},
	{"inet6-mapped", inet6(53, netip.MustParseAddr("::ffff:10.0.0.1"), 0), "inet6", "::ffff:10.0.0.1", "", 53},
	{"inet6-short", inet6(9, netip.IPv6Loopback(), 0)[:20], "inet6", "", "address of 20 bytes is shorter than 24", 0},
	{"unix-path", unixAddr("/tmp/s\x00junk"), "unix", "/tmp/s", "", 0},
	{"unix-path-no-nul", unixAddr("/run/x"), "unix", "/run/x", "", 0},
	{"unix-abstract", unixAddr("\x00name\x00x"), "unix", "@name\x00x", "", 0},
	{"unix-unnamed", unixAddr(""), "unix", "", "", 0},
	{"netlink", le16(16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), "netlink", "", "", 0},
	{"packet", le16(17, 0, 0x08), "packet", "", "", 0},
	{"vsock", vsock(2, 1024), "vsock", "2", "", 1024},
	{"vsock-short", vsock(2, 1024)[:8], "vsock", "", "address of 8 bytes is shorter than 12", 0},
	{"unspec", le16(0, 0, 0), "unspec", "", "", 0},
	{"unknown", le16(99, 1, 2), "unknown(99)", "", "", 0},
	{"one-byte", []byte{2}, "", "", "address of 1 bytes has no family", 0},
	{"empty", nil, "", "", "address of 0 bytes has no family", 0},
}

func le16(family uint16, rest ...byte) []byte {
	return append(binary.NativeEndian.AppendUint16(nil, family), rest...)
}

func inet4(family uint16, port uint16, ip ...byte) []byte {
	b := binary.BigEndian.AppendUint16(le16(family), port)
	return append(append(b, ip...), make([]byte, 8)...)
}

func inet6(port uint16, ip netip.Addr, scope uint32) []byte {
	b := binary.BigEndian.AppendUint16(le16(10), port)
	b = append(b, 0, 0, 0, 0) // flowinfo
	a := ip.As16()
	b = append(b, a[:]...)
	return binary.NativeEndian.AppendUint32(b, scope)
}

func unixAddr(path string) []byte { return append(le16(1), path...) }

func vsock(cid, port uint32) []byte {
	b := le16(40, 0, 0)
	b = binary.NativeEndian.AppendUint32(b, port)
	b = binary.NativeEndian.AppendUint32(b, cid)
	return append(b, 0, 0, 0, 0)
}

func TestParseSockaddr(t *testing.T) {
	for _, c := range sockaddrCases {
		t.Run(c.name, func(t *testing.T) {
			family, addr, port, unread := parseSockaddr(c.raw)
			if family != c.family || addr != c.addr || port != c.port || unread != c.unread {
				t.Errorf("parseSockaddr(%x) = %q %q %d %q, want %q %q %d %q",
					c.raw, family, addr, port, unread, c.family, c.addr, c.port, c.unread)
			}
		})
	}
}

// FuzzParseSockaddr checks that no address, however malformed, makes the
// parser fail, and that what it decodes round-trips: re-encoding an inet
// or inet6 result gives back the bytes it came from.
func FuzzParseSockaddr(f *testing.F) {
	if len(sockaddrCases) == 0 {
		f.Fatal("empty seed corpus")
	}
	for _, c := range sockaddrCases {
		f.Add(c.raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > maxSockaddr {
			raw = raw[:maxSockaddr]
		}
		family, addr, port, unread := parseSockaddr(raw)
		if family == "" && unread == "" {
			t.Fatalf("%x: no family and no reason", raw)
		}
		if unread != "" || port < 0 {
			return
		}
		switch family {
		case "inet":
			ip := netip.MustParseAddr(addr).As4()
			if got := inet4(2, uint16(port), ip[:]...); !bytes.Equal(got[:8], raw[:8]) {
				t.Errorf("%x decoded as %s:%d, which encodes as %x", raw, addr, port, got[:8])
			}
		case "inet6":
			ip := netip.MustParseAddr(addr)
			scope := uint32(0)
			if len(raw) >= 28 {
				scope = binary.NativeEndian.Uint32(raw[24:28])
			}
			got := inet6(uint16(port), ip.WithZone(""), scope)
			if !bytes.Equal(got[:4], raw[:4]) || !bytes.Equal(got[8:24], raw[8:24]) {
				t.Errorf("%x decoded as [%s]:%d, which encodes as %x", raw, addr, port, got)
			}
		case "unix":
			if len(addr) > 0 && addr[0] != '@' && bytes.IndexByte([]byte(addr), 0) >= 0 {
				t.Errorf("%x: path %q holds a NUL", raw, addr)
			}
		}
	})
}

// TestReadDestination reads addresses from this process's own memory, as
// Watch reads them from a caller's, for each call and length the kernel
// treats differently.
func TestReadDestination(t *testing.T) {
	var storage [maxSockaddr]byte
	copy(storage[:], inet4(2, 443, 10, 1, 2, 3))
	addr := uint64(uintptr(unsafe.Pointer(&storage)))
	type msghdr struct {
		name    uint64
		namelen int32
		_       [44]byte
	}
	var hdrs []*msghdr // kept alive to the end: the kernel reads them
	hdr := func(name uint64, n int32) uint64 {
		m := &msghdr{name: name, namelen: n}
		hdrs = append(hdrs, m)
		return uint64(uintptr(unsafe.Pointer(m)))
	}
	const bad = 0x10 // unmapped
	pid := os.Getpid()
	for _, c := range []struct {
		name    string
		syscall string
		args    [6]uint64
		wantLen int    // bytes read, -1 for none
		unread  string // prefix
	}{
		{"connect", sysConnect, [6]uint64{3, addr, 16}, 16, ""},
		{"connect/len-high-word-ignored", sysConnect, [6]uint64{3, addr, 1<<32 | 16}, 16, ""},
		{"connect/len-0", sysConnect, [6]uint64{3, addr, 0}, -1, "address length 0"},
		{"connect/len-negative", sysConnect, [6]uint64{3, addr, 0xffffffff}, -1, "address length -1 is invalid"},
		{"connect/len-129", sysConnect, [6]uint64{3, addr, 129}, -1, "address length 129 is invalid"},
		{"connect/len-128", sysConnect, [6]uint64{3, addr, 128}, 128, ""},
		{"connect/unmapped", sysConnect, [6]uint64{3, bad, 16}, -1, "reading address: "},
		{"sendto", sysSendto, [6]uint64{3, 0, 0, 0, addr, 16}, 16, ""},
		{"sendto/NULL", sysSendto, [6]uint64{3, 0, 0, 0, 0, 16}, -1, ""},
		{"sendmsg", sysSendmsg, [6]uint64{3, hdr(addr, 16)}, 16, ""},
		{"sendmsg/no-name", sysSendmsg, [6]uint64{3, hdr(0, 16)}, -1, ""},
		{"sendmsg/namelen-0", sysSendmsg, [6]uint64{3, hdr(addr, 0)}, -1, ""},
		{"sendmsg/namelen-clamped", sysSendmsg, [6]uint64{3, hdr(addr, 1000)}, 128, ""},
		{"sendmsg/namelen-negative", sysSendmsg, [6]uint64{3, hdr(addr, -5)}, -1, "address length -5 is invalid"},
		{"sendmsg/unmapped-msghdr", sysSendmsg, [6]uint64{3, bad}, -1, "reading msghdr: "},
		{"sendmmsg", sysSendmmsg, [6]uint64{3, hdr(addr, 16), 2}, 16, ""},
		{"sendmmsg/vlen-0", sysSendmmsg, [6]uint64{3, hdr(addr, 16), 0}, -1, ""},
		{"other", "getpid", [6]uint64{}, -1, "not a call"},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, why := readDestination(pid, c.syscall, c.args)
			if !strings.HasPrefix(why, c.unread) || (c.unread == "" && why != "") {
				t.Errorf("unread %q, want %q", why, c.unread)
			}
			if c.wantLen < 0 {
				if raw != nil {
					t.Errorf("read %d bytes, want none", len(raw))
				}
				return
			}
			if len(raw) != c.wantLen || !bytes.Equal(raw, storage[:c.wantLen]) {
				t.Errorf("read %x, want %x", raw, storage[:c.wantLen])
			}
		})
	}
	runtime.KeepAlive(&storage)
	runtime.KeepAlive(hdrs)
}

// TestReadTgid: the thread group id comes from the kernel's Tgid line, not
// from a thread name made to look like one.
func TestReadTgid(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old [16]byte
	if err := unix.Prctl(unix.PR_GET_NAME, uintptr(unsafe.Pointer(&old[0])), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&old[0])), 0, 0, 0)
	fake := []byte("x\nTgid:\t1\n\x00")
	if err := unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&fake[0])), 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	if got := readTgid(unix.Gettid()); got != os.Getpid() {
		t.Errorf("readTgid(this thread) = %d, want %d", got, os.Getpid())
	}
	if got := readTgid(0); got != 0 {
		t.Errorf("readTgid(0) = %d, want 0", got)
	}
}

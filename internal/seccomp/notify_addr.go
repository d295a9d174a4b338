package seccomp

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strconv"

	"golang.org/x/sys/unix"
)

// maxSockaddr is sizeof(struct sockaddr_storage), the most the kernel
// copies of an address.
const maxSockaddr = 128

// Address families, the same on amd64 and arm64.
const (
	afUNSPEC  = 0
	afUNIX    = 1
	afINET    = 2
	afINET6   = 10
	afNETLINK = 16
	afPACKET  = 17
)

// The layouts read here (struct msghdr, the sockaddrs) are those of a
// little-endian machine with 64-bit pointers: amd64 and arm64, the only
// architectures with a notify filter.

// readDestination reads the destination address of the notified call
// name, with arguments args, from the memory of thread tid. It returns the
// address's bytes (nil when the call names none), or why they could not be
// read. The lengths are treated as the kernel treats them, so that an
// address the kernel would refuse is reported as such rather than read.
func readDestination(tid int, name string, args [6]uint64) (raw []byte, why string) {
	switch name {
	case sysConnect:
		// connect(fd, addr, addrlen)
		return readSockaddr(tid, args[1], int32(args[2]), false)
	case sysSendto:
		// sendto(fd, buf, len, flags, dest_addr, addrlen)
		if args[sendtoDestArg] == 0 {
			return nil, ""
		}
		return readSockaddr(tid, args[4], int32(args[5]), false)
	case sysSendmmsg:
		// sendmmsg(fd, msgvec, vlen, flags): struct mmsghdr starts with
		// its struct msghdr.
		if uint32(args[2]) == 0 {
			return nil, ""
		}
		fallthrough
	case sysSendmsg:
		// sendmsg(fd, msg, flags). struct msghdr starts with
		// void *msg_name (8 bytes) and int msg_namelen.
		hdr, err := readMemory(tid, args[1], 12)
		if err != nil {
			return nil, fmt.Sprintf("reading msghdr: %v", err)
		}
		ptr := binary.NativeEndian.Uint64(hdr[0:8])
		if ptr == 0 {
			return nil, ""
		}
		return readSockaddr(tid, ptr, int32(binary.NativeEndian.Uint32(hdr[8:12])), true)
	}
	return nil, "not a call the notify filter notifies"
}

// readSockaddr reads an address of length n at ptr. connect and sendto
// refuse a length above maxSockaddr (move_addr_to_kernel) and hand a
// length of 0 to the protocol, which refuses it; sendmsg's msghdr, which
// msghdr selects, has a length above maxSockaddr clamped and one of 0
// taken as no address (__copy_msghdr).
func readSockaddr(tid int, ptr uint64, n int32, msghdr bool) ([]byte, string) {
	switch {
	case n < 0 || (n > maxSockaddr && !msghdr):
		return nil, fmt.Sprintf("address length %d is invalid", n)
	case n > maxSockaddr:
		n = maxSockaddr
	case n == 0 && msghdr:
		return nil, ""
	case n == 0:
		return nil, "address length 0"
	}
	b, err := readMemory(tid, ptr, int(n))
	if err != nil {
		return nil, fmt.Sprintf("reading address: %v", err)
	}
	return b, ""
}

// readMemory reads n bytes at addr in the memory of thread tid with
// process_vm_readv(2). A short read is an error: the kernel's own copy
// would fail (EFAULT) on the same range.
func readMemory(tid int, addr uint64, n int) ([]byte, error) {
	b := make([]byte, n)
	local := []unix.Iovec{{Base: &b[0]}}
	local[0].SetLen(n)
	remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: n}}
	got, err := unix.ProcessVMReadv(tid, local, remote, 0)
	if err != nil {
		return nil, err
	}
	if got != n {
		return nil, fmt.Errorf("short read: %d of %d bytes", got, n)
	}
	return b, nil
}

// readTgid returns the thread group id of thread tid from
// /proc/TID/status, or 0. The Tgid line follows Name, whose value the
// thread chooses but the kernel escapes (a newline becomes "\n"), so the
// first line that starts with "Tgid:" is the kernel's.
func readTgid(tid int) int {
	fd, err := unix.Open("/proc/"+strconv.Itoa(tid)+"/status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	defer unix.Close(fd)
	var buf [512]byte
	n, err := unix.Read(fd, buf[:])
	if err != nil || n <= 0 {
		return 0
	}
	_, rest, ok := bytes.Cut(buf[:n], []byte("\nTgid:\t"))
	if !ok {
		return 0
	}
	line, _, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return 0
	}
	pid, err := strconv.Atoi(string(line))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// parseSockaddr describes the address in b, which is at most maxSockaddr
// bytes as the caller's memory held it. It never fails: what it cannot
// decode it reports in why.
func parseSockaddr(b []byte) (family, addr string, port int, why string) {
	if len(b) < 2 {
		return "", "", 0, fmt.Sprintf("address of %d bytes has no family", len(b))
	}
	af := binary.NativeEndian.Uint16(b)
	short := func(want int) string {
		return fmt.Sprintf("address of %d bytes is shorter than %d", len(b), want)
	}
	switch af {
	case afUNSPEC:
		return "unspec", "", 0, ""
	case afINET:
		// struct sockaddr_in: family, port (big-endian), 4-byte address.
		if len(b) < 8 {
			return "inet", "", 0, short(8)
		}
		ip := netip.AddrFrom4([4]byte(b[4:8]))
		return "inet", ip.String(), int(binary.BigEndian.Uint16(b[2:4])), ""
	case afINET6:
		// struct sockaddr_in6: family, port, flowinfo, 16-byte
		// address, scope id.
		if len(b) < 24 {
			return "inet6", "", 0, short(24)
		}
		ip := netip.AddrFrom16([16]byte(b[8:24]))
		if len(b) >= 28 {
			if scope := binary.NativeEndian.Uint32(b[24:28]); scope != 0 {
				ip = ip.WithZone(strconv.FormatUint(uint64(scope), 10))
			}
		}
		return "inet6", ip.String(), int(binary.BigEndian.Uint16(b[2:4])), ""
	case afUNIX:
		// struct sockaddr_un: family, then the path. An abstract name
		// starts with a NUL and takes the whole length; a path ends at
		// its first NUL; nothing at all is an unnamed socket.
		path := b[2:]
		if len(path) > 0 && path[0] == 0 {
			return "unix", "@" + string(path[1:]), 0, ""
		}
		if i := bytes.IndexByte(path, 0); i >= 0 {
			path = path[:i]
		}
		return "unix", string(path), 0, ""
	case afNETLINK:
		return "netlink", "", 0, ""
	case afPACKET:
		return "packet", "", 0, ""
	case afVSOCK:
		// struct sockaddr_vm: family, reserved, port, cid.
		if len(b) < 12 {
			return "vsock", "", 0, short(12)
		}
		p := binary.NativeEndian.Uint32(b[4:8])
		cid := binary.NativeEndian.Uint32(b[8:12])
		return "vsock", strconv.FormatUint(uint64(cid), 10), int(p), ""
	}
	return fmt.Sprintf("unknown(%d)", af), "", 0, ""
}

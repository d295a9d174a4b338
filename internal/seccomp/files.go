package seccomp

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// # Recording file lookups with seccomp user notification
//
// The files filter is a second observer, for a trusted run only (the
// grader on the pristine environment plus the oracle's changes, whose
// tooling is being learned). It notifies every system call that names a
// path or lists a directory: open, openat, openat2, stat, lstat,
// newfstatat, statx, access, faccessat, faccessat2, readlink, readlinkat,
// execve, execveat and getdents64. Like the network filter it never
// decides: each call is answered CONTINUE.
//
// The path is read from the caller's memory while the call waits, and a
// relative one is joined to the caller's working directory or to the
// directory its dirfd names (both read from /proc/TID, where the kernel
// writes them as the caller's mount namespace sees them). A caller that
// races its own memory can make a record name another path: that is why
// this filter is for trusted runs only. What a record never says is
// whether the path existed: the caller learns that, and the learner checks
// it against the environment afterwards.
//
// A filter tree holds one listener only: a sandbox gets this filter or the
// network one, never both.

// File access kinds, as FileAccess.Op reports them.
const (
	OpOpen     = "open"    // open, openat, openat2
	OpStat     = "stat"    // stat, lstat, newfstatat, statx, access, faccessat(2), readlink(at)
	OpExec     = "exec"    // execve, execveat
	OpList     = "list"    // getdents64
	OpNotNamed = "unnamed" // a call on a descriptor with an empty path (AT_EMPTY_PATH)
	opForeign  = "foreign" // a call from a foreign ABI, undecoded
	opUnknown  = "unknown" // a native call this filter does not notify
)

// FileAccess is one notified call of the files filter.
type FileAccess struct {
	Time time.Time
	PID  int // the caller's thread group, in the supervisor's pid namespace; 0 if unknown
	TID  int
	Op   string
	// Path is absolute, as the caller's mount namespace names it, cleaned
	// lexically (symlinks are not resolved). "" when it could not be read.
	Path string
	// Write is set for an open that asks to write, create or truncate.
	Write bool
	// Dir is set for an open that asks for a directory (O_DIRECTORY): the
	// first step of a listing (opendir, os.listdir, Python's import system
	// filling its cache of a path entry).
	Dir bool
	// Argv, Env and Cwd are an exec's arguments, environment and working
	// directory, as the caller passed them (at most 1024 strings and 256 KiB
	// each).
	Argv, Env []string
	Cwd       string
	Unread    string // why something could not be read; "" if all was
}

type fileCall struct {
	op      string
	dirfd   int // index of the dirfd argument, -1 for none (relative to the cwd)
	path    int // index of the path argument, -1 for none
	fd      int // getdents64: index of the fd argument
	flags   int // index of the open flags, -1 for none
	argv    int // exec: index of argv, envp follows
	how     bool
	emptyAt int // index of flags that may hold AT_EMPTY_PATH, -1 for none
}

// filesNr gives, per architecture, the notified calls by number.
var filesNr = map[string]map[uint32]fileCall{
	"amd64": {
		2:   {op: OpOpen, dirfd: -1, path: 0, flags: 1, argv: -1, emptyAt: -1},
		257: {op: OpOpen, dirfd: 0, path: 1, flags: 2, argv: -1, emptyAt: -1},
		437: {op: OpOpen, dirfd: 0, path: 1, flags: -1, how: true, argv: -1, emptyAt: -1},
		4:   {op: OpStat, dirfd: -1, path: 0, flags: -1, argv: -1, emptyAt: -1},
		6:   {op: OpStat, dirfd: -1, path: 0, flags: -1, argv: -1, emptyAt: -1},
		262: {op: OpStat, dirfd: 0, path: 1, flags: -1, argv: -1, emptyAt: 3},
		332: {op: OpStat, dirfd: 0, path: 1, flags: -1, argv: -1, emptyAt: 2},
		21:  {op: OpStat, dirfd: -1, path: 0, flags: -1, argv: -1, emptyAt: -1},
		269: {op: OpStat, dirfd: 0, path: 1, flags: -1, argv: -1, emptyAt: -1},
		439: {op: OpStat, dirfd: 0, path: 1, flags: -1, argv: -1, emptyAt: 3},
		89:  {op: OpStat, dirfd: -1, path: 0, flags: -1, argv: -1, emptyAt: -1},
		267: {op: OpStat, dirfd: 0, path: 1, flags: -1, argv: -1, emptyAt: -1},
		59:  {op: OpExec, dirfd: -1, path: 0, flags: -1, argv: 1, emptyAt: -1},
		322: {op: OpExec, dirfd: 0, path: 1, flags: -1, argv: 2, emptyAt: 4},
		217: {op: OpList, dirfd: -1, path: -1, fd: 0, flags: -1, argv: -1, emptyAt: -1},
	},
	"arm64": {
		56:  {op: OpOpen, dirfd: 0, path: 1, flags: 2, argv: -1, emptyAt: -1},
		437: {op: OpOpen, dirfd: 0, path: 1, flags: -1, how: true, argv: -1, emptyAt: -1},
		79:  {op: OpStat, dirfd: 0, path: 1, flags: -1, argv: -1, emptyAt: 3},
		291: {op: OpStat, dirfd: 0, path: 1, flags: -1, argv: -1, emptyAt: 2},
		48:  {op: OpStat, dirfd: 0, path: 1, flags: -1, argv: -1, emptyAt: -1},
		439: {op: OpStat, dirfd: 0, path: 1, flags: -1, argv: -1, emptyAt: 3},
		78:  {op: OpStat, dirfd: 0, path: 1, flags: -1, argv: -1, emptyAt: -1},
		221: {op: OpExec, dirfd: -1, path: 0, flags: -1, argv: 1, emptyAt: -1},
		281: {op: OpExec, dirfd: 0, path: 1, flags: -1, argv: 2, emptyAt: 4},
		61:  {op: OpList, dirfd: -1, path: -1, fd: 0, flags: -1, argv: -1, emptyAt: -1},
	},
}

// FilesProgram returns the files filter for this architecture: USER_NOTIF
// for every call in filesNr and for any foreign ABI, ALLOW for the rest.
func FilesProgram() ([]unix.SockFilter, error) {
	return FilesProgramFor(runtime.GOARCH)
}

// FilesProgramFor is FilesProgram for the named architecture.
func FilesProgramFor(arch string) ([]unix.SockFilter, error) {
	t, ok := arches[arch]
	calls, okNr := filesNr[arch]
	if !ok || !okNr {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedArch, arch)
	}
	notify := bpf.RetConstant{Val: retUserNotif}
	insns := []bpf.Instruction{
		bpf.LoadAbsolute{Off: offArch, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: t.auditArch, SkipTrue: 1},
		notify,
		bpf.LoadAbsolute{Off: offNr, Size: 4},
	}
	if t.killX32 {
		insns = append(insns,
			bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32SyscallBit, SkipFalse: 1},
			notify,
		)
	}
	nrs := make([]uint32, 0, len(calls))
	for nr := range calls {
		nrs = append(nrs, nr)
	}
	slices.Sort(nrs) // one program for one architecture, whatever the map's order
	// Each jeq jumps over the rest of the list and the allow to notify.
	for i, nr := range nrs {
		insns = append(insns, bpf.JumpIf{Cond: bpf.JumpEqual, Val: nr, SkipTrue: uint8(len(nrs) - i)})
	}
	insns = append(insns, bpf.RetConstant{Val: retAllow}, notify)
	raw, err := bpf.Assemble(insns)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assembling %s files filter: %w", arch, err)
	}
	prog := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		prog[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return prog, nil
}

// WatchFiles is Watch for the files filter: it records every notified call
// and answers it CONTINUE, until every process under the filter is gone.
func WatchFiles(listener *os.File, record func(FileAccess)) error {
	if err := checkNotifSizes(); err != nil {
		return err
	}
	if err := listener.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("%w: %w", ErrListenerNotPollable, err)
	}
	rc, err := listener.SyscallConn()
	if err != nil {
		return fmt.Errorf("seccomp: listener: %w", err)
	}
	calls := filesNr[runtime.GOARCH]
	return serve(listener, rc, func(fd uintptr, n *notif) FileAccess { return inspectFile(fd, n, calls) }, record)
}

// receive takes one waiting notification, lets inspect read it, and
// answers CONTINUE. It reports got when it did, gone when none waits and no
// process uses the filter any more.
func receive(fd uintptr, inspect func(*notif)) (got, gone bool, err error) {
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, 0); err != nil {
			if err == unix.EINTR {
				continue
			}
			return false, false, fmt.Errorf("seccomp: polling the listener: %w", err)
		}
		if pfd[0].Revents&unix.POLLIN == 0 {
			return false, pfd[0].Revents&unix.POLLHUP != 0, nil
		}
		var n notif
		if err := ioctlPtr(fd, ioctlNotifRecv, unsafe.Pointer(&n)); err != nil {
			if err == unix.ENOENT || err == unix.EINTR {
				continue
			}
			return false, false, fmt.Errorf("seccomp: receiving a notification: %w", err)
		}
		inspect(&n)
		resp := notifResp{id: n.id, flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
		if err := ioctlPtr(fd, ioctlNotifSend, unsafe.Pointer(&resp)); err != nil && err != unix.ENOENT {
			return true, false, fmt.Errorf("seccomp: answering notification %d: %w", n.id, err)
		}
		return true, false, nil
	}
}

// Bounds on what one record reads from the caller.
const (
	maxPathRead  = 4096
	maxExecStrs  = 1024
	maxExecBytes = 256 << 10
)

func inspectFile(fd uintptr, n *notif, calls map[uint32]fileCall) FileAccess {
	a := FileAccess{Time: time.Now(), TID: int(n.pid)}
	t := arches[runtime.GOARCH]
	nr := uint32(n.data.nr)
	c, known := calls[nr]
	switch {
	case t == nil || n.data.arch != t.auditArch || (t.killX32 && nr&x32SyscallBit != 0):
		a.Op, a.Unread = opForeign, "foreign ABI: arguments not decoded"
		return a
	case !known:
		a.Op, a.Unread = opUnknown, fmt.Sprintf("nr=%d is not a call the files filter notifies", nr)
		return a
	case n.pid == 0:
		a.Op, a.Unread = c.op, "caller not visible in the supervisor's pid namespace"
		return a
	}
	a.Op = c.op
	args := n.data.args
	tid := strconv.Itoa(a.TID)
	switch {
	case c.op == OpList:
		a.Path, a.Unread = readLink("/proc/" + tid + "/fd/" + strconv.Itoa(int(int32(args[c.fd]))))
	default:
		p, err := readString(a.TID, args[c.path], maxPathRead)
		if err != nil {
			a.Unread = "path: " + err.Error()
			break
		}
		if p == "" {
			if c.emptyAt >= 0 && args[c.emptyAt]&unix.AT_EMPTY_PATH != 0 {
				a.Op = OpNotNamed
			}
			break
		}
		if !path.IsAbs(p) {
			base := "/proc/" + tid + "/cwd"
			if c.dirfd >= 0 && int32(args[c.dirfd]) != unix.AT_FDCWD {
				base = "/proc/" + tid + "/fd/" + strconv.Itoa(int(int32(args[c.dirfd])))
			}
			dir, why := readLink(base)
			if why != "" {
				a.Unread = why
				break
			}
			p = path.Join(dir, p)
		}
		a.Path = path.Clean(p)
		switch {
		case c.flags >= 0:
			a.Write = args[c.flags]&(unix.O_WRONLY|unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC) != 0
			a.Dir = args[c.flags]&unix.O_DIRECTORY != 0
		case c.how:
			if b, err := readMemory(a.TID, args[2], 8); err == nil {
				fl := *(*uint64)(unsafe.Pointer(&b[0]))
				a.Write = fl&(unix.O_WRONLY|unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC) != 0
				a.Dir = fl&unix.O_DIRECTORY != 0
			}
		}
	}
	if c.op == OpExec {
		var err error
		if a.Argv, err = readStrings(a.TID, args[c.argv]); err != nil {
			a.Unread = "argv: " + err.Error()
		}
		if a.Env, err = readStrings(a.TID, args[c.argv+1]); err != nil {
			a.Unread = "envp: " + err.Error()
		}
		a.Cwd, _ = readLink("/proc/" + tid + "/cwd")
	}
	pid := readTgid(a.TID)
	id := n.id
	if err := ioctlPtr(fd, ioctlNotifIDValid, unsafe.Pointer(&id)); err != nil {
		a.Unread = fmt.Sprintf("call ended before the read was confirmed (%v)", err)
		return a
	}
	a.PID = pid
	return a
}

func readLink(p string) (string, string) {
	s, err := os.Readlink(p)
	if err != nil {
		return "", err.Error()
	}
	if !path.IsAbs(s) {
		return "", fmt.Sprintf("%s names no path (%q)", p, s)
	}
	return s, ""
}

// readString reads a NUL-terminated string of at most max bytes at addr,
// page by page, so that a string near the end of a mapping is read.
func readString(tid int, addr uint64, max int) (string, error) {
	if addr == 0 {
		return "", fmt.Errorf("NULL")
	}
	var out []byte
	const page = 4096
	for len(out) < max {
		n := page - int(addr%page)
		if n > max-len(out) {
			n = max - len(out)
		}
		b, err := readMemory(tid, addr, n)
		if err != nil {
			return "", err
		}
		if i := bytes.IndexByte(b, 0); i >= 0 {
			return string(append(out, b[:i]...)), nil
		}
		out = append(out, b...)
		addr += uint64(n)
	}
	return "", fmt.Errorf("longer than %d bytes", max)
}

// readStrings reads a NULL-terminated array of string pointers.
func readStrings(tid int, addr uint64) ([]string, error) {
	if addr == 0 {
		return nil, nil
	}
	var out []string
	total := 0
	for i := 0; i < maxExecStrs; i++ {
		b, err := readMemory(tid, addr+uint64(8*i), 8)
		if err != nil {
			return out, err
		}
		ptr := *(*uint64)(unsafe.Pointer(&b[0]))
		if ptr == 0 {
			return out, nil
		}
		s, err := readString(tid, ptr, maxExecBytes-total)
		if err != nil {
			return out, err
		}
		total += len(s) + 1
		out = append(out, s)
	}
	return out, fmt.Errorf("more than %d strings", maxExecStrs)
}

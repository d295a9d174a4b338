package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// attackCommand makes the test binary act as the attacker inside a sandbox.
// Each attack prints what it observed, one fact a line; the tests on the host
// decide whether that is a breach.
const attackCommand = "__attack"

func attackMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "attack: no attack named")
		return 2
	}
	fn, ok := attacks[args[0]]
	if !ok {
		fmt.Fprintf(os.Stderr, "attack: unknown attack %q\n", args[0])
		return 2
	}
	if err := fn(args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "attack %s: %v\n", args[0], err)
		return 3
	}
	return 0
}

var attacks = map[string]func(args []string) error{
	"ns":     attackNS,
	"mounts": attackMounts,
	"attach": attackAttach,
	"initsigs": func([]string) error {
		b, err := os.ReadFile("/proc/1/status")
		if err != nil {
			return err
		}
		fmt.Print(string(b))
		return nil
	},
	"overlay-write": func(args []string) error {
		for _, l := range overlayWriteAttack(args[0]) {
			fmt.Println(l)
		}
		return nil
	},
	"ls":       attackLs,
	"stat":     attackStat,
	"read":     attackRead,
	"net":      attackNet,
	"syscalls": attackSyscalls,
	"mountsys": attackMountSyscalls,
	"x32":      attackX32,
	"ids":      attackIDs,
	"setuid":   attackSetuid,
	"euid":     func([]string) error { fmt.Println(os.Geteuid()); return nil },
	"env":      attackEnv,
	"fds":      attackFDs,
	"exe":      attackExe,
	"daemon":   attackDaemon,
	"sleeper":  attackSleeper,
	"alloc":    attackAlloc,
	"forks":    attackForks,
	"spew":     attackSpew,
	"spin":     attackSpin,
	"exit":     attackExit,
	"killinit": attackKillInit,
	"initnet":  attackInitNet,
	"fdloop":   attackFDLoop,
	"retrace":  attackRetrace,
	"sigqueue": attackSigqueue,
}

// attackFDLoop keeps its stdout and stderr open after it exits: it sends
// them, and each end of a socket pair into the other, over the pair, so only
// an unreachable loop of in-flight sockets holds them.
func attackFDLoop([]string) error {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return err
	}
	if err := unix.Sendmsg(fds[1], []byte{0}, unix.UnixRights(1, 2, fds[0]), nil, 0); err != nil {
		return err
	}
	if err := unix.Sendmsg(fds[0], []byte{0}, unix.UnixRights(fds[1]), nil, 0); err != nil {
		return err
	}
	fmt.Println("looped")
	os.Exit(0)
	return nil
}

// attackRetrace makes init its tracer again (PTRACE_TRACEME) and stops
// itself: init must not take the stop for its end. args: exit code.
func attackRetrace(args []string) error {
	n, _ := strconv.Atoi(args[0])
	got := make(chan os.Signal, 1)
	signal.Notify(got, syscall.SIGUSR1)
	// ptrace is per thread: trace this one and signal this one. A traced
	// thread stops at every signal, and init, its tracer, sees the stop.
	runtime.LockOSThread()
	if _, _, e := unix.RawSyscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0); e != 0 {
		return fmt.Errorf("PTRACE_TRACEME: %v", e)
	}
	_ = unix.Tgkill(os.Getpid(), unix.Gettid(), unix.SIGUSR1)
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		return fmt.Errorf("SIGUSR1 never arrived")
	}
	fmt.Println("still running")
	os.Exit(n)
	return nil
}

// attackSigqueue sends init queued signals (si_code SI_QUEUE), which Go's
// handler does not take for a user's kill. args: exit code.
func attackSigqueue(args []string) error {
	n, _ := strconv.Atoi(args[0])
	var info [128]byte
	*(*int32)(unsafe.Pointer(&info[8])) = -1 // si_code = SI_QUEUE
	for _, sig := range []syscall.Signal{syscall.SIGSEGV, syscall.SIGTRAP, syscall.SIGBUS, syscall.SIGILL, syscall.SIGFPE, syscall.SIGSYS, syscall.SIGABRT} {
		*(*int32)(unsafe.Pointer(&info[0])) = int32(sig)
		_, _, e := unix.RawSyscall(unix.SYS_RT_SIGQUEUEINFO, 1, uintptr(sig), uintptr(unsafe.Pointer(&info[0])))
		fmt.Printf("rt_sigqueueinfo-%d %s\n", sig, rawErr(0, 0, e))
		_, _, e = unix.RawSyscall6(unix.SYS_RT_TGSIGQUEUEINFO, 1, 1, uintptr(sig), uintptr(unsafe.Pointer(&info[0])), 0, 0)
		fmt.Printf("rt_tgsigqueueinfo-%d %s\n", sig, rawErr(0, 0, e))
	}
	// The kernel's own signals on I/O (F_SETOWN): SIGIO is ignored; a
	// synchronous signal cannot be chosen.
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return err
	}
	_, err := unix.FcntlInt(uintptr(p[0]), unix.F_SETOWN, 1)
	fmt.Printf("f_setown-init %s\n", errnoName(err))
	_, err = unix.FcntlInt(uintptr(p[0]), unix.F_SETSIG, int(syscall.SIGSEGV))
	fmt.Printf("f_setsig-segv %s\n", errnoName(err))
	fl, _ := unix.FcntlInt(uintptr(p[0]), unix.F_GETFL, 0)
	_, _ = unix.FcntlInt(uintptr(p[0]), unix.F_SETFL, fl|unix.O_ASYNC)
	_, _ = unix.Write(p[1], []byte("x"))
	pfd, err := unix.PidfdOpen(1, 0)
	if err == nil {
		*(*int32)(unsafe.Pointer(&info[0])) = int32(syscall.SIGSEGV)
		_, _, e := unix.RawSyscall6(unix.SYS_PIDFD_SEND_SIGNAL, uintptr(pfd), uintptr(syscall.SIGSEGV), uintptr(unsafe.Pointer(&info[0])), 0, 0, 0)
		fmt.Printf("pidfd_send_signal-info %s\n", rawErr(0, 0, e))
	}
	time.Sleep(100 * time.Millisecond)
	os.Exit(n)
	return nil
}

// attackInitNet lists the network interfaces every thread of init sees: a
// thread left in the host's network namespace would show the host's.
func attackInitNet([]string) error {
	tasks, err := os.ReadDir("/proc/1/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/1/task/" + t.Name() + "/net/dev")
		if err != nil {
			fmt.Printf("task-%s %s\n", t.Name(), errnoName(err))
			continue
		}
		var ifs []string
		for _, l := range strings.Split(string(b), "\n")[2:] {
			if name, _, ok := strings.Cut(strings.TrimSpace(l), ":"); ok {
				ifs = append(ifs, name)
			}
		}
		fmt.Printf("task-%s %s\n", t.Name(), strings.Join(ifs, ","))
	}
	return nil
}

// attackKillInit signals init (pid 1) with everything catchable; init must
// live on to report this command's own exit.
func attackKillInit([]string) error {
	// Every signal but SIGKILL and SIGSTOP (which the kernel keeps from pid 1),
	// the synchronous ones (SEGV, BUS, ILL, …) included.
	for s := syscall.Signal(1); s <= 64; s++ {
		if s == syscall.SIGKILL || s == syscall.SIGSTOP {
			continue
		}
		if err := syscall.Kill(1, s); err != nil {
			return fmt.Errorf("kill(1, %v): %w", s, err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	fmt.Println("init survived")
	os.Exit(7)
	return nil
}

func errnoName(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		if en == 0 {
			return "ok"
		}
		return unix.ErrnoName(en)
	}
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func attackNS([]string) error {
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		l, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", ns, l)
	}
	h, _ := os.Hostname()
	fmt.Printf("hostname %s\n", h)
	return nil
}

// attackMounts prints "mountpoint fstype options propagation" for every mount.
func attackMounts([]string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, _ := strings.Cut(sc.Text(), " - ")
		fs := strings.Fields(pre)
		tags := "private"
		if len(fs) > 6 && fs[6] != "" {
			tags = strings.Join(fs[6:], ",")
		}
		fmt.Printf("%s %s %s %s\n", fs[4], strings.Fields(post)[0], fs[5], tags)
	}
	return sc.Err()
}

func attackLs(args []string) error {
	des, err := os.ReadDir(args[0])
	if err != nil {
		return err
	}
	for _, de := range des {
		fmt.Println(de.Name())
	}
	return nil
}

func attackStat(args []string) error {
	for _, p := range args {
		_, err := os.Lstat(p)
		fmt.Printf("%s %s\n", p, errnoName(err))
	}
	return nil
}

func attackRead(args []string) error {
	for _, p := range args {
		_, err := os.ReadFile(p)
		fmt.Printf("%s %s\n", p, errnoName(err))
	}
	return nil
}

// attackNet: args are a host TCP address and a host abstract socket name.
func attackNet(args []string) error {
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, i := range ifs {
		fmt.Printf("if %s up=%v\n", i.Name, i.Flags&net.FlagUp != 0)
	}
	for _, addr := range strings.Split(args[0], ",") {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.Close()
		}
		fmt.Printf("tcp %s %s\n", addr, dialResult(err))
	}
	c, err := net.DialTimeout("unix", "@"+args[1], 2*time.Second)
	if err == nil {
		c.Close()
	}
	fmt.Printf("abstract %s\n", dialResult(err))
	// Something inside must still work on lo.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer l.Close()
	go func() {
		if c, err := l.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err = net.Dial("tcp", l.Addr().String())
	if err == nil {
		c.Close()
	}
	fmt.Printf("lo-self %s\n", dialResult(err))
	return nil
}

func dialResult(err error) string {
	if err == nil {
		return "connected"
	}
	return "refused:" + errnoName(err)
}

func rawErr(r1, _ uintptr, e syscall.Errno) string {
	if e != 0 {
		return unix.ErrnoName(e)
	}
	return "ok"
}

// attackSyscalls tries what the seccomp filter must refuse, choosing calls
// that would succeed (or fail differently) without it. It prints "name errno".
func attackSyscalls([]string) error {
	try := func(name, result string) { fmt.Printf("%s %s\n", name, result) }

	try("unshare-user", rawErr(unix.Syscall(unix.SYS_UNSHARE, unix.CLONE_NEWUSER, 0, 0)))
	cmd := exec.Command("/proc/self/exe", attackCommand, "exit", "0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET}
	fmt.Printf("clone-newuser %s\n", errnoName(cmd.Run()))
	try("clone3", rawErr(unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)))
	var params [120]byte
	try("io_uring_setup", rawErr(unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params[0])), 0)))
	try("keyctl", rawErr(unix.Syscall(unix.SYS_KEYCTL, unix.KEYCTL_GET_KEYRING_ID, uintptr(0xfffffffd) /* KEY_SPEC_SESSION_KEYRING */, 0)))
	kt, _ := unix.BytePtrFromString("user")
	kd, _ := unix.BytePtrFromString("proctor")
	try("add_key", rawErr(unix.Syscall6(unix.SYS_ADD_KEY, uintptr(unsafe.Pointer(kt)), uintptr(unsafe.Pointer(kd)), uintptr(unsafe.Pointer(kd)), 7, uintptr(0xfffffffe) /* KEY_SPEC_PROCESS_KEYRING */, 0)))
	try("userfaultfd", rawErr(unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|1 /* UFFD_USER_MODE_ONLY */, 0, 0)))
	try("perf_event_open", rawErr(unix.Syscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, ^uintptr(0), ^uintptr(0), 0, 0)))
	var handle [136]byte
	*(*uint32)(unsafe.Pointer(&handle[0])) = 128
	var mountID int32
	root, _ := unix.BytePtrFromString("/")
	try("name_to_handle_at", rawErr(unix.Syscall6(unix.SYS_NAME_TO_HANDLE_AT, atFDCWD, uintptr(unsafe.Pointer(root)), uintptr(unsafe.Pointer(&handle[0])), uintptr(unsafe.Pointer(&mountID)), 0, 0)))
	pid := os.Getpid()
	try("kcmp", rawErr(unix.Syscall6(unix.SYS_KCMP, uintptr(pid), uintptr(pid), 0 /* KCMP_FILE */, 0, 0, 0)))
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return fmt.Errorf("pidfd_open: %w", err)
	}
	try("pidfd_getfd", rawErr(unix.Syscall(unix.SYS_PIDFD_GETFD, uintptr(pfd), 0, 0)))
	try("socket-vsock", rawErr(unix.Syscall(unix.SYS_SOCKET, unix.AF_VSOCK, unix.SOCK_STREAM, 0)))
	try("socket-alg", rawErr(unix.Syscall(unix.SYS_SOCKET, unix.AF_ALG, unix.SOCK_SEQPACKET, 0)))
	// High bits must not smuggle a domain past the filter.
	try("socket-vsock-highbits", rawErr(unix.Syscall(unix.SYS_SOCKET, 1<<32|unix.AF_VSOCK, unix.SOCK_STREAM, 0)))
	try("socket-inet", rawErr(unix.Syscall(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0)))

	// TIOCSTI on our own controlling pty would succeed without the filter.
	master, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		return fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		return fmt.Errorf("unlockpt: %w", err)
	}
	n, err := unix.IoctlGetInt(master, unix.TIOCGPTN)
	if err != nil {
		return fmt.Errorf("ptsname: %w", err)
	}
	slave, err := unix.Open(fmt.Sprintf("/dev/pts/%d", n), unix.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open pts: %w", err)
	}
	try("tiocsctty", rawErr(unix.Syscall(unix.SYS_IOCTL, uintptr(slave), unix.TIOCSCTTY, 0)))
	c := byte('x')
	try("tiocsti", rawErr(unix.Syscall(unix.SYS_IOCTL, uintptr(slave), unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))))
	try("tiocsti-highbits", rawErr(unix.Syscall(unix.SYS_IOCTL, uintptr(slave), 1<<32|unix.TIOCSTI, uintptr(unsafe.Pointer(&c)))))
	try("tioclinux", rawErr(unix.Syscall(unix.SYS_IOCTL, uintptr(slave), unix.TIOCLINUX, uintptr(unsafe.Pointer(&c)))))
	try("tcgets", rawErr(unix.Syscall(unix.SYS_IOCTL, uintptr(slave), unix.TCGETS, uintptr(unsafe.Pointer(&params[0])))))

	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "Seccomp:") {
			fmt.Printf("seccomp-mode %s\n", strings.TrimSpace(strings.TrimPrefix(l, "Seccomp:")))
		}
	}
	return nil
}

// attackMountSyscalls is run with capabilities kept (a test hook) so that only
// the seccomp filter stands between it and the mount family.
func attackMountSyscalls([]string) error {
	try := func(name, result string) { fmt.Printf("%s %s\n", name, result) }
	src, _ := unix.BytePtrFromString("none")
	dst, _ := unix.BytePtrFromString("/tmp")
	typ, _ := unix.BytePtrFromString("tmpfs")
	try("mount", rawErr(unix.Syscall6(unix.SYS_MOUNT, uintptr(unsafe.Pointer(src)), uintptr(unsafe.Pointer(dst)), uintptr(unsafe.Pointer(typ)), 0, 0, 0)))
	try("umount2", rawErr(unix.Syscall(unix.SYS_UMOUNT2, uintptr(unsafe.Pointer(dst)), unix.MNT_DETACH, 0)))
	try("fsopen", rawErr(unix.Syscall(unix.SYS_FSOPEN, uintptr(unsafe.Pointer(typ)), 0, 0)))
	try("open_tree", rawErr(unix.Syscall(unix.SYS_OPEN_TREE, atFDCWD, uintptr(unsafe.Pointer(dst)), unix.OPEN_TREE_CLONE)))
	try("unshare-mnt", rawErr(unix.Syscall(unix.SYS_UNSHARE, unix.CLONE_NEWNS, 0, 0)))
	nsfd, err := unix.Open("/proc/self/ns/uts", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	try("setns", rawErr(unix.Syscall(unix.SYS_SETNS, uintptr(nsfd), 0, 0)))
	try("sethostname-allowed", rawErr(unix.Syscall(unix.SYS_SETHOSTNAME, uintptr(unsafe.Pointer(typ)), 5, 0)))
	return nil
}

// attackX32 makes a syscall through the x32 ABI: seccomp must kill it.
func attackX32([]string) error {
	unix.RawSyscall(0x40000000|unix.SYS_GETPID, 0, 0, 0)
	fmt.Println("survived")
	return nil
}

func attackIDs([]string) error {
	for _, f := range []string{"/proc/self/uid_map", "/proc/self/gid_map", "/proc/self/setgroups"} {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		fmt.Printf("%s %s\n", f, strings.Join(strings.Fields(string(b)), " "))
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		switch k {
		case "Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp":
			if ok {
				fmt.Printf("%s %s\n", k, strings.Join(strings.Fields(v), " "))
			}
		}
	}
	return nil
}

// attackSetuid drops to uid 1000 and runs args[0], a setuid-root copy of this
// binary, asking it for its effective uid.
func attackSetuid(args []string) error {
	if err := syscall.Setgid(1000); err != nil {
		return err
	}
	if err := syscall.Setuid(1000); err != nil {
		return err
	}
	out, err := exec.Command(args[0], attackCommand, "euid").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	fmt.Printf("euid-after-setuid-exec %s\n", strings.TrimSpace(string(out)))
	return nil
}

func attackEnv([]string) error {
	env := os.Environ()
	sort.Strings(env)
	for _, e := range env {
		fmt.Println(e)
	}
	return nil
}

func attackFDs([]string) error {
	des, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	var fds []string
	for _, de := range des {
		target, err := os.Readlink("/proc/self/fd/" + de.Name())
		if err != nil || strings.HasPrefix(target, "/proc/") && strings.HasSuffix(target, "/fd") {
			continue // the directory being read
		}
		fds = append(fds, de.Name())
	}
	fmt.Printf("fds %s\n", strings.Join(fds, ","))
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return err
	}
	// Fields after the command name: state ppid pgrp session tty_nr.
	rest := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	fmt.Printf("session-leader %v\n", rest[3] == strconv.Itoa(os.Getpid()))
	fmt.Printf("tty_nr %s\n", rest[4])
	_, err = os.Open("/dev/tty")
	fmt.Printf("dev-tty %s\n", errnoName(err))
	return nil
}

// attackExe tries to open init's binary (the proctor binary) for writing.
func attackExe([]string) error {
	_, err := os.OpenFile("/proc/1/exe", os.O_WRONLY, 0)
	fmt.Printf("write-proc1-exe %s\n", errnoName(err))
	fd, err := unix.Open("/proc/1/exe", unix.O_PATH, 0)
	fmt.Printf("opath-proc1-exe %s\n", errnoName(err))
	if err == nil {
		_, err = os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", fd), os.O_WRONLY, 0)
		fmt.Printf("reopen-write %s\n", errnoName(err))
	}
	_, err = os.ReadFile("/proc/1/environ")
	fmt.Printf("read-proc1-environ %s\n", errnoName(err))
	_, err = os.Open("/proc/1/mem")
	fmt.Printf("open-proc1-mem %s\n", errnoName(err))
	return nil
}

// attackDaemon leaves a process behind that ignores SIGTERM, sits in a new
// session and is reparented (double fork). args: token [wait]. With "wait" it
// then sleeps forever itself.
func attackDaemon(args []string) error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	// The middle process starts the sleeper and exits at once.
	mid := exec.Command("/proc/self/exe", attackCommand, "sleeper", args[0], "spawn")
	mid.ExtraFiles = []*os.File{w}
	if err := mid.Run(); err != nil {
		return err
	}
	w.Close()
	buf := make([]byte, 1)
	if _, err := r.Read(buf); err != nil {
		return fmt.Errorf("sleeper did not start: %w", err)
	}
	fmt.Println("daemon started")
	if len(args) > 1 && args[1] == "wait" {
		sleepForever()
	}
	return nil
}

// attackSleeper ignores SIGTERM and sleeps; with "spawn" it first forks a
// copy of itself in a new session that reports on fd 3, then returns.
func attackSleeper(args []string) error {
	if len(args) > 1 && args[1] == "spawn" {
		c := exec.Command("/proc/self/exe", attackCommand, "sleeper", args[0])
		c.ExtraFiles = []*os.File{os.NewFile(3, "ready")}
		c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		return c.Start()
	}
	signal.Ignore(syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	if f := os.NewFile(3, "ready"); f != nil {
		_, _ = f.Write([]byte{1})
		f.Close()
	}
	sleepForever()
	return nil
}

// sleepForever blocks without tripping Go's deadlock detector.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

func attackAlloc(args []string) error {
	mb, _ := strconv.Atoi(args[0])
	var keep [][]byte
	for i := 0; i < mb; i++ {
		b := make([]byte, 1<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		keep = append(keep, b)
	}
	fmt.Printf("allocated %d MiB\n", len(keep))
	return nil
}

// attackForks starts sleepers until fork fails or n are running.
func attackForks(args []string) error {
	n, _ := strconv.Atoi(args[0])
	started := 0
	var err error
	for started < n {
		c := exec.Command("/proc/self/exe", attackCommand, "sleeper", "fork")
		if err = c.Start(); err != nil {
			break
		}
		started++
	}
	fmt.Printf("started %d (%v)\n", started, errnoName(err))
	return nil
}

func attackSpew(args []string) error {
	n, _ := strconv.Atoi(args[0])
	line := []byte(strings.Repeat("x", 1023) + "\n")
	for i := 0; i < n; i += len(line) {
		if _, err := os.Stdout.Write(line); err != nil {
			return err
		}
	}
	return nil
}

func attackSpin(args []string) error {
	d, _ := time.ParseDuration(args[0])
	end := time.Now().Add(d)
	x := 0
	for time.Now().Before(end) {
		x++
	}
	fmt.Println("spun", x > 0)
	return nil
}

func attackExit(args []string) error {
	n, _ := strconv.Atoi(args[0])
	os.Exit(n)
	return nil
}

// atFDCWD is AT_FDCWD as a raw syscall argument.
var atFDCWD = func() uintptr { v := unix.AT_FDCWD; return uintptr(v) }()

// attackAttach tries to take hold of processes it did not start traced:
// ptrace ATTACH on one child, SEIZE on another (each fresh, so that one
// attempt cannot disturb the next), then reading a child's memory with
// process_vm_readv. It prints one line per attempt: the name and "ok" or
// the errno.
func attackAttach([]string) error {
	sleeper := func() (int, func(), error) {
		child := exec.Command("/bin/sleep", "30")
		if err := child.Start(); err != nil {
			return 0, nil, err
		}
		time.Sleep(20 * time.Millisecond)
		return child.Process.Pid, func() { child.Process.Kill(); child.Wait() }, nil
	}
	for _, req := range []struct {
		name string
		op   int
	}{{"attach", unix.PTRACE_ATTACH}, {"seize", unix.PTRACE_SEIZE}} {
		pid, done, err := sleeper()
		if err != nil {
			return err
		}
		_, _, e := unix.Syscall6(unix.SYS_PTRACE, uintptr(req.op), uintptr(pid), 0, 0, 0, 0)
		fmt.Println(req.name, errnoName(e))
		done()
	}
	pid, done, err := sleeper()
	if err != nil {
		return err
	}
	defer done()
	buf := make([]byte, 8)
	local := []unix.Iovec{{Base: &buf[0], Len: 8}}
	remote := []unix.RemoteIovec{{Base: 0x400000, Len: 8}}
	_, err = unix.ProcessVMReadv(pid, local, remote, 0)
	if errors.Is(err, unix.EFAULT) || errors.Is(err, unix.ESRCH) {
		err = nil // the call ran: what mattered is that it was not refused
	}
	fmt.Println("process_vm_readv", errnoName(err))
	return nil
}

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/cgroup"
)

// Feature is one host capability Probe checked.
type Feature struct {
	Name     string
	OK       bool
	Detail   string
	Required bool // exec cannot run without it
}

// Probe reports what this host supports. The last row runs a real sandbox
// (`true` on the host root) with every isolation step on: the definitive check.
func Probe(ctx context.Context) []Feature {
	var fs []Feature
	add := func(name string, required bool, ok bool, detail string) {
		fs = append(fs, Feature{Name: name, OK: ok, Detail: detail, Required: required})
	}

	if os.Geteuid() == 0 {
		add("user namespaces", true, true, "running as root: 65,536-id unprivileged map")
	} else {
		b, err := os.ReadFile("/proc/sys/user/max_user_namespaces")
		ok := err == nil && strings.TrimSpace(string(b)) != "0"
		add("user namespaces", true, ok, "unprivileged; max_user_namespaces="+strings.TrimSpace(string(b)))
	}

	filesystems, _ := os.ReadFile("/proc/filesystems")
	add("overlayfs", false, strings.Contains(string(filesystems), "\toverlay\n"), "for trial workspaces")

	avail, err := os.ReadFile("/proc/sys/kernel/seccomp/actions_avail")
	a := " " + strings.TrimSpace(string(avail)) + " "
	add("seccomp filter", true, err == nil && strings.Contains(a, " errno ") && strings.Contains(a, " kill_process "), strings.TrimSpace(string(avail)))
	add("seccomp user notification", false, strings.Contains(a, " user_notif "), "")

	abi, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, 1 /* LANDLOCK_CREATE_RULESET_VERSION */)
	if errno != 0 {
		add("Landlock", false, false, errno.Error())
	} else {
		add("Landlock", false, true, fmt.Sprintf("ABI %d", abi))
	}

	if info, err := cgroup.Detect(); err != nil {
		add("cgroups", false, false, err.Error())
	} else {
		for _, c := range []string{"memory", "pids", "cpu"} {
			detail := info.Version.String()
			if !info.Controllers[c] {
				detail = info.Reasons[c]
			}
			add("cgroup "+c+" controller", false, info.Controllers[c], detail+" (needed for --"+map[string]string{"memory": "memory", "pids": "pids", "cpu": "cpus"}[c]+")")
		}
	}

	if fd, err := unix.PidfdOpen(os.Getpid(), 0); err != nil {
		add("pidfd", false, false, err.Error())
	} else {
		unix.Close(fd)
		add("pidfd", false, true, "")
	}

	fd, err := unix.OpenTree(unix.AT_FDCWD, "/", unix.OPEN_TREE_CLOEXEC)
	if err == nil {
		unix.Close(fd)
	}
	add("new mount API", true, err == nil || errors.Is(err, unix.EPERM), "open_tree, fsopen, move_mount, mount_setattr")

	switch v6, err := ipv6Loopback(); {
	case err != nil:
		add("IPv6 loopback", false, false, "not checked: "+err.Error())
	case v6:
		add("IPv6 loopback", false, true, "a sandbox's lo has ::1")
	default:
		add("IPv6 loopback", false, false, "a sandbox's lo has no ::1: [::1] and localhost are IPv4 only inside")
	}

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := Run(ctx, Spec{Rootfs: RootfsHost, Args: []string{"true"}})
	switch {
	case err != nil:
		add("sandbox", true, false, err.Error())
	case res.ExitCode != 0:
		add("sandbox", true, false, fmt.Sprintf("`true` exited %d", res.ExitCode))
	default:
		add("sandbox", true, true, fmt.Sprintf("`true` ran with every isolation step on (%d ms)", res.WallMS))
	}
	return fs
}

// IPv6Loopback reports whether a sandbox's lo has ::1, so that a Spec may
// Listen on "[::1]:PORT": whether, in a new network namespace made as Run
// makes one, a TCP socket can be bound to [::1] once lo is up. It makes
// such a namespace once per process (on a thread that then ends), and
// reports false where it cannot (not root) or where there is no ::1.
func IPv6Loopback() bool {
	ok, _ := ipv6Loopback()
	return ok
}

var ipv6Loopback = sync.OnceValues(func() (bool, error) {
	type result struct {
		ok  bool
		err error
	}
	res := make(chan result, 1)
	go func() {
		// Never unlocked: the thread, in a namespace of its own, ends with
		// this goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			res <- result{err: fmt.Errorf("making a network namespace: %w", err)}
			return
		}
		if err := loopbackUp(); err != nil {
			res <- result{err: fmt.Errorf("bringing up lo: %w", err)}
			return
		}
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			res <- result{} // no IPv6 at all
			return
		}
		defer unix.Close(fd)
		res <- result{ok: unix.Bind(fd, &unix.SockaddrInet6{Addr: [16]byte{15: 1}}) == nil}
	}()
	r := <-res
	return r.ok, r.err
})

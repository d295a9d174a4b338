package sandbox

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/cgroup"
	"github.com/proctor-sandbox/proctor/internal/seccomp"
)

// RootfsHost selects a read-only view of the host's system directories as the
// sandbox root (see HostDirs), with HostMasks hidden.
const RootfsHost = "host"

// HostDirs are the only host directories the "host" root exposes.
var HostDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc"}

// HostMasks are host secrets hidden from a "host" root even though /etc is
// shown. Globs are expanded on the host when the sandbox starts.
var HostMasks = []string{
	"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/security/opasswd", "/etc/sudoers", "/etc/sudoers.d",
	"/etc/ssh/ssh_host_*_key", "/etc/ssl/private",
}

// DefaultPath is the PATH a sandboxed command starts with.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Bind makes host path Src visible at Dst inside the sandbox, read-only unless
// Writable.
type Bind struct {
	Src      string
	Dst      string
	Writable bool
}

// Tmpfs is a private, empty tmpfs at Dst. SizeBytes 0 means the kernel default
// (half of RAM, still charged to the sandbox's memory limit).
type Tmpfs struct {
	Dst       string
	SizeBytes int64
}

// Overlay is a copy-on-write directory at Dst: the Lower host directories
// (topmost first, read-only, their files shown as owned by the sandbox's ids
// as they are owned by the host's), with every change going to Upper. Upper
// and Work are host directories on one filesystem, owned by RootID, Work
// empty. Overlays need root (idmapped mounts). Dst "/" makes the overlay the
// sandbox's root, in place of Rootfs.
type Overlay struct {
	Dst   string
	Lower []string
	Upper string
	Work  string
}

// Tree is a detached mount the caller made (open_tree or fsmount), attached
// at Dst inside after the binds, overlays and masks (on top of a mask at the
// same path). Dst must
// exist in the root unless it lies under /tmp or a tmpfs (a missing mount
// point is created like a bind's). Run duplicates Mount; the caller keeps
// and closes its own descriptor. Trees need root.
type Tree struct {
	Dst   string
	Mount *os.File
}

// Limits bound what the tree may consume. Zero means no limit.
type Limits struct {
	MemoryBytes int64
	Pids        int64
	CPUs        float64
	Timeout     time.Duration
	OutputBytes int64 // stdout and stderr together
}

// Spec describes one sandboxed run. It is a plain value: Run reads it and never
// keeps or changes it.
type Spec struct {
	Rootfs   string // RootfsHost or an absolute directory used as / (read-only); "" when an overlay is the root
	Binds    []Bind
	Overlays []Overlay
	Tmpfs    []Tmpfs
	Masks    []string // absolute paths hidden inside: files read as empty, dirs as empty read-only dirs
	Workdir  string   // absolute; "/" when empty
	Env      []string // K=V added to PATH and HOME (which they may override)
	Hostname string   // "proctor" when empty
	Args     []string // the command and its arguments; Args[0] is looked up in PATH inside
	Limits   Limits

	// User runs the command as these ids inside (as a Dockerfile's USER
	// does) instead of root: it then starts with no capabilities. nil is
	// root. Ids other than 0 need the full id map (a root supervisor).
	User *User

	// KeepTmp leaves /tmp as the root has it instead of mounting a fresh
	// tmpfs there, so that what the command writes under /tmp lands in a
	// root overlay's upper (an image build's RUN step).
	KeepTmp bool

	// NoAttach stops the sandbox's processes from taking hold of one
	// another: ptrace ATTACH and SEIZE and process_vm_readv/writev fail
	// (tracing a child that asks for it still works). For a grader, whose
	// tests run code that must not reach the verifier.
	NoAttach bool

	// Trees are detached mounts to attach (see Tree).
	Trees []Tree

	// Listen are TCP addresses on the sandbox's own loopback ("127.0.0.1:3128",
	// "[::1]:80") that exist, listening, before the command starts. Serve is
	// called with them, in order, on the host side before the command runs
	// (with limits) or as it starts (without): connections made early wait in
	// the backlog. The listeners belong to the caller from then on; the
	// connections accepted on them are the sandbox's, so whatever serves them
	// runs on the host with the host's network.
	Listen []string
	Serve  func([]net.Listener)

	// WatchNet, when set, is told of every connect, sendto with an address,
	// sendmsg and sendmmsg the command's tree makes (seccomp user
	// notification). It only records: each call goes on unchanged, whatever
	// WatchNet does, so the network namespace stays what enforces. Run
	// returns only after the last call to WatchNet has returned. WatchNet
	// must be quick: the caller waits while it runs.
	WatchNet func(seccomp.Attempt)

	// WatchFiles, when set, is told of every system call of the command's
	// tree that names a path or lists a directory (seccomp user
	// notification; see seccomp.FilesProgram). For trusted runs only: the
	// paths are read from the callers' memory. Like WatchNet it only
	// records, and Run returns after its last call. A sandbox has one
	// watch: WatchNet and WatchFiles together are refused.
	WatchFiles func(seccomp.FileAccess)

	// Pin asks for conditions that make one run like the next (see Pin).
	Pin Pin
	// AllowDegraded lets a run go on when a resource limit cannot be applied on
	// this host; each one missing is named in Result.Degraded. Namespaces,
	// mounts, capabilities and seccomp are never degradable.
	AllowDegraded bool

	Stdin  io.Reader // nil: empty
	Stdout io.Writer // nil: discarded
	Stderr io.Writer // nil: discarded
}

// User is a command's ids inside the sandbox.
type User struct {
	UID, GID uint32
	Groups   []uint32 // supplementary groups; none when empty
}

// Pin is what a run may ask for so that it sees the same machine as the
// next run with the same spec. These are for reproducibility, not
// isolation: one that cannot be had here is named in Result.Unpinned and
// the run goes on. (What every run gets anyway: the hostname, uid and gid 0,
// HOME=/root, umask 022, a fresh /proc.)
type Pin struct {
	// TimeNS runs the sandbox in a new time namespace whose monotonic and
	// boot-time clocks (uptime) start at zero, whatever the host's uptime.
	TimeNS bool
	// CPUSet confines the sandbox to these CPUs (a cgroup cpuset), e.g.
	// "1" or "0-1": concurrent runs pinned to different CPUs do not take
	// each other's. They must be CPUs the caller may use.
	CPUSet string
}

// Limit names which limit ended or constrained a run.
type Limit string

// The limits a Result may report.
const (
	LimitNone    Limit = ""
	LimitMemory  Limit = "memory"
	LimitPids    Limit = "pids"
	LimitOutput  Limit = "output"
	LimitTimeout Limit = "timeout"
)

// Result is how a run ended. It is written as JSON by `proctor exec --result`.
type Result struct {
	ExitCode        int      `json:"exit_code"` // the command's status, or 128+signal
	Signal          int      `json:"signal"`    // the signal that killed the command, 0 if it exited
	TimedOut        bool     `json:"timed_out"`
	Limit           Limit    `json:"limit"`      // the limit that ended the run, else the one that constrained it
	LimitsHit       []Limit  `json:"limits_hit"` // every limit reached, in the order timeout, output, memory, pids
	WallMS          int64    `json:"wall_ms"`
	UserMS          int64    `json:"user_ms"`
	SysMS           int64    `json:"sys_ms"`
	MaxRSSBytes     int64    `json:"max_rss_bytes"`
	MemoryPeakBytes int64    `json:"memory_peak_bytes,omitempty"`
	OutputBytes     int64    `json:"output_bytes"` // stdout+stderr bytes passed on (at most the cap)
	Degraded        []string `json:"degraded"`
	// Unpinned names each thing of Spec.Pin this host could not give, and
	// why ("time namespace: …", "cpuset: …").
	Unpinned []string `json:"unpinned,omitempty"`
	Cgroup   string   `json:"cgroup,omitempty"` // "v1", "v2" or "" when no limit needed one
}

// validate checks the spec before anything is created, so bad input never
// leaves a half-built sandbox. Every error names the field.
func (s *Spec) validate() error {
	if len(s.Args) == 0 || s.Args[0] == "" {
		return &SpecError{Field: "command", Err: fmt.Errorf("no command given")}
	}
	if s.WatchNet != nil && s.WatchFiles != nil {
		return &SpecError{Field: "watch", Err: fmt.Errorf("WatchNet and WatchFiles together: a sandbox has one seccomp listener")}
	}
	rootOverlay := false
	for _, o := range s.Overlays {
		if err := o.validate(); err != nil {
			return err
		}
		if o.Dst == "/" {
			if rootOverlay {
				return &SpecError{Field: "overlay", Value: "/", Err: fmt.Errorf("two overlays on one destination")}
			}
			rootOverlay = true
		}
	}
	switch {
	case rootOverlay && s.Rootfs != "":
		return &SpecError{Field: "rootfs", Value: s.Rootfs, Err: fmt.Errorf("an overlay on / is the root: leave rootfs empty")}
	case rootOverlay:
	case s.Rootfs == "":
		return &SpecError{Field: "rootfs", Err: fmt.Errorf("not set (use %q or a directory)", RootfsHost)}
	case s.Rootfs != RootfsHost:
		if !filepath.IsAbs(s.Rootfs) {
			return &SpecError{Field: "rootfs", Value: s.Rootfs, Err: fmt.Errorf("must be an absolute path")}
		}
		fi, err := os.Stat(s.Rootfs)
		if err != nil {
			return &SpecError{Field: "rootfs", Value: s.Rootfs, Err: err}
		}
		if !fi.IsDir() {
			return &SpecError{Field: "rootfs", Value: s.Rootfs, Err: fmt.Errorf("not a directory")}
		}
	}
	for _, b := range s.Binds {
		if !filepath.IsAbs(b.Src) {
			return &SpecError{Field: "bind", Value: b.Src, Err: fmt.Errorf("source must be an absolute path")}
		}
		if _, err := os.Stat(b.Src); err != nil {
			return &SpecError{Field: "bind", Value: b.Src, Err: err}
		}
		if err := checkInsidePath(b.Dst); err != nil {
			return &SpecError{Field: "bind", Value: b.Dst, Err: err}
		}
	}
	for _, t := range s.Tmpfs {
		if err := checkInsidePath(t.Dst); err != nil {
			return &SpecError{Field: "tmpfs", Value: t.Dst, Err: err}
		}
		if t.SizeBytes < 0 {
			return &SpecError{Field: "tmpfs", Value: t.Dst, Err: fmt.Errorf("negative size")}
		}
	}
	seen := map[string]bool{}
	for _, d := range s.userMountDsts() {
		c := filepath.Clean(d)
		if seen[c] {
			return &SpecError{Field: "bind/tmpfs", Value: d, Err: fmt.Errorf("two mounts on one destination")}
		}
		seen[c] = true
	}
	for _, t := range s.Trees {
		if err := checkInsidePath(t.Dst); err != nil {
			return &SpecError{Field: "tree", Value: t.Dst, Err: err}
		}
		if t.Mount == nil {
			return &SpecError{Field: "tree", Value: t.Dst, Err: fmt.Errorf("no mount descriptor")}
		}
		if os.Geteuid() != 0 {
			return &SpecError{Field: "tree", Value: t.Dst, Err: fmt.Errorf("attaching detached mounts needs root")}
		}
	}
	for _, a := range s.Listen {
		ap, err := netip.ParseAddrPort(a)
		if err != nil {
			return &SpecError{Field: "listen", Value: a, Err: fmt.Errorf("want IP:PORT: %v", err)}
		}
		if !ap.Addr().IsLoopback() || ap.Port() == 0 {
			return &SpecError{Field: "listen", Value: a, Err: fmt.Errorf("must be a loopback address with a port")}
		}
	}
	if len(s.Listen) > 0 && s.Serve == nil {
		return &SpecError{Field: "listen", Err: fmt.Errorf("addresses given but nothing to serve them")}
	}
	for _, m := range s.Masks {
		if err := checkInsidePath(m); err != nil {
			return &SpecError{Field: "mask", Value: m, Err: err}
		}
	}
	if s.Workdir != "" && !filepath.IsAbs(s.Workdir) {
		return &SpecError{Field: "workdir", Value: s.Workdir, Err: fmt.Errorf("must be an absolute path")}
	}
	for _, kv := range s.Env {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(kv, 0) {
			return &SpecError{Field: "env", Value: kv, Err: fmt.Errorf("want KEY=VALUE")}
		}
	}
	if u := s.User; u != nil {
		ids := append([]uint32{u.UID, u.GID}, u.Groups...)
		for _, id := range ids {
			if id >= IDMapSize {
				return &SpecError{Field: "user", Value: fmt.Sprint(id), Err: fmt.Errorf("outside the sandbox's id map (0-%d)", IDMapSize-1)}
			}
			if id != 0 && os.Geteuid() != 0 {
				return &SpecError{Field: "user", Value: fmt.Sprint(id), Err: fmt.Errorf("ids other than 0 need root (the full id map)")}
			}
		}
	}
	if len(s.Hostname) > 64 {
		return &SpecError{Field: "hostname", Value: s.Hostname, Err: fmt.Errorf("longer than 64 bytes")}
	}
	l := s.Limits
	switch {
	case l.MemoryBytes < 0:
		return &SpecError{Field: "memory", Err: fmt.Errorf("negative")}
	case l.Pids < 0:
		return &SpecError{Field: "pids", Err: fmt.Errorf("negative")}
	case l.CPUs < 0:
		return &SpecError{Field: "cpus", Err: fmt.Errorf("negative")}
	case l.Timeout < 0:
		return &SpecError{Field: "timeout", Err: fmt.Errorf("negative")}
	case l.OutputBytes < 0:
		return &SpecError{Field: "output-limit", Err: fmt.Errorf("negative")}
	}
	if c := s.Pin.CPUSet; c != "" {
		cpus, err := cgroup.ParseCPUSet(c)
		if err != nil {
			return &SpecError{Field: "cpuset", Value: c, Err: err}
		}
		var mine unix.CPUSet
		if err := unix.SchedGetaffinity(0, &mine); err == nil {
			for _, n := range cpus {
				if !mine.IsSet(n) {
					return &SpecError{Field: "cpuset", Value: c, Err: fmt.Errorf("CPU %d is not one this process may run on", n)}
				}
			}
		}
	}
	return nil
}

func (o *Overlay) validate() error {
	if o.Dst != "/" {
		if err := checkInsidePath(o.Dst); err != nil {
			return &SpecError{Field: "overlay", Value: o.Dst, Err: err}
		}
	}
	if os.Geteuid() != 0 {
		return &SpecError{Field: "overlay", Value: o.Dst, Err: fmt.Errorf("copy-on-write overlays need root (idmapped mounts)")}
	}
	if len(o.Lower) == 0 {
		return &SpecError{Field: "overlay", Value: o.Dst, Err: fmt.Errorf("no lower directory")}
	}
	dirs := append(slices.Clone(o.Lower), o.Upper, o.Work)
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			return &SpecError{Field: "overlay", Value: d, Err: fmt.Errorf("must be an absolute path")}
		}
		fi, err := os.Stat(d)
		if err != nil {
			return &SpecError{Field: "overlay", Value: d, Err: err}
		}
		if !fi.IsDir() {
			return &SpecError{Field: "overlay", Value: d, Err: fmt.Errorf("not a directory")}
		}
	}
	return nil
}

func (s *Spec) userMountDsts() []string {
	var ds []string
	for _, b := range s.Binds {
		ds = append(ds, b.Dst)
	}
	for _, t := range s.Tmpfs {
		ds = append(ds, t.Dst)
	}
	for _, o := range s.Overlays {
		if o.Dst != "/" {
			ds = append(ds, o.Dst)
		}
	}
	return ds
}

// checkInsidePath accepts a clean absolute path other than "/" for a mount
// destination inside the sandbox.
func checkInsidePath(p string) error {
	switch {
	case !filepath.IsAbs(p):
		return fmt.Errorf("must be an absolute path")
	case filepath.Clean(p) == "/":
		return fmt.Errorf("cannot be /")
	case strings.ContainsRune(p, 0):
		return fmt.Errorf("contains a NUL byte")
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Errorf(`must not contain ".."`)
		}
	}
	return nil
}

// watches reports whether the spec asks for a seccomp watch.
func (s *Spec) watches() bool { return s.WatchNet != nil || s.WatchFiles != nil }

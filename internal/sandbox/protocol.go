package sandbox

// The host–init protocol. The host starts init (this binary, hidden
// subcommand InitCommand) in new namespaces with two extra pipes: the spec pipe
// (fd 3 in init, announced by --spec-fd) and the status pipe (fd 4, --status-fd).
// As root, the detached mounts the host made follow from fd 5 on, each named by
// its number in the spec (source.FD).
//
//	host (Run)                                    init (RunInit), pid 1 inside
//	    |                                              |
//	    |-- clone(NEWUSER|NEWNS|NEWPID|NEWNET|          |
//	    |   NEWIPC|NEWUTS|NEWCGROUP), uid/gid maps ---->|  (Go writes the maps)
//	    |   (the spec is in its pipe before the clone)  |
//	    |                                              |  reads the spec, mounts,
//	    |                                              |  pivot_root, lo up, hostname,
//	    |                                              |  rlimits, caps, no_new_privs,
//	    |                                              |  seccomp (TSYNC)
//	    |<------------------- {"phase":"error",...} ---|  on any failure: exit 125
//	    |                                              |  fork+exec the command: it stops
//	    |                                              |  at exec (ptrace); init ignores
//	    |                                              |  every signal it can
//	    |                                              |  (listeners on lo, notify filter:
//	    |                                              |  their fd numbers go in the next
//	    |                                              |  message)
//	    |<------------------- {"phase":"placing"} -----|  (limits only)
//	    |   pidfd_getfd the listeners and the seccomp  |
//	    |   listener; start serving and watching       |
//	    |   find init's only child, put it in the      |
//	    |   cgroup                                     |
//	    |-- go-ahead byte on the spec pipe ----------->|
//	    |<------------------- {"phase":"started"} -----|  PTRACE_DETACH: the command runs
//	    |   copy stdout/stderr under the output cap;   |  reap every child; when the
//	    |   deadline timer; on expiry SIGKILL init     |  command ends, SIGKILL all
//	    |   (the kernel then kills the whole pid ns)    |  others and reap them
//	    |<------------------- {"phase":"exited",...} --|
//	    |-- wait4(init), cgroup stats, destroy ------->x  init exits 0
//
// If the host dies, init gets SIGKILL (parent-death signal) and the kernel kills
// every process of the pid namespace with it.

// InitCommand is the hidden subcommand that runs the sandbox's init.
const InitCommand = "__sandbox-init"

// goAhead follows the spec on the spec pipe once the command is in its cgroup.
const goAhead = 'g'

// Flag names announcing init's file descriptors.
const (
	specFDFlag   = "--spec-fd"
	statusFDFlag = "--status-fd"
)

// initSpec is what the host sends to init: the Spec reduced to what init does.
type initSpec struct {
	Root     []rootEntry `json:"root"`     // the entries of /
	Dev      []rootEntry `json:"dev"`      // the device nodes of /dev
	Binds    []bindMount `json:"binds"`    // user binds, then overlays, in order
	Tmpfs    []Tmpfs     `json:"tmpfs"`    // user tmpfs mounts
	Masks    []string    `json:"masks"`    // paths hidden inside
	Workdir  string      `json:"workdir"`  // absolute
	Env      []string    `json:"env"`      // the complete environment
	Hostname string      `json:"hostname"` // uts name
	Args     []string    `json:"args"`     // command
	// RootMount, when set, is the root itself (a host-made overlay), and
	// Root is empty.
	RootMount *source `json:"root_mount,omitempty"`
	NoAttach  bool    `json:"no_attach"`          // stack seccomp.NoAttachProgram
	User      *User   `json:"user,omitempty"`     // the command's ids; nil: root
	KeepTmp   bool    `json:"keep_tmp,omitempty"` // no tmpfs on /tmp
	// Trees are detached mounts the caller made, attached after the binds.
	Trees []bindMount `json:"trees,omitempty"`
	// Listen are loopback TCP addresses init listens on; WatchNet stacks
	// the notifying filter. Init reports the descriptors in its first
	// message and the host takes them with pidfd_getfd.
	Listen   []string `json:"listen,omitempty"`
	WatchNet bool     `json:"watch_net,omitempty"`
	// WatchFiles installs the files filter instead (Spec.WatchFiles).
	WatchFiles bool `json:"watch_files,omitempty"`
	// PlaceCommand holds the command at its exec stop until the host has
	// placed it in the run's cgroup (set when there are limits).
	PlaceCommand bool       `json:"place_command"`
	TestHooks    *testHooks `json:"test_hooks"` // nil except in this package's tests
}

// source is a host file or tree that becomes a mount inside. As root, the
// host clones it into a detached mount (with Attr applied) and hands init the
// descriptor FD: init, an unprivileged id on the host, never looks host paths
// up. Without root, FD is -1 and init clones Path itself, with the caller's
// own access rights.
//
// Beneath marks a rootfs entry: init (without root) opens it in its
// directory without following symlinks, as the host does.
type source struct {
	Path    string `json:"path"`
	FD      int    `json:"fd"`
	Attr    uint64 `json:"attr"`
	IsFile  bool   `json:"is_file"`
	Beneath bool   `json:"beneath,omitempty"`
}

// rootEntry is one name at the top of / (or of /dev): a symlink to recreate,
// or a source to mount.
type rootEntry struct {
	Name string  `json:"name"`
	Link string  `json:"link,omitempty"`
	Src  *source `json:"src,omitempty"`
}

// bindMount is a user bind: Src mounted at Dst.
type bindMount struct {
	Dst string `json:"dst"`
	Src source `json:"src"`
}

// testHooks weaken the sandbox for tests that must isolate one layer (for
// example the seccomp filter with capabilities kept). Only this package's tests
// can set them; Run never does.
type testHooks struct {
	KeepCaps bool `json:"keep_caps"`
}

// status is one message from init to the host, one JSON object a line.
type status struct {
	Phase    string `json:"phase"` // "started", "error", "exited"
	Error    string `json:"error,omitempty"`
	Step     string `json:"step,omitempty"`
	Hint     string `json:"hint,omitempty"`
	ExitCode int    `json:"exit_code"`
	Signal   int    `json:"signal"`
	UserUS   int64  `json:"user_us"`
	SysUS    int64  `json:"sys_us"`
	MaxRSSKB int64  `json:"max_rss_kb"`
	// In the first message ("placing" or "started"): init's descriptors
	// of the listeners (in Listen's order) and of the seccomp listener
	// (-1 without WatchNet), for the host to take with pidfd_getfd.
	ListenFDs []int `json:"listen_fds,omitempty"`
	NotifyFD  int   `json:"notify_fd,omitempty"`
}

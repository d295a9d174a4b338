//go:build linux

package trapfs

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The root-only tests attach clones of the trap in a child process: the test
// binary re-executed in a mount namespace of its own whose mounts are
// private, so nothing it attaches ever shows in the host's mount table, and
// everything vanishes when it exits.
//
//	test (host ns)                         child (own mount ns)
//	   │ Mount, Clone ×n                        │
//	   │──exec, clones as fds 3…, spec in env──▶│ make / rprivate
//	   │                                        │ move_mount each clone
//	   │                                        │ run phase 0 (locked thread)
//	   │◀──────────── phase 0 results (JSON) ───│
//	   │ (e.g. Close)                           │ wait
//	   │──────────────── "\n" ─────────────────▶│ run phase 1
//	   │◀──────────── phase 1 results (JSON) ───│
//	   │                  …                     │ exit: the mounts go

// helperEnv makes the test binary the child; its value is the JSON spec.
const helperEnv = "PROCTOR_TRAPFS_TEST_CHILD"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(runChild(spec))
	}
	os.Exit(m.Run())
}

// noSkip reports whether a test that cannot run must fail rather than skip:
// under CI (CI=true) or with PROCTOR_NO_SKIP set, as in the rest of the tree.
func noSkip() bool { return os.Getenv("PROCTOR_NO_SKIP") != "" || os.Getenv("CI") == "true" }

// requireFUSE skips the test, naming what is missing, unless the process can
// mount a FUSE filesystem with the new mount API.
func requireFUSE(t testing.TB) {
	t.Helper()
	missing := ""
	if os.Geteuid() != 0 {
		missing = "root (CAP_SYS_ADMIN)"
	} else if fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0); err != nil {
		missing = "/dev/fuse: " + err.Error()
	} else {
		unix.Close(fd)
		if fs, err := unix.Fsopen("fuse", unix.FSOPEN_CLOEXEC); err != nil {
			missing = "fsopen(\"fuse\"): " + err.Error()
		} else {
			unix.Close(fs)
		}
	}
	if missing == "" {
		return
	}
	if noSkip() {
		t.Fatalf("cannot run here: needs %s (under CI a skipped test is a failure)", missing)
	}
	t.Skip("needs " + missing)
}

// recorder collects records.
type recorder struct {
	mu   sync.Mutex
	recs []Access
}

func (r *recorder) record(a Access) {
	r.mu.Lock()
	r.recs = append(r.recs, a)
	r.mu.Unlock()
}

func (r *recorder) all() []Access {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Access(nil), r.recs...)
}

// mountT mounts nodes with a recorder and closes the trap at cleanup.
func mountT(t testing.TB, nodes []Node) (*FS, *recorder) {
	t.Helper()
	requireFUSE(t)
	r := &recorder{}
	f, err := Mount(nodes, r.record)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Error(err)
		}
	})
	return f, r
}

// op is one thing the child does. Paths are relative to the child's
// directory unless absolute.
type op struct {
	Do    string   `json:"do"`
	Path  string   `json:"path,omitempty"`
	Arg   string   `json:"arg,omitempty"`   // second path, xattr name, link target
	Flags int      `json:"flags,omitempty"` // open flags, mode, access mask, count
	Argv  []string `json:"argv,omitempty"`  // for "cmd"
}

// outcome is what an op gave.
type outcome struct {
	Errno   int           `json:"errno"`             // 0: success
	Fault   bool          `json:"fault,omitempty"`   // mmap: reading faulted
	Data    string        `json:"data,omitempty"`    // bytes read
	Names   []string      `json:"names,omitempty"`   // directory entries, xattr names
	Mode    uint32        `json:"mode,omitempty"`    // stat
	Size    int64         `json:"size,omitempty"`    // stat
	UID     uint32        `json:"uid,omitempty"`     // stat
	TID     int           `json:"tid"`               // the thread that did it
	PID     int           `json:"pid,omitempty"`     // "cmd": the command's pid
	Exit    int           `json:"exit,omitempty"`    // "cmd": exit status
	Count   int           `json:"count,omitempty"`   // "statmany": ENOENT answers
	Others  []int         `json:"others,omitempty"`  // "statmany", "statloop": other errnos seen
	Elapsed time.Duration `json:"elapsed,omitempty"` // wall time of the op
}

// childSpec is the child's whole task.
type childSpec struct {
	Dir     string   `json:"dir"`     // working directory, created by the test
	Targets []string `json:"targets"` // Targets[k]: where fd 3+k is attached
	Phases  [][]op   `json:"phases"`
}

// child is a running child.
type child struct {
	cmd *exec.Cmd
	in  *os.File
	out *bufio.Reader
}

// startChild attaches clones of the given nodes (index → target relative to
// dir, which must exist) and runs the phases, the first at once.
func startChild(t *testing.T, f *FS, dir string, attach map[int]string, phases [][]op) *child {
	t.Helper()
	spec := childSpec{Dir: dir, Phases: phases}
	var files []*os.File
	for i, target := range attach {
		c, err := f.Clone(i)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close() // the child has its own copy
		files = append(files, c)
		spec.Targets = append(spec.Targets, target)
	}
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(js))
	cmd.ExtraFiles = files
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = pr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pr.Close()
	c := &child{cmd: cmd, in: pw, out: bufio.NewReader(stdout)}
	t.Cleanup(func() {
		c.in.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return c
}

// results returns the next phase's outcomes, failing after 30 s.
func (c *child) results(t *testing.T) []outcome {
	t.Helper()
	type line struct {
		s   string
		err error
	}
	ch := make(chan line, 1)
	go func() {
		s, err := c.out.ReadString('\n')
		ch <- line{s, err}
	}()
	select {
	case l := <-ch:
		if l.err != nil {
			t.Fatalf("child: %v", l.err)
		}
		var outs []outcome
		if err := json.Unmarshal([]byte(l.s), &outs); err != nil {
			t.Fatalf("child said %q: %v", l.s, err)
		}
		return outs
	case <-time.After(30 * time.Second):
		t.Fatal("child hung")
	}
	return nil
}

// next lets the child run its next phase.
func (c *child) next(t *testing.T) {
	t.Helper()
	if _, err := c.in.WriteString("\n"); err != nil {
		t.Fatal(err)
	}
}

// runChild is the child side. It returns the exit status.
func runChild(js string) int {
	runtime.LockOSThread() // every op on this thread: records carry its id
	var spec childSpec
	if err := json.Unmarshal([]byte(js), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "child: spec:", err)
		return 2
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fmt.Fprintln(os.Stderr, "child: making / private:", err)
		return 2
	}
	for k, target := range spec.Targets {
		target = filepath.Join(spec.Dir, target)
		if err := unix.MoveMount(3+k, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			fmt.Fprintf(os.Stderr, "child: attaching fd %d at %s: %v\n", 3+k, target, err)
			return 2
		}
		unix.Close(3 + k)
	}
	if err := os.Chdir(spec.Dir); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	in := bufio.NewReader(os.Stdin)
	for i, phase := range spec.Phases {
		if i > 0 {
			if _, err := in.ReadString('\n'); err != nil {
				return 0 // the test is done with us
			}
		}
		outs := make([]outcome, len(phase))
		for j, o := range phase {
			start := time.Now()
			outs[j] = do(o)
			outs[j].TID = unix.Gettid()
			outs[j].Elapsed = time.Since(start)
		}
		js, _ := json.Marshal(outs)
		fmt.Printf("%s\n", js)
	}
	return 0
}

// errno extracts the errno of an error, 0 for nil, -1 for others.
func errno(err error) int {
	if err == nil {
		return 0
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return -1
}

// names lists a NUL-separated list.
func names(b []byte) []string {
	var out []string
	for _, s := range strings.Split(string(b), "\x00") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

package trial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proctor-sandbox/proctor/internal/task"
)

// busyboxRootfs fills root with a busybox tree.
func busyboxRootfs(t *testing.T, root string) {
	t.Helper()
	requireTool(t, "busybox")
	bb, _ := exec.LookPath("busybox")
	for _, d := range []string{"bin", "etc", "srv", "root", "run", "var/spool", "dev"} {
		must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
	}
	data, err := os.ReadFile(bb)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(root, "bin", "busybox"), data, 0o755))
	for _, app := range []string{"sh", "cat", "echo", "rm", "true", "id", "ls", "stat", "find", "test", "[", "sleep", "touch"} {
		must(t, os.Symlink("busybox", filepath.Join(root, "bin", app)))
	}
}

// specialRootfs is a busybox root holding what debootstrap, mmdebstrap and
// docker export leave: devices under /dev, and (from a live system's tree)
// fifos, sockets and devices elsewhere.
func specialRootfs(t *testing.T) func(root string) {
	return func(root string) {
		busyboxRootfs(t, root)
		mk := func(rel string, mode uint32, dev int) {
			t.Helper()
			must(t, syscall.Mknod(filepath.Join(root, rel), mode, dev))
		}
		mk("dev/console", syscall.S_IFCHR|0o600, 5<<8|1)
		mk("dev/null", syscall.S_IFCHR|0o666, 1<<8|3)
		mk("dev/sda", syscall.S_IFBLK|0o660, 8<<8|0)
		mk("run/initctl", syscall.S_IFIFO|0o600, 0)
		mk("root/mem", syscall.S_IFCHR|0o640, 1<<8|1)
		mk("var/spool/fifo", syscall.S_IFIFO|0o644, 0)
		l, err := net.Listen("unix", filepath.Join(root, "run", "sock"))
		must(t, err)
		l.(*net.UnixListener).SetUnlinkOnClose(false)
		l.Close()
		// A directory the mask must copy faithfully: owner, mode, time.
		must(t, os.Chown(filepath.Join(root, "var", "spool"), 1, 7))
		must(t, os.Chmod(filepath.Join(root, "var", "spool"), os.ModeSetgid|0o775))
		must(t, os.Chmod(filepath.Join(root, "root"), 0o700))
		stamp := time.Date(2020, 2, 2, 2, 2, 2, 0, time.UTC)
		must(t, os.Chtimes(filepath.Join(root, "var", "spool"), stamp, stamp))
	}
}

// specialCheck, run in the agent's and in the grader's sandbox, prints
// VISIBLE for each of the rootfs's special files it can see, and the
// attributes of the directories that held them.
const specialCheck = `for p in /dev/console /dev/sda /run/initctl /run/sock /root/mem /var/spool/fifo; do
  if [ -e "$p" ] || [ -L "$p" ]; then echo "VISIBLE $p"; fi
done
for p in $(find / -xdev \( -type c -o -type b -o -type p -o -type s \) 2>/dev/null); do echo "VISIBLE $p"; done
stat -c 'attrs %n %u %g %a %Y' /var/spool /root /run`

// A rootfs directory holding devices, fifos and sockets (as debootstrap and
// docker export leave them) is accepted and digested: the trial runs, and
// none of them appears in either sandbox, whose /dev is the harness's,
// while the directories that held them keep their owners, modes and times.
func TestRootfsSpecialFiles(t *testing.T) {
	requireRoot(t)
	tk := writeTask(t, taskSpec{
		grading: "state",
		rootfs:  specialRootfs(t),
		test: `out=$( (` + specialCheck + `) 2>&1)
echo "$out"
case "$out" in *VISIBLE*) echo 0 > /logs/verifier/reward.txt;; *) echo 1 > /logs/verifier/reward.txt;; esac`,
	})
	want, err := task.DigestTree(tk.Proctor.Rootfs, task.DigestOptions{Special: []string{"."}})
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Special) != 7 {
		t.Fatalf("setup: %d special files in the rootfs", len(want.Special))
	}
	v, out := runTrial(t, tk, carried(specialCheck+"; echo made > /srv/out"), "")
	log := readFile(t, filepath.Join(out, AgentLog))
	if !v.Passed || v.Status != StatusClean {
		t.Fatalf("passed=%t status=%s violations=%s error=%q\nagent:\n%s\ngrader:\n%s", v.Passed, v.Status, violations(v), v.Error,
			log, readFile(t, filepath.Join(out, GraderLog)))
	}
	if strings.Contains(log, "VISIBLE") {
		t.Errorf("the agent sees the rootfs's special files:\n%s", log)
	}
	for _, want := range []string{"attrs /var/spool 1 7 2775 1580608922", "attrs /root 0 0 700"} {
		if !strings.Contains(log, want) {
			t.Errorf("agent log lacks %q: the mask changed a directory's attributes:\n%s", want, log)
		}
	}
	if v.Environment.Digest != want.Digest {
		t.Errorf("environment digest %s, want the rootfs's %s", v.Environment.Digest, want.Digest)
	}
	if again, _ := task.DigestTree(tk.Proctor.Rootfs, task.DigestOptions{Special: []string{"."}}); again.Digest != want.Digest {
		t.Error("the rootfs directory changed")
	}
}

// Every check of a task's form, its digest included, completes before the
// agent phase: a fifo, socket or device in tests/, solution/ or the
// workspace (even one inside the rootfs) is refused naming its path, with
// no verdict, no output directory, and no agent run.
func TestTaskFormCheckedBeforeTheAgent(t *testing.T) {
	requireRoot(t)
	cases := map[string]struct {
		spec taskSpec
		path func(tk *task.Task) string
	}{
		"fifo in tests": {taskSpec{test: "echo 1 > /logs/verifier/reward.txt"}, func(tk *task.Task) string { return filepath.Join(tk.Tests, "pipe") }},
		"fifo in the workspace": {taskSpec{test: "echo 1 > /logs/verifier/reward.txt"}, func(tk *task.Task) string {
			return filepath.Join(tk.Proctor.Workspace, "pipe")
		}},
		"device in the solution": {taskSpec{test: "echo 1 > /logs/verifier/reward.txt"}, func(tk *task.Task) string {
			must(t, os.MkdirAll(filepath.Join(tk.Dir, "solution"), 0o755))
			return filepath.Join(tk.Dir, "solution", "dev")
		}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			tk := writeTask(t, c.spec)
			p := c.path(tk)
			if strings.HasPrefix(name, "device") {
				must(t, syscall.Mknod(p, syscall.S_IFCHR|0o600, 1<<8|3))
			} else {
				must(t, syscall.Mkfifo(p, 0o600))
			}
			tk, err := task.Load(tk.Dir)
			must(t, err)
			marker := filepath.Join(t.TempDir(), "agent-ran")
			out := filepath.Join(t.TempDir(), "out")
			v, err := Run(context.Background(), Options{Task: tk, Agent: "true", AgentDir: filepath.Dir(marker), Out: out, CacheDir: sharedCache, Key: testKey})
			if v != nil || !errors.Is(err, task.ErrSpecialFile) || !strings.Contains(err.Error(), p) {
				t.Fatalf("Run = %v, %v: want no verdict and an error naming %s", v, err, p)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("the output directory was made")
			}
		})
	}
}

// A task edited while its trial runs is caught: the trial ends in error,
// not in a verdict on a tree nobody ran. The edit is made once the agent
// is seen running (its process named by a marker), so after the digest
// taken before it.
func TestTaskChangedDuringTheTrial(t *testing.T) {
	requireRoot(t)
	tk := writeTask(t, taskSpec{test: "echo 1 > /logs/verifier/reward.txt"})
	marker := fmt.Sprintf("proctor-mid-trial-%d", time.Now().UnixNano())
	done := make(chan bool)
	go func() {
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, p := range procs {
				if b, _ := os.ReadFile(p); strings.Contains(string(b), marker) {
					os.WriteFile(filepath.Join(tk.Tests, "test.sh"), []byte("#!/bin/sh\necho 1 > /logs/verifier/reward.txt # edited\n"), 0o755)
					done <- true
					return
				}
			}
		}
		done <- false
	}()
	v, _ := runTrial2(t, tk, "bash -c "+shellQuote("exec -a "+marker+" sleep 2"))
	if !<-done {
		t.Fatal("never saw the agent running")
	}
	if v.Passed || v.Status != StatusError || !strings.Contains(v.Error, "changed while its trial ran") {
		t.Fatalf("passed=%t status=%s error=%q: want an error saying the task changed", v.Passed, v.Status, v.Error)
	}
}

// The policy's pristine view calls a special file absent only where the
// mask whites it out: an image's fifo, which stays in the sandbox, is a
// file the environment ships.
func TestPristineSpecialFiles(t *testing.T) {
	lower, mask := t.TempDir(), t.TempDir()
	must(t, os.MkdirAll(filepath.Join(lower, "usr", "bin"), 0o755))
	must(t, os.MkdirAll(filepath.Join(lower, "run"), 0o755))
	must(t, syscall.Mkfifo(filepath.Join(lower, "usr", "bin", "tool"), 0o755))
	must(t, syscall.Mkfifo(filepath.Join(lower, "run", "initctl"), 0o600))
	must(t, os.MkdirAll(filepath.Join(mask, "run"), 0o755))
	must(t, syscall.Mknod(filepath.Join(mask, "run", "initctl"), syscall.S_IFCHR, 0))
	l := &layout{layers: []layer{{dst: "/", lower: lower, mask: mask}}}
	for p, want := range map[string]pristineKind{"/usr/bin/tool": pristineOther, "/run/initctl": pristineAbsent, "/run": pristineDir} {
		if got, err := l.pristine(p); err != nil || got != want {
			t.Errorf("pristine(%s) = %v, %v; want %v", p, got, err, want)
		}
	}
}

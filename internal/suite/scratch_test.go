package suite_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/proctor-sandbox/proctor/internal/diskfs"
)

// A `proctor run` killed with SIGKILL while its agent writes leaves its
// disk mounted (the kernel cannot know it is orphaned); the next `proctor
// run` on the same scratch directory takes it away, and with it the loop
// device and the image: nothing is left, on disk or attached.
func TestKilledRunLeavesNothing(t *testing.T) {
	requireRoot(t)
	scratch := t.TempDir()
	task := filepath.Join(repoRoot(), "examples", "tasks", "hello-state")
	run := func(out, agent string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "run", "--task", task, "--agent", agent, "--out", out,
			"--scratch-dir", scratch, "--cache-dir", cacheDir(t), "-q")
		cmd.Env = append(os.Environ(), "CI=")
		return cmd
	}
	out := filepath.Join(t.TempDir(), "killed")
	killed := run(out, `dd if=/dev/zero of=/root/data bs=1M count=64 conv=fsync 2>/dev/null; echo written; sleep 600`)
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	defer killed.Process.Kill()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(out, "agent.log")); strings.Contains(string(b), "written") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent never wrote its data")
		}
	}
	if a, _ := diskfs.Attached(scratch); len(a) != 1 || len(mountsUnder(scratch)) != 1 {
		t.Fatalf("mid-agent: attached %v, mounted %v; want the agent's disk", a, mountsUnder(scratch))
	}
	killed.Process.Signal(syscall.SIGKILL)
	killed.Wait()
	time.Sleep(100 * time.Millisecond)
	t.Logf("left by the kill: mounted %v", mountsUnder(scratch))

	// A do-nothing agent: judged, not passed (exit 1).
	if b, err := run(filepath.Join(t.TempDir(), "next"), "true").CombinedOutput(); !strings.Contains(string(b), "FAIL hello-state: status clean") {
		t.Fatalf("the next run: %v\n%s", err, b)
	}
	var attached []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		attached, _ = diskfs.Attached(scratch) // AUTOCLEAR works from a queue
		if len(attached) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(attached) > 0 {
		t.Errorf("loop devices left attached: %v", attached)
	}
	if m := mountsUnder(scratch); len(m) > 0 {
		t.Errorf("left mounted: %v", m)
	}
	if des, _ := os.ReadDir(scratch); len(des) > 0 {
		t.Errorf("left in the scratch dir: %d entries, the first %s", len(des), des[0].Name())
	}
}

// mountsUnder lists the mount points beneath dir.
func mountsUnder(dir string) []string {
	var found []string
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			found = append(found, f[4])
		}
	}
	return found
}

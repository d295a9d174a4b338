package trial

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/image"
	"github.com/proctor-sandbox/proctor/internal/task"
)

var (
	busyboxOnce sync.Once
	busyboxErr  error
)

// busyboxImage builds and imports proctor-examples/busybox:1 into the
// shared cache's image store, once per test binary, without Docker.
func busyboxImage(t *testing.T) *image.Image {
	t.Helper()
	requireRoot(t)
	requireTool(t, "busybox")
	requireTool(t, "go")
	busyboxOnce.Do(func() {
		work, err := os.MkdirTemp("", "proctor-busybox-image-")
		if err != nil {
			busyboxErr = err
			return
		}
		defer os.RemoveAll(work)
		out, err := exec.Command("sh", "-c", `set -e
root=$1/rootfs; mkdir -p $root/bin $root/etc $root/tmp $root/app $root/root
cp "$(command -v busybox)" $root/bin/busybox
for a in $(busybox --list); do [ "$a" = busybox ] || ln -s busybox $root/bin/$a; done
echo 'root:x:0:0:root:/root:/bin/sh' > $root/etc/passwd
chmod 1777 $root/tmp
cd "$2" && go run ./examples/images/mkimage -from $root -tag proctor-examples/busybox:1 -o $1/bb.tar`,
			"sh", work, repoRoot(t)).CombinedOutput()
		if err != nil {
			busyboxErr = &buildError{string(out)}
			return
		}
		st, err := image.Open(filepath.Join(sharedCache, ImageStoreDir))
		if err == nil {
			_, err = st.Import(filepath.Join(work, "bb.tar"))
		}
		busyboxErr = err
	})
	if busyboxErr != nil {
		t.Fatal(busyboxErr)
	}
	st, err := image.Open(filepath.Join(sharedCache, ImageStoreDir))
	if err != nil {
		t.Fatal(err)
	}
	img, err := st.Resolve("proctor-examples/busybox:1")
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// A Terminal-Bench-style task runs as written for Harbor: in its image,
// graded in the state the agent left. The oracle passes, a do-nothing agent
// fails, and a reward written ahead of the grader is a violation, not a
// pass (Harbor's shared logs would let it win).
func TestTerminalBenchTask(t *testing.T) {
	img := busyboxImage(t)
	tk, err := task.Load(filepath.Join("testdata", "tb-hello-world"))
	if err != nil {
		t.Fatal(err)
	}
	if tk.Proctor.Rootfs != task.RootfsImage || tk.Proctor.Grading != task.GradingState {
		t.Fatalf("rootfs %q grading %q", tk.Proctor.Rootfs, tk.Proctor.Grading)
	}
	cases := []struct {
		name, agent string
		solution    bool
		passed      bool
		status      Status
	}{
		{"oracle", "sh /solution/solve.sh", true, true, StatusClean},
		{"nop", "true", false, false, StatusClean},
		{"prewrite", "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt", false, false, StatusCompromised},
		{"read-tests", "cat /tests/test.sh; ls /solution", false, false, StatusClean},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			v, err := Run(context.Background(), Options{Task: tk, Agent: c.agent, Solution: c.solution, Out: out,
				CacheDir: sharedCache, Key: testKey})
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, readFile(t, filepath.Join(out, AgentLog)))
			}
			if v.Passed != c.passed || v.Status != c.status {
				t.Errorf("passed=%t status=%s, want %t %s (violations %s)\nagent:\n%s\ngrader:\n%s", v.Passed, v.Status,
					c.passed, c.status, violations(v), readFile(t, filepath.Join(out, AgentLog)), readFile(t, filepath.Join(out, GraderLog)))
			}
			if v.Environment.Digest != img.Digest || v.Environment.Image != "proctor-examples/busybox:1" {
				t.Errorf("environment %+v, want the image's digest %s", v.Environment, img.Digest)
			}
			if c.name == "read-tests" && strings.Contains(readFile(t, filepath.Join(out, AgentLog)), "reward.txt") {
				t.Errorf("the agent read the tests")
			}
			verifiedEvents(t, out)
		})
	}
}

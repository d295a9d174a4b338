package trial

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/image"
	"github.com/proctor-sandbox/proctor/internal/imagebuild"
	"github.com/proctor-sandbox/proctor/internal/task"
)

// A Harbor task whose environment is only an environment/Dockerfile runs:
// the image is built before its first trial (later trials find every
// step cached), the agent and the grader run in it, and the verdict's
// environment digest is the built image's manifest digest, with the
// Dockerfile and its context digest beside it.
func TestDockerfileTask(t *testing.T) {
	busyboxImage(t) // the base, in the shared store
	dir := filepath.Join(t.TempDir(), "built-hello")
	for name, body := range map[string]string{
		"task.toml":      "version = \"1.0\"\n\n[verifier]\ntimeout_sec = 60.0\n\n[agent]\ntimeout_sec = 60.0\n\n[environment]\nbuild_timeout_sec = 120.0\nmemory_mb = 512\n",
		"instruction.md": "Write the greeting the image holds to /app/hello.txt.\n",
		"environment/Dockerfile": "FROM proctor-examples/busybox:1\nWORKDIR /app\nCOPY greeting.txt /opt/greeting.txt\n" +
			"RUN test -f /opt/greeting.txt && echo built > /app/built.txt\n",
		"environment/greeting.txt": "Hello, world!\n",
		"tests/test.sh":            "#!/bin/sh\nif [ -f /app/built.txt ] && cmp -s /app/hello.txt /opt/greeting.txt; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n",
		"solution/solve.sh":        "#!/bin/sh\ncp /opt/greeting.txt /app/hello.txt\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tk, err := task.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Proctor.Rootfs != task.RootfsImage || tk.Environment.Dockerfile == "" {
		t.Fatalf("rootfs %q, dockerfile %q", tk.Proctor.Rootfs, tk.Environment.Dockerfile)
	}
	var digest string
	for _, c := range []struct {
		name, agent string
		solution    bool
		passed      bool
	}{
		{"oracle", "sh /solution/solve.sh", true, true},
		{"nop", "true", false, false},
	} {
		out := filepath.Join(t.TempDir(), "out")
		v, err := Run(context.Background(), Options{Task: tk, Agent: c.agent, Solution: c.solution, Out: out, CacheDir: sharedCache, Key: testKey})
		if err != nil {
			t.Fatalf("%s: Run: %v", c.name, err)
		}
		if v.Passed != c.passed || v.Status != StatusClean {
			t.Errorf("%s: passed=%t status=%s\nagent:\n%s\ngrader:\n%s", c.name, v.Passed, v.Status,
				readFile(t, filepath.Join(out, AgentLog)), readFile(t, filepath.Join(out, GraderLog)))
		}
		if v.Environment.Dockerfile != "environment/Dockerfile" || v.Environment.ContextDigest == "" || v.Environment.Rootfs != task.RootfsImage {
			t.Errorf("%s: environment %+v", c.name, v.Environment)
		}
		if digest != "" && v.Environment.Digest != digest {
			t.Errorf("%s: environment digest %s, the first trial's %s", c.name, v.Environment.Digest, digest)
		}
		digest = v.Environment.Digest
		verifiedEvents(t, out)
	}
	// The same build, asked for directly, is all cached and is the image
	// the trials ran in.
	st, err := image.Open(filepath.Join(sharedCache, ImageStoreDir))
	if err != nil {
		t.Fatal(err)
	}
	res, err := imagebuild.Build(context.Background(), imagebuild.Options{Context: filepath.Join(dir, "environment"),
		Store: st, CacheDir: filepath.Join(sharedCache, BuildCacheDir)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Image.Digest != digest || res.Ran != 0 || res.Image.Build == nil || res.Image.Build.ContextDigest != res.ContextDigest {
		t.Errorf("the built image %s (ran %d, build %+v), the trials' environment %s", res.Image.Digest, res.Ran, res.Image.Build, digest)
	}
}

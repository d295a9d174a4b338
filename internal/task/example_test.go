package task_test

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/proctor-sandbox/proctor/internal/task"
)

// mkTask writes a small task and returns its directory.
func mkTask(config string) string {
	dir, err := os.MkdirTemp("", "task-example-")
	if err != nil {
		log.Fatal(err)
	}
	for name, content := range map[string]string{
		"task.toml":         config,
		"instruction.md":    "Make the tests pass.\n",
		"tests/test.sh":     "#!/bin/sh\npytest /tests\n",
		"solution/solve.sh": "#!/bin/sh\ntrue\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			log.Fatal(err)
		}
		// Fixed modes, whatever the umask, so that the digest is too.
		if err := os.Chmod(p, 0o644); err != nil {
			log.Fatal(err)
		}
		if err := os.Chmod(filepath.Dir(p), 0o755); err != nil {
			log.Fatal(err)
		}
	}
	return dir
}

func ExampleLoad() {
	dir := mkTask(`
[metadata]
name = "fix-the-build"
difficulty = "medium"

[agent]
timeout_sec = 900.0

[environment]
memory = "4G"  # Terminal-Bench's older spelling of memory_mb = 4096

[proctor]
grading = "state"
`)
	defer os.RemoveAll(dir)

	t, err := task.Load(dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t.Name, t.Agent.Timeout, t.Verifier.Timeout)
	fmt.Println(t.Environment.Workdir, t.Environment.MemoryMB, t.Environment.NetworkMode)
	fmt.Println(t.Proctor.Rootfs, t.Proctor.Grading, t.Proctor.PassThreshold)
	fmt.Println(t.Raw["metadata"].(map[string]any)["difficulty"])
	// Output:
	// fix-the-build 15m0s 10m0s
	// /app 4096 no-network
	// host state 1
	// medium
}

func ExampleLoad_error() {
	dir := mkTask(`
[proctor]
grading = "vibes"
`)
	defer os.RemoveAll(dir)

	_, err := task.Load(dir)
	var e *task.Error
	if errors.As(err, &e) {
		fmt.Println(e.Field)
	}
	fmt.Println(errors.Is(err, task.ErrUnknownValue))
	real, _ := filepath.EvalSymlinks(dir)
	fmt.Println(strings.TrimPrefix(err.Error(), real))
	// Output:
	// [proctor].grading
	// true
	// /task.toml: [proctor].grading: unknown value "vibes" (want "workspace" or "state")
}

func ExampleDigest() {
	dir := mkTask("")
	defer os.RemoveAll(dir)

	d, err := task.Digest(dir)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d)

	// One executable bit more is another tree.
	if err := os.Chmod(filepath.Join(dir, "tests/test.sh"), 0o755); err != nil {
		log.Fatal(err)
	}
	d2, _ := task.Digest(dir)
	fmt.Println(d2 != d)
	// Output:
	// sha256:4ed00e8197dd3938e652e6600255bb3ec37b30d9bbe921890600324a2371d323
	// true
}

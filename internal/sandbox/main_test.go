package sandbox

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The test binary plays three parts: the test runner, the sandbox's init
// (re-executed by Run) and the attacker that runs inside the sandbox.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case InitCommand:
			os.Exit(RunInit(os.Args[2:]))
		case attackCommand:
			os.Exit(attackMain(os.Args[2:]))
		case supervisorCommand:
			os.Exit(supervisorMain(os.Args[2:]))
		case unprivilegedCommand:
			os.Exit(unprivilegedMain())
		case sharedNSCommand:
			os.Exit(sharedNSMain(os.Args[2:]))
		}
	}
	before := hostModes()
	code := m.Run()
	// The sandboxes under test must not have changed the host: a sandbox that
	// could chmod a host file is a breach, whichever test caused it.
	if after := hostModes(); after != before {
		fmt.Fprintf(os.Stderr, "host changed during the tests: %s, was %s\n", after, before)
		code = 1
	}
	os.Exit(code)
}

// hostModes describes host files a broken sandbox could damage.
func hostModes() string {
	var out []string
	for _, p := range []string{"/dev/null", "/dev/zero", "/tmp", "/etc/passwd", "/etc/shadow"} {
		fi, err := os.Stat(p)
		if err != nil {
			out = append(out, p+":"+err.Error())
			continue
		}
		out = append(out, fmt.Sprintf("%s:%v", p, fi.Mode()))
	}
	return strings.Join(out, " ")
}

// requireRoot skips a test that needs root, naming what is missing, except
// under CI (CI=true) or with PROCTOR_NO_SKIP set, where a skip would hide an
// untested isolation property and so is a failure.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root (user namespace with a 65,536-id map, cgroups)")
	}
}

func skipOrFail(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("PROCTOR_NO_SKIP") != "" || os.Getenv("CI") == "true" {
		t.Fatalf("cannot run here: %s (under CI a skipped isolation test is a failure)", reason)
	}
	t.Skip(reason)
}

// attackerPath is where the test binary appears inside the sandbox.
const attackerPath = "/attacker"

// attackSpec returns a spec on the host root that runs the attacker with args.
func attackSpec(t *testing.T, args ...string) Spec {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Spec{
		Rootfs: RootfsHost,
		Binds:  []Bind{{Src: self, Dst: attackerPath}},
		Args:   append([]string{attackerPath, attackCommand}, args...),
		Limits: Limits{Timeout: 60 * time.Second},
	}
}

// runSpec runs spec and returns its result and output.
func runSpec(t *testing.T, spec Spec) (*Result, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	spec.Stdout, spec.Stderr = &stdout, &stderr
	res, err := Run(context.Background(), spec)
	if err != nil {
		t.Fatalf("Run(%v): %v\nstderr: %s", spec.Args, err, stderr.String())
	}
	return res, stdout.String(), stderr.String()
}

// attack runs one attack inside a default sandbox and returns its stdout
// lines, failing the test if the attacker itself broke.
func attack(t *testing.T, args ...string) []string {
	t.Helper()
	res, out, errOut := runSpec(t, attackSpec(t, args...))
	if res.ExitCode != 0 {
		t.Fatalf("attacker %v exited %d (signal %d)\nstdout: %s\nstderr: %s", args, res.ExitCode, res.Signal, out, errOut)
	}
	return strings.Split(strings.TrimSpace(out), "\n")
}

// worldReadableDir makes a temp dir that the sandbox's unprivileged root can
// enter (t.TempDir is 0700 and owned by the real root).
func worldReadableDir(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	// t.TempDir's parent is private too; never touch the temp root itself.
	tmp := filepath.Clean(os.TempDir())
	for p := filepath.Dir(d); p != tmp && strings.HasPrefix(p, tmp+"/"); p = filepath.Dir(p) {
		_ = os.Chmod(p, 0o755)
	}
	return d
}

// busyboxRootfs builds a minimal rootfs from the static busybox binary.
func busyboxRootfs(t *testing.T) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		skipOrFail(t, "needs busybox (Debian package busybox-static)")
	}
	root := worldReadableDir(t)
	for _, d := range []string{"bin", "etc", "root", "work"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "bin", "busybox"), data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"sh", "true", "false", "ls", "cat", "echo", "id", "sleep", "mkdir", "touch", "hostname", "env", "ps"} {
		if err := os.Symlink("busybox", filepath.Join(root, "bin", app)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

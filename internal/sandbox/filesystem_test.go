package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// Property 1: pivot_root with the old root detached, only the mounts we made,
// all private.
func TestMountTree(t *testing.T) {
	requireRoot(t)
	secretDir := worldReadableDir(t)
	secret := filepath.Join(secretDir, "secret")
	if err := os.WriteFile(secret, []byte("hidden"), 0o644); err != nil {
		t.Fatal(err)
	}
	allowed := map[string]bool{"/": true, "/attacker": true, "/proc": true, "/dev": true, "/tmp": true, "/dev/pts": true, "/dev/shm": true}
	for _, d := range HostDirs {
		allowed[d] = true
	}
	for _, n := range devNodes {
		allowed["/dev/"+n] = true
	}
	for _, line := range attack(t, "mounts") {
		f := strings.Fields(line)
		mp, fstype, opts, prop := f[0], f[1], f[2], f[3]
		if prop != "private" {
			t.Errorf("mount %s has propagation %q: want private", mp, prop)
		}
		switch {
		case mp == "/":
			if fstype != "tmpfs" || !strings.Contains(opts, "ro") {
				t.Errorf("root is %s %s: want a read-only tmpfs", fstype, opts)
			}
		case strings.HasPrefix(mp, "/proc/"), strings.HasPrefix(mp, "/etc/"):
			// masks over /proc and host secrets
		case strings.HasPrefix(mp, "/usr/"), strings.HasPrefix(mp, "/lib/"):
			// submounts of the host's own directories, carried read-only
		case !allowed[mp]:
			t.Errorf("unexpected mount %s (%s): the host's tree leaks in", mp, fstype)
		}
		if (mp == "/usr" || mp == "/etc" || mp == "/attacker") && !strings.HasPrefix(opts, "ro") {
			t.Errorf("%s mounted %s: want read-only", mp, opts)
		}
		if !strings.Contains(opts, "nosuid") && mp != "/dev/null" && !strings.HasPrefix(mp, "/dev/") && mp != "/proc" {
			t.Errorf("%s mounted %s: want nosuid", mp, opts)
		}
	}
	st := facts(attack(t, "stat", secret, "/sys", "/home", "/root", "/var", "/etc/passwd", "/usr/bin"))
	for p, want := range map[string]string{secret: "ENOENT", "/sys": "ENOENT", "/home": "ENOENT", "/var": "ENOENT", "/etc/passwd": "ok", "/usr/bin": "ok"} {
		if st[p] != want {
			t.Errorf("stat %s inside = %s, want %s", p, st[p], want)
		}
	}
}

// Property 1: a fresh /proc that shows only the sandbox's processes.
func TestFreshProc(t *testing.T) {
	requireRoot(t)
	for _, name := range attack(t, "ls", "/proc") {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if pid > 10 {
			t.Errorf("/proc inside lists pid %d: the host's processes are visible", pid)
		}
	}
	hidden := []string{"/proc/kcore", "/proc/kpagecount", "/proc/kpageflags", "/proc/slabinfo", "/proc/vmallocinfo",
		"/proc/pagetypeinfo", "/proc/sysrq-trigger", "/proc/kallsyms", "/proc/timer_list", "/proc/keys", "/proc/buddyinfo"}
	r := facts(attack(t, append([]string{"read", "/proc/self/status", "/proc/meminfo"}, hidden...)...))
	for _, p := range []string{"/proc/self/status", "/proc/meminfo"} {
		if r[p] != "ok" {
			t.Errorf("%s unreadable: %s", p, r[p])
		}
	}
	// Hidden: unreadable, or read as the empty /dev/null. "read" reports ok
	// for both, so check the content too.
	res, out, _ := runSpec(t, Spec{Rootfs: RootfsHost, Args: append([]string{"sh", "-c", `for f in "$@"; do if [ -r $f ] && [ -s $f -o -n "$(head -c1 $f 2>/dev/null)" ]; then echo "$f"; fi; done`, "sh"}, hidden...)})
	if res.ExitCode != 0 || strings.TrimSpace(out) != "" {
		t.Errorf("host kernel state readable inside: %q (exit %d)", out, res.ExitCode)
	}
	res, _, _ = runSpec(t, Spec{Rootfs: RootfsHost, Args: []string{"sh", "-c", "echo 1 > /proc/sys/kernel/hostname"}})
	if res.ExitCode == 0 {
		t.Error("writing /proc/sys succeeded: want it read-only")
	}
}

// Property 1: a minimal /dev with no devices beyond the five.
func TestMinimalDev(t *testing.T) {
	requireRoot(t)
	got := attack(t, "ls", "/dev")
	want := []string{"fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "urandom", "zero"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("/dev inside = %v, want %v", got, want)
	}
	st := facts(attack(t, "stat", "/dev/vsock", "/dev/kmsg", "/dev/mem", "/dev/vda", "/dev/tty", "/dev/console"))
	for p, v := range st {
		if v != "ENOENT" {
			t.Errorf("%s inside: %s, want ENOENT", p, v)
		}
	}
}

// Property 4: host files are not reachable through ownership: in a rootfs
// directory (not idmapped), files private to the host's root stay private,
// although the sandbox runs as "root".
func TestHostFilesNotReachableThroughOwnership(t *testing.T) {
	requireRoot(t)
	root := busyboxRootfs(t)
	for name, mode := range map[string]os.FileMode{"owner-only": 0o600, "group-only": 0o660, "world": 0o644} {
		p := filepath.Join(root, "etc", name)
		if err := os.WriteFile(p, []byte("host secret"), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
	}
	res, out, errOut := runSpec(t, Spec{Rootfs: root, Args: []string{"sh", "-c",
		"for f in owner-only group-only world; do cat /etc/$f >/dev/null 2>&1 && echo $f ok || echo $f denied; done; id -u"}})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s %s", res.ExitCode, out, errOut)
	}
	got := facts(strings.Split(strings.TrimSpace(out), "\n"))
	if got["owner-only"] != "denied" || got["group-only"] != "denied" {
		t.Errorf("root inside read host-root-owned private files: %q", out)
	}
	if got["world"] != "ok" || !strings.HasSuffix(strings.TrimSpace(out), "\n0") {
		t.Errorf("control: world-readable file and uid 0 inside: %q", out)
	}
}

// Property 4 through a writable bind: what the sandbox writes belongs to
// its unprivileged ids on the host, so it cannot plant a setuid program or a
// file of any host user; a bind the sandbox's ids cannot write stays
// unwritable.
func TestWritableBindCannotPlantHostPrivileges(t *testing.T) {
	requireRoot(t)
	self, _ := os.Executable()
	dir := worldReadableDir(t)
	if err := os.Chown(dir, IDMapBase, IDMapBase); err != nil {
		t.Fatal(err)
	}
	rootOwned := worldReadableDir(t)
	if err := os.WriteFile(filepath.Join(rootOwned, "private"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := `cp /attacker /w/sh && chmod 4755 /w/sh && chown 0:0 /w/sh; touch /w/user; chown 1000:1000 /w/user
cat /r/private >/dev/null 2>&1 && echo read-root-private; echo x > /r/new 2>/dev/null && echo wrote-root-dir; echo end`
	res, out, errOut := runSpec(t, Spec{Rootfs: RootfsHost, Args: []string{"sh", "-c", script},
		Binds: []Bind{{Src: self, Dst: "/attacker"}, {Src: dir, Dst: "/w", Writable: true}, {Src: rootOwned, Dst: "/r", Writable: true}}})
	if res.ExitCode != 0 || !strings.Contains(out, "end") {
		t.Fatalf("exit %d: %q %q", res.ExitCode, out, errOut)
	}
	if strings.Contains(out, "read-root-private") || strings.Contains(out, "wrote-root-dir") {
		t.Errorf("the sandbox reached a host-root-owned bind through ownership: %q", out)
	}
	for _, name := range []string{"sh", "user"} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid < IDMapBase || st.Gid < IDMapBase {
			t.Errorf("%s written inside belongs to host %d:%d (mode %o), a host user's id", name, st.Uid, st.Gid, st.Mode)
		}
		if st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
			t.Errorf("%s is left set-id (mode %o) on the host: whoever runs it gets the sandboxes' ids", name, st.Mode)
		}
	}
	// A set-id file deeper down, behind a symlinked directory name, is
	// found too, and the symlink is not followed out of the bind.
	outside := worldReadableDir(t)
	target := filepath.Join(outside, "keep")
	if err := os.WriteFile(target, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(target, IDMapBase, IDMapBase)
	os.Chmod(target, 0o4755|os.ModeSetuid)
	script = "mkdir -p /w/a/b && cp /attacker /w/a/b/deep && chmod 6755 /w/a/b/deep && ln -s " + outside + " /w/out"
	res, _, errOut = runSpec(t, Spec{Rootfs: RootfsHost, Args: []string{"sh", "-c", script},
		Binds: []Bind{{Src: self, Dst: "/attacker"}, {Src: dir, Dst: "/w", Writable: true}}})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, errOut)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a", "b", "deep")); err != nil || fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("deep set-id file: %v, %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(target); err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Errorf("the scrub followed a symlink out of the bind: %v, %v", fi.Mode(), err)
	}
}

// Property 8: fail closed. A mount that cannot be made stops the run.
func TestFailClosed(t *testing.T) {
	requireRoot(t)
	dir := worldReadableDir(t)
	cases := []struct {
		name string
		mod  func(*Spec)
	}{
		{"bind under the read-only root", func(s *Spec) { s.Binds = []Bind{{Src: dir, Dst: "/usr/proctor-does-not-exist"}} }},
		{"tmpfs under the read-only root", func(s *Spec) { s.Tmpfs = []Tmpfs{{Dst: "/etc/proctor-nope"}} }},
		{"missing workdir", func(s *Spec) { s.Workdir = "/no/such/dir" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := Spec{Rootfs: RootfsHost, Args: []string{"true"}}
			tc.mod(&spec)
			res, err := Run(context.Background(), spec)
			var se *SetupError
			if !errors.As(err, &se) {
				t.Fatalf("Run = %+v, %v; want a *SetupError", res, err)
			}
		})
	}
}

// A directory rootfs is used as / read-only, and its symlinks cannot lead a
// bind destination out of it.
func TestDirectoryRootfs(t *testing.T) {
	requireRoot(t)
	root := busyboxRootfs(t)
	// A hostile symlink in the rootfs pointing at the host.
	if err := os.Symlink("/../../../../etc", filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	res, out, errOut := runSpec(t, Spec{Rootfs: root, Args: []string{"sh", "-c", "id -u; cat /etc/passwd; touch /newfile 2>&1 || echo ro-ok; touch /tmp/x && echo tmp-ok"}})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s %s", res.ExitCode, out, errOut)
	}
	for _, want := range []string{"0\n", "root:x:0:0", "ro-ok", "tmp-ok"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
	// A bind through the symlink lands inside the rootfs's tmpfs root, never
	// on the host's /etc.
	src := worldReadableDir(t)
	_, err := Run(context.Background(), Spec{Rootfs: root, Binds: []Bind{{Src: src, Dst: "/escape/proctor-bind"}}, Args: []string{"true"}})
	if _, serr := os.Stat("/etc/proctor-bind"); serr == nil {
		os.Remove("/etc/proctor-bind")
		t.Fatal("a bind through a rootfs symlink created /etc/proctor-bind on the host")
	}
	var se *SetupError
	if !errors.As(err, &se) {
		t.Errorf("bind onto a missing path under the read-only rootfs /etc: %v, want a *SetupError", err)
	}
}

// sharedNSCommand runs sandboxes in a mount namespace whose mounts are all
// shared (as on systemd hosts) and prints every mount that appeared in it.
const sharedNSCommand = "__sharedns"

func sharedNSMain(args []string) int {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		fmt.Println("make-rshared:", err)
		return 1
	}
	mounts := func() map[string]bool {
		b, _ := os.ReadFile("/proc/self/mountinfo")
		m := map[string]bool{}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 4 {
				m[f[4]] = true
			}
		}
		return m
	}
	before := mounts()
	rootfs, secret := args[0], args[1]
	for _, spec := range []Spec{
		{Rootfs: RootfsHost, Args: []string{"true"}, Masks: []string{"/etc/hostname"}},
		{Rootfs: rootfs, Args: []string{"true"}, Binds: []Bind{{Src: secret, Dst: "/etc/tests"}}},
	} {
		if res, err := Run(context.Background(), spec); err != nil || res.ExitCode != 0 {
			fmt.Printf("run: %v %+v\n", err, res)
			return 1
		}
	}
	for mp := range mounts() {
		if !before[mp] {
			fmt.Printf("leaked %s\n", mp)
		}
	}
	fmt.Println("done")
	return 0
}

// Mounts made inside a sandbox never propagate back to the host or into
// other sandboxes, even where the host's mounts are shared.
func TestNoMountPropagation(t *testing.T) {
	requireRoot(t)
	root := busyboxRootfs(t)
	secret := worldReadableDir(t)
	if err := os.MkdirAll(filepath.Join(root, "etc", "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	cmd := exec.Command(self, sharedNSCommand, root, secret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "done") {
		t.Fatalf("%v: %s", err, out)
	}
	if strings.Contains(string(out), "leaked") {
		t.Errorf("mounts made for a sandbox appeared outside it:\n%s", out)
	}
}

// A rootfs entry is never followed on the host, even when it is swapped for
// a symlink while the sandbox is being built (the host opens it once,
// beneath the rootfs, without following symlinks, and clones the mount from
// that descriptor).
func TestRootfsSymlinkSwapNotFollowed(t *testing.T) {
	requireRoot(t)
	root := busyboxRootfs(t)
	secret := worldReadableDir(t)
	if err := os.WriteFile(filepath.Join(secret, "marker"), []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	// /x alternates between an empty directory and a symlink to the secret.
	dir, link := filepath.Join(root, "x"), filepath.Join(root, "x-link")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				_ = unix.Renameat2(unix.AT_FDCWD, dir, unix.AT_FDCWD, link, unix.RENAME_EXCHANGE)
			}
		}
	}()
	seen := 0
	for i := 0; i < 150; i++ {
		var out bytes.Buffer
		_, err := Run(context.Background(), Spec{Rootfs: root, Args: []string{"sh", "-c", "cat /x/marker /x-link/marker 2>/dev/null"}, Stdout: &out})
		if err == nil && strings.Contains(out.String(), "host secret") {
			seen++
		}
	}
	close(stop)
	<-done
	if seen > 0 {
		t.Errorf("a host directory behind a swapped rootfs symlink was visible inside in %d of 150 runs", seen)
	}
}

// A tmpfs under a bind's destination is mounted on the bind, not hidden
// under it, whatever the order they were given in: writes to it never reach
// the bound host directory.
func TestNestedMountsAreNotShadowed(t *testing.T) {
	requireRoot(t)
	dir := worldReadableDir(t)
	if err := os.Chown(dir, IDMapBase, IDMapBase); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "cache"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chown(filepath.Join(dir, "cache"), IDMapBase, IDMapBase)
	res, out, errOut := runSpec(t, Spec{Rootfs: RootfsHost,
		Tmpfs: []Tmpfs{{Dst: "/work/cache"}},
		Binds: []Bind{{Src: dir, Dst: "/work", Writable: true}},
		Args:  []string{"sh", "-c", "echo x > /work/cache/f && echo ok"}})
	if res.ExitCode != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("exit %d: %q %q", res.ExitCode, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "cache", "f")); err == nil {
		t.Error("a write to the tmpfs under the bind reached the host directory: the tmpfs was shadowed")
	}
}

// A masked file reads as an empty, read-only regular file, a masked
// directory as an empty read-only one, and the host's secrets are masked on
// a host root; nothing of the masking machinery stays visible.
func TestMasks(t *testing.T) {
	requireRoot(t)
	script := `for f in /etc/hostname /etc/shadow /proc/kallsyms; do
  printf '%s %s %s ' $f "$(stat -c %F $f)" "$(wc -c < $f)"; (echo x > $f) 2>/dev/null && echo writable || echo refused
done
printf '/etc/ssl/private %s\n' "$(ls -A /etc/ssl/private | wc -l)"
ls -a / | grep -c proctor-mask || true`
	res, out, errOut := runSpec(t, Spec{Rootfs: RootfsHost, Masks: []string{"/etc/hostname"}, Args: []string{"sh", "-c", script}})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %q %q", res.ExitCode, out, errOut)
	}
	want := "/etc/hostname regular empty file 0 refused\n/etc/shadow regular empty file 0 refused\n" +
		"/proc/kallsyms regular empty file 0 refused\n/etc/ssl/private 0\n0\n"
	if out != want {
		t.Errorf("masks inside:\n%s\nwant:\n%s", out, want)
	}
}

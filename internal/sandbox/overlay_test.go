package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// newLayerDirs makes an upper and a work directory for one overlay, owned by
// the sandbox's root, on a private tmpfs (which supports trusted xattrs).
func newLayerDirs(t *testing.T, base, name string) (upper, work string) {
	t.Helper()
	upper, work = filepath.Join(base, name, "upper"), filepath.Join(base, name, "work")
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(d, RootID(), RootID()); err != nil {
			t.Fatal(err)
		}
	}
	return upper, work
}

func scratchTmpfs(t *testing.T) string {
	t.Helper()
	d := worldReadableDir(t)
	if err := unix.Mount("tmpfs", d, "tmpfs", 0, "mode=0755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(d, unix.MNT_DETACH) })
	return d
}

// A copy-on-write root over a busybox tree: the sandbox's root owns the
// environment's files and may change any of them; every change lands in the
// upper directory and the lower is untouched.
func TestOverlayRootCopyOnWrite(t *testing.T) {
	requireRoot(t)
	lower := busyboxRootfs(t)
	if err := os.WriteFile(filepath.Join(lower, "etc", "motd"), []byte("pristine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(lower, "srv", "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	scratch := scratchTmpfs(t)
	rootUp, rootWork := newLayerDirs(t, scratch, "root")
	wsLower := worldReadableDir(t)
	if err := os.WriteFile(filepath.Join(wsLower, "main.py"), []byte("print(1)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wsUp, wsWork := newLayerDirs(t, scratch, "ws")
	script := strings.Join([]string{
		"set -e",
		"ls -ln /etc/motd /bin/busybox",
		"echo trojan >> /bin/busybox.new",
		"echo changed > /etc/motd",
		"rm -r /srv/old",
		"mkdir -p /opt/new && echo x > /opt/new/f",
		"echo fixed > /app/main.py",
		"cat /app/main.py",
		"pwd",
	}, "\n")
	res, out, errOut := runSpec(t, Spec{
		Overlays: []Overlay{
			{Dst: "/", Lower: []string{lower}, Upper: rootUp, Work: rootWork},
			{Dst: "/app", Lower: []string{wsLower}, Upper: wsUp, Work: wsWork},
		},
		Workdir: "/app",
		Args:    []string{"/bin/sh", "-c", script},
		Limits:  Limits{Timeout: 30 * time.Second},
	})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.ExitCode, out, errOut)
	}
	for _, l := range strings.Split(out, "\n")[:2] {
		if f := strings.Fields(l); len(f) < 4 || f[2] != "0" || f[3] != "0" {
			t.Errorf("environment file shown as %q: want owned by root (0 0)", l)
		}
	}
	if !strings.Contains(out, "fixed\n/app\n") {
		t.Errorf("workspace change not visible or wrong workdir:\n%s", out)
	}
	// The lower layers are untouched.
	if b, _ := os.ReadFile(filepath.Join(lower, "etc", "motd")); string(b) != "pristine\n" {
		t.Errorf("lower /etc/motd is now %q", b)
	}
	if _, err := os.Stat(filepath.Join(lower, "srv", "old")); err != nil {
		t.Errorf("lower /srv/old: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(wsLower, "main.py")); string(b) != "print(1)\n" {
		t.Errorf("lower main.py is now %q", b)
	}
	// Every change is in an upper, owned by the sandbox's ids.
	for _, c := range []struct{ path, want string }{
		{filepath.Join(rootUp, "etc", "motd"), "changed\n"},
		{filepath.Join(rootUp, "opt", "new", "f"), "x\n"},
		{filepath.Join(wsUp, "main.py"), "fixed\n"},
	} {
		b, err := os.ReadFile(c.path)
		if err != nil || string(b) != c.want {
			t.Errorf("%s: %q, %v: want %q", c.path, b, err, c.want)
			continue
		}
		var st unix.Stat_t
		if err := unix.Lstat(c.path, &st); err != nil || st.Uid != uint32(RootID()) {
			t.Errorf("%s owned by %d: want %d", c.path, st.Uid, RootID())
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(rootUp, "srv", "old"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("deleting /srv/old left no whiteout in the upper: %v, mode %o", err, st.Mode)
	}
}

// The attacker, root in a copy-on-write sandbox over the host's /usr, tries to
// reach the real files: through the mount (remount read-write, unmount the
// overlay, write the lower) and through hard links. None may change the host.
func TestOverlayLowerCannotBeWritten(t *testing.T) {
	requireRoot(t)
	lower := worldReadableDir(t)
	victim := filepath.Join(lower, "victim")
	if err := os.WriteFile(victim, []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	scratch := scratchTmpfs(t)
	up, work := newLayerDirs(t, scratch, "data")
	spec := attackSpec(t, "overlay-write", "/data/victim")
	spec.Overlays = []Overlay{{Dst: "/data", Lower: []string{lower}, Upper: up, Work: work}}
	res, out, errOut := runSpec(t, spec)
	if res.ExitCode != 0 {
		t.Fatalf("attacker exited %d\nstdout: %s\nstderr: %s", res.ExitCode, out, errOut)
	}
	if b, _ := os.ReadFile(victim); string(b) != "host\n" {
		t.Errorf("the lower file changed to %q", b)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, "ESCAPED") {
			t.Error(l)
		}
	}
	if b, err := os.ReadFile(filepath.Join(up, "victim")); err != nil || string(b) != "sandbox\n" {
		t.Errorf("the copy-on-write write did not land in the upper: %q, %v", b, err)
	}
}

// overlayWriteAttack is the attacker's side of TestOverlayLowerCannotBeWritten.
func overlayWriteAttack(path string) []string {
	var out []string
	mnt := filepath.Dir(path)
	if err := unix.Mount("", mnt, "", unix.MS_REMOUNT|unix.MS_BIND, ""); err == nil {
		out = append(out, "ESCAPED remounted "+mnt)
	}
	if err := unix.Unmount(mnt, unix.MNT_DETACH); err == nil {
		out = append(out, "ESCAPED unmounted "+mnt)
	}
	if err := unix.Link(path, "/tmp/link"); err == nil {
		if f, err := os.OpenFile("/tmp/link", os.O_WRONLY|os.O_APPEND, 0); err == nil {
			f.WriteString("via link\n")
			f.Close()
		}
	}
	if err := os.WriteFile(path, []byte("sandbox\n"), 0o644); err != nil {
		out = append(out, "cannot write through the overlay: "+err.Error())
	}
	out = append(out, "done")
	return out
}

func TestOverlaySpecErrors(t *testing.T) {
	requireRoot(t)
	d := worldReadableDir(t)
	cases := []struct {
		name string
		spec Spec
		want string
	}{
		{"root overlay and rootfs", Spec{Rootfs: RootfsHost, Overlays: []Overlay{{Dst: "/", Lower: []string{d}, Upper: d, Work: d}}}, "leave rootfs empty"},
		{"relative lower", Spec{Rootfs: RootfsHost, Overlays: []Overlay{{Dst: "/x", Lower: []string{"rel"}, Upper: d, Work: d}}}, "absolute"},
		{"no lower", Spec{Rootfs: RootfsHost, Overlays: []Overlay{{Dst: "/x", Upper: d, Work: d}}}, "no lower"},
		{"missing upper", Spec{Rootfs: RootfsHost, Overlays: []Overlay{{Dst: "/x", Lower: []string{d}, Upper: d + "/nope", Work: d}}}, "no such file"},
		{"bad destination", Spec{Rootfs: RootfsHost, Overlays: []Overlay{{Dst: "x/../y", Lower: []string{d}, Upper: d, Work: d}}}, "overlay"},
		{"same destination as a bind", Spec{Rootfs: RootfsHost, Binds: []Bind{{Src: d, Dst: "/x"}}, Overlays: []Overlay{{Dst: "/x", Lower: []string{d}, Upper: d, Work: d}}}, "two mounts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.spec.Args = []string{"true"}
			_, err := Run(t.Context(), c.spec)
			var se *SpecError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run: %v: want a SpecError containing %q", err, c.want)
			}
		})
	}
}

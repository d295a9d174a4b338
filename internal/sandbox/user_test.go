package sandbox

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Spec.User runs the command as those ids inside, with no capabilities
// left (an image build's RUN after USER); ids outside the map are refused
// before anything starts.
func TestUser(t *testing.T) {
	requireRoot(t)
	root := busyboxRootfs(t)
	spec := Spec{Rootfs: root, Args: []string{"/bin/sh", "-c", "id -u; id -g; id -G; grep CapEff /proc/self/status"},
		User: &User{UID: 1000, GID: 1001, Groups: []uint32{50}}}
	res, out, errOut := runSpec(t, spec)
	if res.ExitCode != 0 {
		t.Fatalf("exit %d: %s", res.ExitCode, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || lines[0] != "1000" || lines[1] != "1001" || !strings.Contains(lines[2], "50") ||
		!strings.HasSuffix(lines[3], "0000000000000000") {
		t.Errorf("as User 1000:1001 (+50): %q", lines)
	}
	spec.User = &User{UID: IDMapSize}
	if _, err := Run(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "id map") {
		t.Errorf("a uid outside the map: %v", err)
	}
}

// Spec.KeepTmp leaves /tmp to the root: what the command writes there is
// in the overlay's upper, as an image build's RUN needs.
func TestKeepTmp(t *testing.T) {
	requireRoot(t)
	lower := busyboxRootfs(t)
	if err := os.Mkdir(filepath.Join(lower, "tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	for _, keep := range []bool{false, true} {
		dir := worldReadableDir(t)
		upper, work := filepath.Join(dir, "upper"), filepath.Join(dir, "work")
		for _, d := range []string{upper, work} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(d, RootID(), RootID()); err != nil {
				t.Fatal(err)
			}
		}
		res, _, errOut := runSpec(t, Spec{Overlays: []Overlay{{Dst: "/", Lower: []string{lower}, Upper: upper, Work: work}},
			Args: []string{"/bin/sh", "-c", "echo x > /tmp/f"}, KeepTmp: keep})
		if res.ExitCode != 0 {
			t.Fatalf("exit %d: %s", res.ExitCode, errOut)
		}
		_, err := os.Stat(filepath.Join(upper, "tmp", "f"))
		if keep != (err == nil) {
			t.Errorf("KeepTmp %t: /tmp/f in the upper: %v", keep, err)
		}
	}
}

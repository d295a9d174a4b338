package hermetic

import (
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// aptRepo builds a small unsigned Debian repository (one package) and
// returns its files by path below /debian/.
func aptRepo(t *testing.T) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	pkg := filepath.Join(dir, "tinytool")
	os.MkdirAll(filepath.Join(pkg, "DEBIAN"), 0o755)
	os.MkdirAll(filepath.Join(pkg, "usr/share/tinytool"), 0o755)
	os.WriteFile(filepath.Join(pkg, "DEBIAN/control"), []byte("Package: tinytool\nVersion: 1.0\nArchitecture: all\n"+
		"Maintainer: Proctor Tests <tests@example.org>\nDescription: a package apt fetches in the tests\n"), 0o644)
	os.WriteFile(filepath.Join(pkg, "usr/share/tinytool/hello"), []byte("hello from tinytool\n"), 0o644)
	deb := filepath.Join(dir, "tinytool_1.0_all.deb")
	cmd := exec.Command("dpkg-deb", "--root-owner-group", "-Zgzip", "--build", pkg, deb)
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1700000000")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	debBytes, _ := os.ReadFile(deb)
	files := map[string][]byte{"pool/main/t/tinytool/tinytool_1.0_all.deb": debBytes}
	packages := fmt.Sprintf("Package: tinytool\nVersion: 1.0\nArchitecture: all\nMaintainer: Proctor Tests <tests@example.org>\n"+
		"Filename: pool/main/t/tinytool/tinytool_1.0_all.deb\nSize: %d\nSHA256: %x\nDescription: a package apt fetches in the tests\n\n",
		len(debBytes), sha256.Sum256(debBytes))
	files["dists/stable/main/binary-amd64/Packages"] = []byte(packages)
	release := "Origin: Proctor\nLabel: Proctor\nSuite: stable\nCodename: stable\nDate: Sat, 01 Nov 2025 00:00:00 UTC\n" +
		"Architectures: amd64 all\nComponents: main\nSHA256:\n" +
		fmt.Sprintf(" %x %d main/binary-amd64/Packages\n", sha256.Sum256([]byte(packages)), len(packages))
	files["dists/stable/Release"] = []byte(release)
	return files
}

// TestApt runs Debian's apt-get (update, then download) against a mirror
// over plain http, through the recorder, then through the replayer with
// the mirror gone: the same package, no violation.
func TestApt(t *testing.T) {
	requireTool(t, "apt-get")
	requireTool(t, "dpkg-deb")
	s := record(t, nil)
	s.w.debFiles = aptRepo(t)
	apt := func(addr string) (string, error) {
		d := t.TempDir()
		for _, sub := range []string{"parts", "trusted.d", "state/lists/partial", "cache/archives/partial", "dl", "prefs.d", "conf.d"} {
			os.MkdirAll(filepath.Join(d, sub), 0o755)
		}
		os.WriteFile(filepath.Join(d, "status"), nil, 0o644)
		os.WriteFile(filepath.Join(d, "sources.list"), []byte("deb [trusted=yes] http://deb.example.org/debian stable main\n"), 0o644)
		opts := []string{"-q", "-o", "Dir::Etc::SourceList=" + d + "/sources.list", "-o", "Dir::Etc::SourceParts=" + d + "/parts",
			"-o", "Dir::Etc::TrustedParts=" + d + "/trusted.d", "-o", "Dir::Etc::Preferences=" + d + "/prefs",
			"-o", "Dir::Etc::PreferencesParts=" + d + "/prefs.d", "-o", "Dir::State=" + d + "/state",
			"-o", "Dir::State::status=" + d + "/status", "-o", "Dir::Cache=" + d + "/cache", "-o", "Debug::NoLocking=1",
			"-o", "APT::Sandbox::User=root", "-o", "APT::Architecture=amd64", "-o", "APT::Architectures=amd64",
			"-o", "Acquire::Languages=none", "-o", "Acquire::http::Proxy=http://" + addr, "-o", "Acquire::Retries=0"}
		var out strings.Builder
		for _, args := range [][]string{{"update"}, {"download", "tinytool"}} {
			cmd := exec.Command("apt-get", append(opts, args...)...)
			cmd.Dir = filepath.Join(d, "dl")
			cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", "APT_CONFIG=/dev/null"}
			b, err := runFor(cmd, time.Minute)
			if err != nil {
				return string(b), fmt.Errorf("apt-get %s: %v", args[0], err)
			}
		}
		b, err := os.ReadFile(filepath.Join(d, "dl", "tinytool_1.0_all.deb"))
		fmt.Fprintf(&out, "deb %x %v\n", sha256.Sum256(b), err)
		return out.String(), nil
	}
	want, err := apt(s.addr)
	if err != nil || !strings.Contains(want, fmt.Sprintf("%x", sha256.Sum256(s.w.debFiles["pool/main/t/tinytool/tinytool_1.0_all.deb"]))) {
		t.Fatalf("apt through the recorder: %v\n%s", err, want)
	}
	r := s.finish()
	s.w.stop()
	rp := s.replay(r)
	for round := range 2 {
		got, err := apt(rp.addr)
		if err != nil || got != want {
			t.Fatalf("apt replayed (round %d): %v\n%s\nrecorded:\n%s", round, err, got, want)
		}
	}
	if v := rp.pd.violations(); len(v) != 0 {
		t.Errorf("violations: %+v", v)
	}
	var urls []string
	for _, e := range r.Exchanges() {
		urls = append(urls, fmt.Sprint(e.Status, " ", e.URL))
	}
	t.Logf("apt fetched:\n%s", strings.Join(urls, "\n"))
}

// runFor runs cmd, killing it after d, and returns its combined output.
func runFor(cmd *exec.Cmd, d time.Duration) ([]byte, error) {
	timer := time.AfterFunc(d, func() {
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
	})
	defer timer.Stop()
	return cmd.CombinedOutput()
}

package testcorpus

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// DebianRoot returns a Debian root filesystem made by mmdebstrap
// (--variant=minbase, --mode=root) for suite with the packages include,
// as a user makes a rootfs directory for a task: device nodes under /dev
// and all. It is built once per machine and kept under the test cache
// ($PROCTOR_TEST_CACHE, else the system's temporary directory), in a
// directory renamed into place whole, under a lock so that test packages
// running at once build it once. mmdebstrap reads the host's apt sources
// itself; nothing here names a mirror. The caller must not write to it.
func DebianRoot(t testing.TB, suite string, include ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "building a Debian root needs root")
	}
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		skipOrFail(t, "needs mmdebstrap (Debian package mmdebstrap; scripts/deps.sh installs it)")
	}
	base := os.Getenv("PROCTOR_TEST_CACHE")
	if base == "" {
		base = os.TempDir()
	}
	sum := sha256.Sum256([]byte("mmdebstrap minbase v1\x00" + suite + "\x00" + strings.Join(include, ",")))
	final := filepath.Join(base, "rootfs", suite+"-"+hex.EncodeToString(sum[:6]))
	return cachedRoot(t, final, func(root string) {
		args := []string{"--variant=minbase", "--mode=root", "--quiet"}
		if len(include) > 0 {
			args = append(args, "--include="+strings.Join(include, ","))
		}
		start := time.Now()
		if out, err := exec.Command("mmdebstrap", append(args, suite, root)...).CombinedOutput(); err != nil {
			t.Fatalf("mmdebstrap %s: %v\n%s", suite, err, out)
		}
		t.Logf("built a Debian %s root with %v in %v", suite, include, time.Since(start).Round(time.Second))
	})
}

// cachedRoot returns the root filesystem at final, having build make it
// (at a path that does not exist yet, in a temporary directory beside
// final, renamed into place whole) unless it is there: under a lock, so
// that test packages running at once build it once.
func cachedRoot(t testing.TB, final string, build func(root string)) string {
	t.Helper()
	if isRoot(final) {
		return final
	}
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(final+".lock", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if isRoot(final) { // built by another package while we waited
		return final
	}
	tmp, err := os.MkdirTemp(dir, "tmp-"+filepath.Base(final)+"-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	root := filepath.Join(tmp, "root")
	build(root)
	if err := os.Rename(root, final); err != nil {
		t.Fatal(err)
	}
	return final
}

// skipOrFail skips the test naming what is missing, or under CI (CI=true,
// or PROCTOR_NO_SKIP set) fails it: there a skipped test is a failure.
func skipOrFail(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" || os.Getenv("PROCTOR_NO_SKIP") != "" {
		t.Fatalf("cannot run here: %s (under CI a skipped test is a failure)", reason)
	}
	t.Skip(reason)
}

// isRoot reports whether dir looks like a finished root filesystem.
func isRoot(dir string) bool {
	fi, err := os.Lstat(filepath.Join(dir, "etc", "os-release"))
	return err == nil && fi.Mode()&os.ModeType == 0 || err == nil && fi.Mode()&os.ModeSymlink != 0
}

// Chroot runs name with args inside root (a root filesystem), with a
// hermetic git environment, and returns its combined output.
func Chroot(t testing.TB, root, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("chroot", append([]string{root, "sh", "-c", `cd "$0" && exec "$@"`, dir}, args...)...)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/nonexistent", "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Upstream", "GIT_AUTHOR_EMAIL=upstream@example.invalid",
		"GIT_COMMITTER_NAME=Upstream", "GIT_COMMITTER_EMAIL=upstream@example.invalid",
		"GIT_AUTHOR_DATE=2024-01-01T00:00:00Z", "GIT_COMMITTER_DATE=2024-01-01T00:00:00Z"}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chroot %s %s: %v\n%s", root, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// TrixieGit is a Debian trixie root with git 2.47 (which makes reftable
// repositories, unlike bookworm's 2.39), python3 (3.13, not the host's)
// and pytest.
func TrixieGit(t testing.TB) string {
	return DebianRoot(t, "trixie", "git", "python3", "python3-pytest")
}

// reftableClone makes at dst a clone of up (a path on the host) with
// reftable ref storage, by the git of a trixie root: up is copied into the
// root, cloned there, and the clone moved out.
func reftableClone(t testing.TB, up, dst string) {
	t.Helper()
	root := TrixieGit(t)
	work, err := os.MkdirTemp(filepath.Join(root, "tmp"), "reftable-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(work)
	copyDir(t, up, filepath.Join(work, "up"))
	in := "/tmp/" + filepath.Base(work)
	Chroot(t, root, in, "git", "clone", "-q", "--ref-format=reftable", "--no-local", "file://"+in+"/up", in+"/clone")
	Chroot(t, root, in+"/clone", "git", "pack-refs") // a compacted table and newer ones
	Chroot(t, root, in+"/clone", "git", "branch", "gone", "origin/side")
	Chroot(t, root, in+"/clone", "git", "branch", "-D", "gone") // a deletion record in the newest table
	if b, err := exec.Command("cp", "-a", filepath.Join(work, "clone"), dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, b)
	}
	if _, err := os.Stat(filepath.Join(dst, ".git", "reftable", "tables.list")); err != nil {
		t.Fatalf("setup: %s is not a reftable repository: %v", dst, err)
	}
	// (This machine's git may be too old to open the repository at all.)
	if out := Git(t, filepath.Dir(dst), "config", "--file", filepath.Join(dst, ".git", "config"), "extensions.refStorage"); out != "reftable" {
		t.Fatalf("setup: extensions.refStorage = %q", out)
	}
}

// DockerExportRoot is a root filesystem as `docker export` or `podman
// export` ship one and a user unpacks it with tar: the trixie root packed
// and unpacked by GNU tar (owners, modes, set-id bits and device nodes
// kept), with what the container engine adds (/.dockerenv, the files it
// mounts over /etc, its /dev/console and mount points). Cached like
// DebianRoot.
func DockerExportRoot(t testing.TB) string {
	t.Helper()
	src := TrixieGit(t)
	return cachedRoot(t, src+"-docker-export", func(root string) {
		tarball := root + ".tar"
		defer os.Remove(tarball)
		if err := os.Mkdir(root, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"tar", "--numeric-owner", "-cpf", tarball, "-C", src, "."},
			{"tar", "--numeric-owner", "-xpf", tarball, "-C", root},
		} {
			if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
		dockerAdds(t, root)
	})
}

// dockerAdds adds to root what a container engine puts in an export: the
// files it mounts over /etc, /.dockerenv, its /dev/console and mount points.
func dockerAdds(t testing.TB, root string) {
	for name, content := range map[string]string{
		".dockerenv": "", "etc/hostname": "3f2a9c1e7b44\n", "etc/resolv.conf": "nameserver 10.0.2.3\n",
		"etc/hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n172.17.0.2\t3f2a9c1e7b44\n",
	} {
		writeFile(t, filepath.Join(root, name), content)
	}
	os.Remove(filepath.Join(root, "dev", "console"))
	if err := unix.Mknod(filepath.Join(root, "dev", "console"), unix.S_IFCHR|0o620, int(unix.Mkdev(136, 0))); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"dev/pts", "dev/shm", "proc", "sys"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// AptHosts returns the hosts a Debian root's apt fetches from, read from
// its own sources at test time (one-line and deb822 files alike): the
// repository names no mirror.
func AptHosts(t testing.TB, root string) []string {
	t.Helper()
	var hosts []string
	files, _ := filepath.Glob(filepath.Join(root, "etc/apt/sources.list.d/*"))
	for _, f := range append([]string{filepath.Join(root, "etc/apt/sources.list")}, files...) {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, field := range strings.Fields(string(b)) {
			if u, err := url.Parse(field); err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" {
				hosts = append(hosts, u.Host)
			}
		}
	}
	slices.Sort(hosts)
	hosts = slices.Compact(hosts)
	if len(hosts) == 0 {
		t.Fatalf("no apt source in %s", root)
	}
	return hosts
}

package sandbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// lines turns attacker output into a map of "key rest".
func facts(lines []string) map[string]string {
	m := map[string]string{}
	for _, l := range lines {
		k, v, _ := strings.Cut(l, " ")
		m[k] = v
	}
	return m
}

// Property 1: own namespaces of every kind.
func TestOwnNamespaces(t *testing.T) {
	requireRoot(t)
	inside := facts(attack(t, "ns"))
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		host, err := os.Readlink("/proc/self/ns/" + ns)
		if err != nil {
			t.Fatal(err)
		}
		if inside[ns] == "" || inside[ns] == host {
			t.Errorf("%s namespace inside = %q, host = %q: want a new one", ns, inside[ns], host)
		}
	}
	if inside["hostname"] != "proctor" {
		t.Errorf("hostname inside = %q, want proctor", inside["hostname"])
	}
}

// Property 2: only lo, up; nothing on the host reachable.
func TestNoNetwork(t *testing.T) {
	requireRoot(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	abstract := fmt.Sprintf("proctor-test-%d", os.Getpid())
	ul, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer ul.Close()
	targets := []string{l.Addr().String()}
	// Every address of the host, beyond loopback.
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			targets = append(targets, net.JoinHostPort(ipn.IP.String(), strconv.Itoa(l.Addr().(*net.TCPAddr).Port)))
		}
	}
	// A control: the host itself can reach the listener.
	if c, err := net.Dial("tcp", l.Addr().String()); err != nil {
		t.Fatalf("control dial from the host failed: %v", err)
	} else {
		c.Close()
	}
	out := attack(t, "net", strings.Join(targets, ","), abstract)
	var ifs []string
	for _, line := range out {
		f := strings.Fields(line)
		switch f[0] {
		case "if":
			ifs = append(ifs, f[1]+" "+f[2])
		case "tcp":
			if f[2] == "connected" {
				t.Errorf("sandbox reached host address %s", f[1])
			}
		case "abstract":
			if f[1] == "connected" {
				t.Errorf("sandbox reached the host's abstract unix socket @%s", abstract)
			}
		case "lo-self":
			if f[1] != "connected" {
				t.Errorf("loopback inside the sandbox does not work: %s", f[1])
			}
		}
	}
	if !slices.Equal(ifs, []string{"lo up=true"}) {
		t.Errorf("interfaces inside = %v, want only lo, up", ifs)
	}
}

// Property 2: no thread of init is left in the host's network namespace,
// where /proc/1/task/*/net would show the host's interfaces and sockets.
func TestInitThreadsInsideNetwork(t *testing.T) {
	requireRoot(t)
	lines := attack(t, "initnet")
	if len(lines) < 2 {
		t.Fatalf("init has %d threads: %v; the test needs several", len(lines), lines)
	}
	for _, l := range lines {
		task, ifs, _ := strings.Cut(l, " ")
		if ifs != "lo" && ifs != "EACCES" && ifs != "EPERM" && ifs != "ENOENT" {
			t.Errorf("init %s sees interfaces %q: the host's network shows through /proc/1/task", task, ifs)
		}
	}
}

// Property 3: the seccomp filter refuses what it must; each probe would
// succeed or fail differently without the filter.
func TestSeccompRefuses(t *testing.T) {
	requireRoot(t)
	got := facts(attack(t, "syscalls"))
	want := map[string]string{
		"unshare-user": "EPERM", "clone-newuser": "EPERM", "clone3": "ENOSYS",
		"io_uring_setup": "EPERM", "keyctl": "EPERM", "add_key": "EPERM", "userfaultfd": "EPERM",
		"perf_event_open": "EPERM", "name_to_handle_at": "EPERM", "kcmp": "EPERM", "pidfd_getfd": "EPERM",
		"socket-vsock": "EPERM", "socket-alg": "EPERM", "socket-vsock-highbits": "EPERM",
		"socket-inet": "ok", "tiocsctty": "ok", "tiocsti": "EPERM", "tiocsti-highbits": "EPERM",
		"tioclinux": "EPERM", "tcgets": "ok", "seccomp-mode": "2",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s inside: %q, want %q", k, got[k], v)
		}
	}
}

// Property 3: with capabilities kept (a test hook), the filter alone must
// still refuse the mount family and namespace changes.
func TestSeccompRefusesMountsEvenWithCaps(t *testing.T) {
	requireRoot(t)
	spec := attackSpec(t, "mountsys")
	if err := spec.validate(); err != nil {
		t.Fatal(err)
	}
	is, err := spec.initSpec()
	if err != nil {
		t.Fatal(err)
	}
	is.TestHooks = &testHooks{KeepCaps: true}
	var out bytes.Buffer
	spec.Stdout, spec.Stderr = &out, os.Stderr
	res, err := run(context.Background(), &spec, is)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v %+v\n%s", err, res, out.String())
	}
	got := facts(strings.Split(strings.TrimSpace(out.String()), "\n"))
	for _, k := range []string{"mount", "umount2", "fsopen", "open_tree", "unshare-mnt", "setns"} {
		if got[k] != "EPERM" {
			t.Errorf("%s with capabilities kept: %q, want EPERM from the filter", k, got[k])
		}
	}
	if got["sethostname-allowed"] != "ok" {
		t.Errorf("control: sethostname with capabilities kept = %q, want ok (else this test proves nothing)", got["sethostname-allowed"])
	}
}

// Property 3: foreign ABIs are killed.
func TestSeccompKillsForeignABI(t *testing.T) {
	requireRoot(t)
	if !isAMD64 {
		t.Skip("x32 and i386 ABIs exist on amd64 only")
	}
	res, out, _ := runSpec(t, attackSpec(t, "x32"))
	if res.Signal != int(syscall.SIGSYS) {
		t.Errorf("x32 syscall: signal %d, output %q; want death by SIGSYS", res.Signal, out)
	}
	dir := worldReadableDir(t)
	elf := filepath.Join(dir, "int80")
	if err := os.WriteFile(elf, int80ELF(), 0o755); err != nil {
		t.Fatal(err)
	}
	// Control: the same program outside the sandbox. Where the kernel runs
	// i386 syscalls it exits 0, and inside it must die by SIGSYS, the
	// filter's doing. Where the kernel has no IA32 emulation (some VM
	// kernels) int 0x80 faults before any filter sees it, inside and out:
	// the ABI is unreachable, and inside it must not run either.
	native := execNoSandbox(elf)
	var ee *exec.ExitError
	noIA32 := errors.As(native, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGSEGV
	if native != nil && !noIA32 {
		t.Fatalf("control run of int80 outside the sandbox: %v", native)
	}
	res, _, _ = runSpec(t, Spec{Rootfs: RootfsHost, Binds: []Bind{{Src: elf, Dst: "/int80"}}, Args: []string{"/int80"}})
	switch {
	case noIA32:
		t.Logf("this kernel has no IA32 emulation: int 0x80 faults outside the sandbox too")
		if res.ExitCode == 0 && res.Signal == 0 {
			t.Errorf("i386 syscall through int 0x80 ran inside the sandbox, where the kernel refuses it outside")
		}
	case res.Signal != int(syscall.SIGSYS):
		t.Errorf("i386 syscall through int 0x80: exit %d signal %d, want death by SIGSYS", res.ExitCode, res.Signal)
	}
}

// int80ELF is a minimal static x86-64 ELF that calls getpid through the i386
// entry (int 0x80) and then exits 0 through the native one.
func int80ELF() []byte {
	code := []byte{
		0xb8, 0x14, 0x00, 0x00, 0x00, // mov eax, 20 (i386 getpid)
		0xcd, 0x80, // int 0x80
		0xb8, 0x3c, 0x00, 0x00, 0x00, // mov eax, 60 (exit)
		0x31, 0xff, // xor edi, edi
		0x0f, 0x05, // syscall
	}
	const base, hdr = 0x400000, 64 + 56
	var b bytes.Buffer
	le := binary.LittleEndian
	b.Write([]byte{0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	binary.Write(&b, le, uint16(2))        // ET_EXEC
	binary.Write(&b, le, uint16(0x3e))     // EM_X86_64
	binary.Write(&b, le, uint32(1))        // version
	binary.Write(&b, le, uint64(base+hdr)) // entry
	binary.Write(&b, le, uint64(64))       // phoff
	binary.Write(&b, le, uint64(0))        // shoff
	binary.Write(&b, le, uint32(0))        // flags
	binary.Write(&b, le, []uint16{64, 56, 1, 64, 0, 0})
	binary.Write(&b, le, []uint32{1, 5}) // PT_LOAD, R+X
	binary.Write(&b, le, []uint64{0, base, base, uint64(hdr + len(code)), uint64(hdr + len(code)), 0x1000})
	b.Write(code)
	return b.Bytes()
}

// Property 4: root inside is an unprivileged host id; no_new_privs; at most
// Docker's capabilities; no supplementary groups.
func TestPrivileges(t *testing.T) {
	requireRoot(t)
	got := facts(attack(t, "ids"))
	wantMap := fmt.Sprintf("0 %d %d", IDMapBase, IDMapSize)
	if got["/proc/self/uid_map"] != wantMap || got["/proc/self/gid_map"] != wantMap {
		t.Errorf("id maps inside: uid %q gid %q, want %q", got["/proc/self/uid_map"], got["/proc/self/gid_map"], wantMap)
	}
	if got["Groups"] != "" {
		t.Errorf("supplementary groups inside: %q, want none (host groups would grant access)", got["Groups"])
	}
	if got["NoNewPrivs"] != "1" {
		t.Errorf("NoNewPrivs = %q, want 1", got["NoNewPrivs"])
	}
	want := fmt.Sprintf("%016x", capMask(commandCaps))
	for _, k := range []string{"CapPrm", "CapEff", "CapBnd", "CapInh"} {
		if got[k] != want {
			t.Errorf("%s = %s, want %s (Docker's default set)", k, got[k], want)
		}
	}
	if got["CapAmb"] != "0000000000000000" {
		t.Errorf("CapAmb = %s, want none", got["CapAmb"])
	}
	for _, c := range []uint{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SYS_PTRACE, unix.CAP_SYS_MODULE, unix.CAP_DAC_READ_SEARCH, unix.CAP_SYS_RAWIO, unix.CAP_BPF, unix.CAP_PERFMON} {
		if capMask(commandCaps)&(1<<c) != 0 {
			t.Errorf("capability %d is in the command's set", c)
		}
	}
}

// Property 4: a setuid-root binary gains nothing.
func TestSetuidGainsNothing(t *testing.T) {
	requireRoot(t)
	dir := worldReadableDir(t)
	self, _ := os.Executable()
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	suid := filepath.Join(dir, "suid")
	if err := os.WriteFile(suid, data, 0o755); err != nil {
		t.Fatal(err)
	}
	// Owned by the id that is root inside, setuid.
	if err := os.Chown(suid, IDMapBase, IDMapBase); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(suid, 0o4755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	spec := attackSpec(t, "setuid", "/suid/suid")
	spec.Binds = append(spec.Binds, Bind{Src: dir, Dst: "/suid"})
	res, out, errOut := runSpec(t, spec)
	if res.ExitCode != 0 {
		t.Fatalf("attacker failed: %s %s", out, errOut)
	}
	if got := facts(strings.Split(strings.TrimSpace(out), "\n"))["euid-after-setuid-exec"]; got != "1000" {
		t.Errorf("euid after exec of a setuid-root binary = %q, want 1000", got)
	}
}

// Property 5: cleared environment, only fds 0-2, new session, no terminal.
func TestCleanProcessState(t *testing.T) {
	requireRoot(t)
	t.Setenv("PROCTOR_TEST_SECRET", "leaked")
	// A descriptor deliberately left inheritable.
	fd, err := syscall.Open("/etc/hostname", syscall.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	spec := attackSpec(t, "env")
	spec.Env = []string{"FOO=bar"}
	res, out, _ := runSpec(t, spec)
	if res.ExitCode != 0 {
		t.Fatal(out)
	}
	env := strings.Split(strings.TrimSpace(out), "\n")
	want := []string{"FOO=bar", "HOME=/root", "PATH=" + DefaultPath}
	if !slices.Equal(env, want) {
		t.Errorf("environment inside = %v, want %v", env, want)
	}
	got := facts(attack(t, "fds"))
	if got["fds"] != "0,1,2" {
		t.Errorf("open fds inside = %s, want 0,1,2", got["fds"])
	}
	if got["session-leader"] != "true" || got["tty_nr"] != "0" || got["dev-tty"] == "ok" {
		t.Errorf("session/terminal inside: %v, want a new session with no controlling terminal", got)
	}
}

// Property 7's precondition: the command cannot stop init early, so its own
// status is what gets reported.
func TestInitIgnoresSignals(t *testing.T) {
	requireRoot(t)
	for _, pids := range []int64{0, 64} { // without and with a cgroup placement
		for i := 0; i < 5; i++ {
			spec := attackSpec(t, "killinit")
			spec.Limits.Pids = pids
			res, out, errOut := runSpec(t, spec)
			if res.ExitCode != 7 || !strings.Contains(out, "init survived") {
				t.Fatalf("after signalling init (pids %d): %+v, %q %q; want the command's own exit 7", pids, res, out, errOut)
			}
		}
	}
}

// Queued signals and kernel-sent I/O signals cannot reach init either: the
// filter refuses them, so init lives on and the command's own exit is
// reported.
func TestInitSurvivesQueuedSignals(t *testing.T) {
	requireRoot(t)
	res, out, errOut := runSpec(t, attackSpec(t, "sigqueue", "9"))
	if res.ExitCode != 9 {
		t.Fatalf("result %+v, %q %q; want the command's own exit 9", res, out, errOut)
	}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		name, result, _ := strings.Cut(l, " ")
		want := "EPERM"
		if name == "f_setown-init" {
			want = "ok" // harmless alone: the signal it brings is SIGIO, which init ignores
		}
		if result != want {
			t.Errorf("%s: %s, want %s", name, result, want)
		}
	}
}

// A command that makes init its tracer again is not taken for ended when it
// stops: its own exit status is reported.
func TestRetracedCommandIsNotEnded(t *testing.T) {
	requireRoot(t)
	res, out, errOut := runSpec(t, attackSpec(t, "retrace", "5"))
	if res.ExitCode != 5 || !strings.Contains(out, "still running") {
		t.Errorf("result %+v, %q %q; want the command's own exit 5", res, out, errOut)
	}
}

// Property 5: the proctor binary cannot be opened for writing from inside.
func TestBinaryNotWritable(t *testing.T) {
	requireRoot(t)
	self, _ := os.Executable()
	before := fileDigest(t, self)
	got := facts(attack(t, "exe"))
	for _, k := range []string{"write-proc1-exe", "reopen-write", "read-proc1-environ", "open-proc1-mem"} {
		if v, ok := got[k]; ok && v == "ok" {
			t.Errorf("%s succeeded inside: init's binary or memory is reachable", k)
		}
	}
	if got["write-proc1-exe"] == "" {
		t.Errorf("attack did not run: %v", got)
	}
	if fileDigest(t, self) != before {
		t.Fatal("the proctor binary changed")
	}
}

func fileDigest(t *testing.T, p string) [32]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// Bad input never starts anything and names the field.
func TestSpecErrors(t *testing.T) {
	cases := []struct {
		field string
		spec  Spec
	}{
		{"command", Spec{Rootfs: RootfsHost}},
		{"rootfs", Spec{Rootfs: "/no/such/rootfs", Args: []string{"true"}}},
		{"rootfs", Spec{Rootfs: "relative", Args: []string{"true"}}},
		{"bind", Spec{Rootfs: RootfsHost, Args: []string{"true"}, Binds: []Bind{{Src: "/no/such/src", Dst: "/x"}}}},
		{"bind", Spec{Rootfs: RootfsHost, Args: []string{"true"}, Binds: []Bind{{Src: "/etc", Dst: "relative"}}}},
		{"bind", Spec{Rootfs: RootfsHost, Args: []string{"true"}, Binds: []Bind{{Src: "/etc", Dst: "/a/../b"}}}},
		{"tmpfs", Spec{Rootfs: RootfsHost, Args: []string{"true"}, Tmpfs: []Tmpfs{{Dst: "/"}}}},
		{"workdir", Spec{Rootfs: RootfsHost, Args: []string{"true"}, Workdir: "rel"}},
		{"env", Spec{Rootfs: RootfsHost, Args: []string{"true"}, Env: []string{"NOEQUALS"}}},
		{"memory", Spec{Rootfs: RootfsHost, Args: []string{"true"}, Limits: Limits{MemoryBytes: -1}}},
		{"bind/tmpfs", Spec{Rootfs: RootfsHost, Args: []string{"true"}, Binds: []Bind{{Src: "/etc", Dst: "/w"}}, Tmpfs: []Tmpfs{{Dst: "/w/"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.field, func(t *testing.T) {
			_, err := Run(context.Background(), tc.spec)
			var se *SpecError
			if !errors.As(err, &se) || se.Field != tc.field {
				t.Fatalf("Run = %v; want a *SpecError on %s", err, tc.field)
			}
		})
	}
}

const isAMD64 = runtime.GOARCH == "amd64"

// execNoSandbox runs path directly and reports how it ended.
func execNoSandbox(path string) error {
	return exec.Command(path).Run()
}

// unprivilegedCommand makes the test binary run sandboxes as an ordinary user.
const unprivilegedCommand = "__unprivileged"

func unprivilegedMain() int {
	self, _ := os.Executable()
	for _, args := range [][]string{{"ids"}, {"ns"}, {"fds"}} {
		spec := Spec{
			Rootfs: RootfsHost,
			Binds:  []Bind{{Src: self, Dst: attackerPath}},
			Args:   append([]string{attackerPath, attackCommand}, args...),
			Stdout: os.Stdout, Stderr: os.Stderr,
		}
		res, err := Run(context.Background(), spec)
		if err != nil || res.ExitCode != 0 {
			fmt.Printf("run-failed %v %+v\n", err, res)
			return 1
		}
	}
	// Limits need cgroups this user cannot write: fail closed.
	_, err := Run(context.Background(), Spec{Rootfs: RootfsHost, Args: []string{"true"}, Limits: Limits{MemoryBytes: 64 << 20}})
	var se *SetupError
	fmt.Printf("limits-without-cgroup-access %v\n", errors.As(err, &se))
	return 0
}

// Without root, the caller's own id is root inside and the same isolation
// holds (as far as the kernel allows unprivileged user namespaces).
func TestUnprivileged(t *testing.T) {
	requireRoot(t) // to switch to an ordinary user
	dir := worldReadableDir(t)
	self, _ := os.Executable()
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, unprivilegedCommand)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("as nobody: %v\n%s", err, out)
	}
	got := facts(strings.Split(strings.TrimSpace(string(out)), "\n"))
	if got["/proc/self/uid_map"] != "0 65534 1" {
		t.Errorf("uid map as nobody = %q, want root inside mapped to 65534 alone", got["/proc/self/uid_map"])
	}
	if got["NoNewPrivs"] != "1" || got["Seccomp"] != "2" || got["CapEff"] != fmt.Sprintf("%016x", capMask(commandCaps)) {
		t.Errorf("privileges as nobody: %v", got)
	}
	for _, ns := range []string{"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"} {
		host, _ := os.Readlink("/proc/self/ns/" + ns)
		if got[ns] == "" || got[ns] == host {
			t.Errorf("%s namespace as nobody = %q (host %q)", ns, got[ns], host)
		}
	}
	if got["fds"] != "0,1,2" {
		t.Errorf("fds as nobody: %q", got["fds"])
	}
	if got["limits-without-cgroup-access"] != "true" {
		t.Errorf("limits without cgroup access: %q, want a SetupError", got["limits-without-cgroup-access"])
	}
}

// Property 3's other half: ordinary developer work keeps working under the
// filter and the reduced capabilities.
func TestDeveloperToolsWork(t *testing.T) {
	requireRoot(t)
	cases := []struct {
		tool   string
		script string
		want   string
	}{
		{"gcc", `cd /tmp && printf '#include <stdio.h>\n#include <pthread.h>\nvoid *f(void *a){return a;}\nint main(){pthread_t t;pthread_create(&t,0,f,0);pthread_join(t,0);puts("compiled ok");return 0;}\n' > a.c && gcc -O1 -pthread a.c -o a && ./a`, "compiled ok"},
		{"git", `cd /tmp && git init -q r && cd r && git config user.email a@b && git config user.name a && echo x > f && git add f && git commit -qm m && git log --oneline | wc -l`, "1"},
		{"python3", `python3 -c "
import subprocess, threading, multiprocessing, os, tempfile
t = threading.Thread(target=lambda: None); t.start(); t.join()
with multiprocessing.Pool(2) as p: assert p.map(abs, [-1, -2]) == [1, 2]
assert subprocess.run(['true']).returncode == 0
tempfile.mkstemp()
print('python ok')
"`, "python ok"},
		{"sh", `ps >/dev/null 2>&1; cat /proc/self/status >/dev/null && ulimit -n && echo shell ok`, "shell ok"},
	}
	for _, tc := range cases {
		t.Run(tc.tool, func(t *testing.T) {
			if _, err := exec.LookPath(tc.tool); err != nil {
				skipOrFail(t, tc.tool+" is not installed")
			}
			res, out, errOut := runSpec(t, Spec{Rootfs: RootfsHost, Args: []string{"sh", "-c", tc.script}, Env: []string{"HOME=/tmp"}, Limits: Limits{Timeout: time.Minute}})
			if res.ExitCode != 0 || !strings.Contains(out, tc.want) {
				t.Errorf("%s in the sandbox: exit %d, stdout %q, stderr %q", tc.tool, res.ExitCode, out, errOut)
			}
		})
	}
}

// With NoAttach, nothing in the sandbox can take hold of another process of
// it (a grader's tests cannot trace or read the verifier); without, the same
// user may, as on any Linux host, which proves the attacker's attempts work.
func TestNoAttach(t *testing.T) {
	requireRoot(t)
	for _, noAttach := range []bool{false, true} {
		spec := attackSpec(t, "attach")
		spec.NoAttach = noAttach
		res, out, errOut := runSpec(t, spec)
		if res.ExitCode != 0 {
			t.Fatalf("attacker: %+v\n%s\n%s", res, out, errOut)
		}
		want := "ok"
		if noAttach {
			want = "EPERM"
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			name, got, _ := strings.Cut(l, " ")
			if got != want {
				t.Errorf("NoAttach=%t: %s: %s, want %s", noAttach, name, got, want)
			}
		}
	}
}

// Init leaves no signal at its default action (SIGKILL and SIGSTOP aside):
// each is ignored or handled by the runtime. A default-action signal can
// kill a namespace's init from inside when it arrives while one of init's
// threads blocks it (as a Go signal handler does), which is how signal 34
// once voided runs under load.
func TestInitHasNoDefaultSignals(t *testing.T) {
	requireRoot(t)
	var ign, cgt uint64
	for _, l := range attack(t, "initsigs") {
		k, v, _ := strings.Cut(l, ":")
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		switch k {
		case "SigIgn":
			ign = n
		case "SigCgt":
			cgt = n
		default:
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
	}
	for s := 1; s <= 64; s++ {
		if s == 9 || s == 19 {
			continue
		}
		if (ign|cgt)>>(s-1)&1 == 0 {
			t.Errorf("signal %d is at its default action in init (SigIgn %016x, SigCgt %016x)", s, ign, cgt)
		}
	}
}

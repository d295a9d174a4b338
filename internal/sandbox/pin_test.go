package sandbox

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// shellSpec is a host-root spec running a shell script.
func shellSpec(script string) Spec {
	return Spec{Rootfs: RootfsHost, Args: []string{"/bin/sh", "-c", script}, Limits: Limits{Timeout: 30 * time.Second}}
}

func uptime(t *testing.T, s string) float64 {
	t.Helper()
	f := strings.Fields(s)
	if len(f) == 0 {
		t.Fatalf("no uptime in %q", s)
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		t.Fatalf("uptime %q: %v", s, err)
	}
	return v
}

// With a time namespace, uptime and the monotonic clock start at zero in
// every run; without one, the sandbox sees the host's.
func TestPinTimeNamespace(t *testing.T) {
	requireRoot(t)
	host, err := os.ReadFile("/proc/uptime")
	if err != nil {
		t.Fatal(err)
	}
	if uptime(t, string(host)) < 10 {
		time.Sleep(10 * time.Second) // so that "starts at zero" differs from the host
	}
	spec := shellSpec("cat /proc/uptime")
	spec.Pin.TimeNS = true
	res, out, _ := runSpec(t, spec)
	if len(res.Unpinned) != 0 || res.ExitCode != 0 {
		t.Fatalf("unpinned %q, exit %d", res.Unpinned, res.ExitCode)
	}
	if in := uptime(t, out); in > 5 {
		t.Errorf("uptime inside a time namespace is %v s, want under 5 (it starts at zero)", in)
	}
	res, out, _ = runSpec(t, shellSpec("cat /proc/uptime"))
	if in := uptime(t, out); in < 9 {
		t.Errorf("without the pin the sandbox should see the host's uptime; it saw %v s", in)
	}
}

// Every run gets umask 022, whatever the caller's.
func TestPinUmask(t *testing.T) {
	requireRoot(t)
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	_, out, _ := runSpec(t, shellSpec("umask"))
	if got := strings.TrimSpace(out); got != "0022" {
		t.Errorf("umask inside = %q, want 0022", got)
	}
}

// Two runs at once, pinned to different CPUs, each see and run on their
// own CPU only, and cannot widen their affinity.
func TestPinCPUSet(t *testing.T) {
	requireRoot(t)
	var mine unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mine); err != nil || mine.Count() < 2 || !mine.IsSet(0) || !mine.IsSet(1) {
		skipOrFail(t, "needs CPUs 0 and 1")
	}
	script := `grep Cpus_allowed_list /proc/self/status; nproc; taskset -p -c 0-1 $$ >/dev/null 2>&1; grep Cpus_allowed_list /proc/self/status`
	var wg sync.WaitGroup
	outs := make([]string, 2)
	results := make([]*Result, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out bytes.Buffer
			spec := shellSpec(script)
			spec.Pin.CPUSet = strconv.Itoa(i)
			spec.Stdout = &out
			results[i], errs[i] = Run(t.Context(), spec)
			outs[i] = out.String()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("run on CPU %d: %v", i, err)
		}
	}
	for i, out := range outs {
		if len(results[i].Unpinned) != 0 {
			t.Fatalf("cpu %d: unpinned %q", i, results[i].Unpinned)
		}
		c := strconv.Itoa(i)
		want := "Cpus_allowed_list:\t" + c + "\n1\nCpus_allowed_list:\t" + c + "\n"
		if out != want {
			t.Errorf("pinned to CPU %s, the sandbox saw:\n%s\nwant:\n%s", c, out, want)
		}
	}
}

func TestPinCPUSetBadInput(t *testing.T) {
	for _, c := range []string{"x", "1-0", "-1", "0,", "99999", "0-"} {
		spec := shellSpec("true")
		spec.Pin.CPUSet = c
		if _, err := Run(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "cpuset") {
			t.Errorf("cpuset %q: err %v, want a cpuset error", c, err)
		}
	}
	var mine unix.CPUSet
	if err := unix.SchedGetaffinity(0, &mine); err == nil {
		spec := shellSpec("true")
		spec.Pin.CPUSet = strconv.Itoa(mine.Count() + 64)
		if _, err := Run(t.Context(), spec); err == nil || !strings.Contains(err.Error(), "not one this process may run on") {
			t.Errorf("a CPU out of reach: err %v", err)
		}
	}
}

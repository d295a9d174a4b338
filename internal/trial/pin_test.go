package trial

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/task"
)

// Every phase runs pinned: time zone, locale, the task's own pinned
// variables, hostname, ids, HOME, umask, clocks that start at zero, and,
// given one, a CPU of its own; the verdict records each, and what was not
// pinned. The grader checks the same from inside, so both phases are.
func TestPinnedEnvironment(t *testing.T) {
	requireRoot(t)
	probe := `printf 'TZ=%s LANG=%s LC_ALL=%s SEED=%s HOME=%s host=%s id=%s umask=%s\n' "$TZ" "$LANG" "$LC_ALL" "$PYTHONHASHSEED" "$HOME" "$(hostname)" "$(id -u):$(id -g)" "$(umask)"
awk '{ exit ($1 < 30) ? 0 : 1 }' /proc/uptime && echo clocks-from-zero
grep Cpus_allowed_list /proc/self/status`
	tk := writeTask(t, taskSpec{test: "{\n" + probe + "\n} > /tmp/p\n" + ` grep -q 'TZ=UTC LANG=C.UTF-8 LC_ALL=C.UTF-8 SEED=0 HOME=/root host=proctor id=0:0 umask=0022' /tmp/p && grep -q clocks-from-zero /tmp/p && grep -q 'Cpus_allowed_list:	1$' /tmp/p && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt`})
	toml, err := os.ReadFile(filepath.Join(tk.Dir, "task.toml"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(tk.Dir, "task.toml"), append(toml, []byte("pinned_env = { PYTHONHASHSEED = \"0\" }\n")...), 0o644))
	openUp(t, tk.Dir)
	tk, err = task.Load(tk.Dir)
	must(t, err)
	out := filepath.Join(t.TempDir(), "out")
	v, err := Run(context.Background(), Options{Task: tk, Agent: carried(probe), Out: out, CacheDir: sharedCache, Key: testKey, CPUSet: "1"})
	if err != nil {
		t.Fatal(err)
	}
	log := readFile(t, filepath.Join(out, AgentLog))
	for _, want := range []string{"TZ=UTC LANG=C.UTF-8 LC_ALL=C.UTF-8 SEED=0 HOME=/root host=proctor id=0:0 umask=0022", "clocks-from-zero", "Cpus_allowed_list:\t1\n"} {
		if !strings.Contains(log, want) {
			t.Errorf("the agent's phase is not pinned: want %q in\n%s", want, log)
		}
	}
	if !v.Passed {
		t.Errorf("the grader's phase is not pinned (reward %g)\n%s", v.Reward, readFile(t, filepath.Join(out, GraderLog)))
	}
	p := v.Pinned
	if p == nil || p.Env["TZ"] != "UTC" || p.Env["LC_ALL"] != "C.UTF-8" || p.Env["PYTHONHASHSEED"] != "0" || p.Env["HOME"] != "/root" ||
		p.Hostname != "proctor" || p.Umask != "0022" || p.CPUSet != "1" || !p.TimeNamespace || p.MemoryBytes != 2048<<20 || len(p.Unpinned) != 0 {
		t.Errorf("verdict pinned = %+v", p)
	}

	// Without CPUs of its own, the verdict says so.
	v, _ = runTrial(t, tk, "true", "")
	if v.Pinned == nil || v.Pinned.CPUSet != "" || len(v.Pinned.Unpinned) != 1 || !strings.HasPrefix(v.Pinned.Unpinned[0], "cpuset: ") {
		t.Errorf("unpinned CPUs not named: %+v", v.Pinned)
	}
}

// A task's pinned_env may not set the harness's variables.
func TestPinnedEnvRefusesHarnessNames(t *testing.T) {
	tk := writeTask(t, taskSpec{test: "echo 1 > /logs/verifier/reward.txt"})
	toml, err := os.ReadFile(filepath.Join(tk.Dir, "task.toml"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(tk.Dir, "task.toml"), append(toml, []byte("pinned_env = { PROCTOR_RESULTS = \"/x\" }\n")...), 0o644))
	if _, err := task.Load(tk.Dir); err == nil || !strings.Contains(err.Error(), "pinned_env") {
		t.Fatalf("err %v, want one naming pinned_env", err)
	}
}

package store

import (
	"bufio"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// childEnv, when set, makes the test binary a helper process instead of
// running tests: its value is "MODE:DIR".
const childEnv = "PROCTOR_STORE_TEST_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		mode, dir, _ := strings.Cut(v, ":")
		if err := runChild(mode, dir); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runChild is the helper process. Mode "work" creates the suite if there
// is none and loops Claim/Finish, printing "finished ID" after each Finish
// has returned; mode "hold" opens the store, prints "open" and waits.
func runChild(mode, dir string) error {
	s, err := Open(dir)
	if err != nil {
		return err
	}
	switch mode {
	case "hold":
		fmt.Println("open")
		select {}
	case "work":
		if err := s.CreateSuite(testSuite(3, 4, 100)); err != nil && !errors.Is(err, ErrSuiteExists) {
			return err
		}
		for {
			t, err := s.Claim()
			if err != nil {
				return err
			}
			if t == nil {
				fmt.Println("all done")
				select {}
			}
			fmt.Println("claimed", t.ID)
			if err := s.Finish(t.ID, resultFor(t.ID)); err != nil {
				return err
			}
			fmt.Println("finished", t.ID)
		}
	}
	return fmt.Errorf("unknown mode %q", mode)
}

func startChild(t *testing.T, mode, dir string) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode+":"+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, bufio.NewScanner(out)
}

func testSuite(agents, tasks, trials int) Suite {
	su := Suite{Trials: trials, Options: json.RawMessage(`{"timeout":"10m","network":"none"}`),
		Created: time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)}
	for i := range agents {
		su.Agents = append(su.Agents, Agent{Name: fmt.Sprintf("agent%d", i), Command: fmt.Sprintf("run-agent --n %d", i)})
	}
	for i := range tasks {
		su.Tasks = append(su.Tasks, Task{Name: fmt.Sprintf("task%d", i), Dir: fmt.Sprintf("tasks/t%d", i), Digest: fmt.Sprintf("sha256:%064x", i)})
	}
	return su
}

// resultFor is a result that depends on id, so a mixed-up row shows.
func resultFor(id int64) Result {
	r := Result{
		Status: "graded", Passed: id%2 == 0, Reward: float64(id) / 7,
		WallMS: id * 1000, AgentMS: id * 900, GraderMS: id * 50,
		ModelCalls: int(id % 17), InputTokens: id * 1234, OutputTokens: id * 321,
		Out: fmt.Sprintf("trials/%06d", id), BundleSHA256: fmt.Sprintf("%064x", id),
	}
	if id%5 == 0 {
		r.Violations = []string{"net.connect", "fs.write"}
	}
	if id%11 == 0 {
		r.Error, r.BundleSHA256 = "agent exited 137", ""
	}
	return r
}

func mustOpen(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// TestCrashSafety kills a child that is claiming and finishing trials at a
// random moment, several times over one store, and checks after each kill
// that every result the child reported is there and intact, that the lock
// was released, and that exactly the claimed-but-unfinished trial is
// requeued.
func TestCrashSafety(t *testing.T) {
	dir := t.TempDir()
	finished := map[int64]bool{}
	requeued := 0
	for round := range 8 {
		cmd, lines := startChild(t, "work", dir)
		// Even rounds kill at a random moment after some results; odd
		// rounds kill as soon as a claim is reported, before its Finish
		// is likely to have committed, so Requeue has work to do.
		want := 1 + rand.IntN(40)
		seen := 0
		for seen < want || round%2 == 1 {
			if !lines.Scan() {
				t.Fatalf("round %d: child stopped early: %v", round, lines.Err())
			}
			verb, num, _ := strings.Cut(lines.Text(), " ")
			id, err := strconv.ParseInt(num, 10, 64)
			if err != nil {
				t.Fatalf("round %d: child said %q", round, lines.Text())
			}
			if verb == "finished" {
				finished[id] = true
				seen++
				if seen == 1 {
					// Another process holds the store: Open must say so, with its pid.
					_, err := Open(dir)
					var le *LockedError
					if !errors.As(err, &le) || le.PID != cmd.Process.Pid || !errors.Is(err, ErrLocked) {
						t.Fatalf("round %d: Open while child runs: %v, want LockedError with pid %d", round, err, cmd.Process.Pid)
					}
				}
			}
			if verb == "claimed" && round%2 == 1 && seen >= want {
				break
			}
		}
		if round%2 == 0 {
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// Lines written before the kill are results that were committed too.
		for lines.Scan() {
			if num, ok := strings.CutPrefix(lines.Text(), "finished "); ok {
				id, _ := strconv.ParseInt(num, 10, 64)
				finished[id] = true
			}
		}
		cmd.Wait()

		s := mustOpen(t, dir) // the kernel released the flock
		trials, err := s.Trials()
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, tr := range trials {
			switch tr.State {
			case StateRunning:
				running++
				if finished[tr.ID] {
					t.Errorf("round %d: trial %d reported finished but is running", round, tr.ID)
				}
			case StatePending:
				if finished[tr.ID] {
					t.Errorf("round %d: trial %d reported finished but is pending", round, tr.ID)
				}
			case StateDone, StateFailed:
				if tr.Result == nil || !reflect.DeepEqual(*tr.Result, resultFor(tr.ID)) {
					t.Errorf("round %d: trial %d result = %+v, want %+v", round, tr.ID, tr.Result, resultFor(tr.ID))
				}
			}
			if finished[tr.ID] && tr.State != StateDone && tr.State != StateFailed {
				t.Errorf("round %d: trial %d reported finished, state %s", round, tr.ID, tr.State)
			}
		}
		if running > 1 {
			t.Errorf("round %d: %d trials running, want at most 1", round, running)
		}
		n, err := s.Requeue()
		if err != nil || n != running {
			t.Errorf("round %d: Requeue = %d, %v; want %d", round, n, err, running)
		}
		c, err := s.Counts()
		if err != nil {
			t.Fatal(err)
		}
		if c[StateRunning] != 0 || c[StatePending]+c[StateDone]+c[StateFailed] != len(trials) {
			t.Errorf("round %d: counts after requeue %v", round, c)
		}
		// The next claim is never a finished trial.
		tr, err := s.Claim()
		if err != nil || tr == nil {
			t.Fatalf("round %d: Claim = %v, %v", round, tr, err)
		}
		if finished[tr.ID] {
			t.Errorf("round %d: Claim handed out finished trial %d", round, tr.ID)
		}
		if _, err := s.Requeue(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		requeued += n
		t.Logf("round %d: %d trials finished so far, %d was running", round, len(finished), running)
	}
	if requeued == 0 {
		t.Error("no round left a claimed trial running: Requeue was never exercised")
	}
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	_, err := Open(dir)
	var le *LockedError
	if !errors.As(err, &le) || le.PID != os.Getpid() {
		t.Fatalf("second Open = %v, want LockedError with pid %d", err, os.Getpid())
	}
	want := fmt.Sprintf("is in use by another proctor bench (pid %d)", os.Getpid())
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), dir) {
		t.Errorf("message %q lacks %q or the dir", err, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	mustOpen(t, dir).Close() // free again after Close
}

func TestLockedOtherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd, lines := startChild(t, "hold", dir)
	if !lines.Scan() || lines.Text() != "open" {
		t.Fatalf("child: %q %v", lines.Text(), lines.Err())
	}
	_, err := Open(dir)
	var le *LockedError
	if !errors.As(err, &le) || le.PID != cmd.Process.Pid {
		t.Fatalf("Open = %v, want LockedError with pid %d", err, cmd.Process.Pid)
	}
	cmd.Process.Kill()
	cmd.Wait()
	mustOpen(t, dir).Close()
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

// realStore makes a closed store with a suite and some results in dir and
// returns the path of its database.
func realStore(t *testing.T, dir string) string {
	t.Helper()
	s := mustOpen(t, dir)
	if err := s.CreateSuite(testSuite(3, 10, 20)); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		tr, err := s.Claim()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Finish(tr.ID, resultFor(tr.ID)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, dbName)
}

func TestNotStore(t *testing.T) {
	tests := []struct {
		name   string
		make   func(t *testing.T, path string)
		reason string
	}{
		{"text file", func(t *testing.T, path string) {
			os.WriteFile(path, []byte("these are my notes\nnot a database\n"), 0o644)
		}, "not an SQLite database"},
		{"empty file", func(t *testing.T, path string) {
			os.WriteFile(path, nil, 0o644)
		}, "empty file"},
		{"other application", func(t *testing.T, path string) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("PRAGMA application_id = 1234; CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO photos (name) VALUES ('cat.jpg')"); err != nil {
				t.Fatal(err)
			}
		}, "application_id is 0x000004d2"},
		{"plain sqlite", func(t *testing.T, path string) {
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("CREATE TABLE trials (id INTEGER PRIMARY KEY)"); err != nil {
				t.Fatal(err)
			}
		}, "application_id is 0x00000000"},
		{"newer schema", func(t *testing.T, path string) {
			realStore(t, filepath.Dir(path))
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
				t.Fatal(err)
			}
		}, "schema version 99 is newer"},
		{"flipped bytes", func(t *testing.T, path string) {
			realStore(t, filepath.Dir(path))
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			const page = 4096
			mid := (len(b) / page / 2) * page
			if mid == 0 {
				t.Fatalf("store is %d bytes, too small to corrupt its middle", len(b))
			}
			for i := mid; i < mid+32; i++ {
				b[i] ^= 0xff
			}
			os.WriteFile(path, b, 0o644)
		}, "corrupt"},
		{"truncated", func(t *testing.T, path string) {
			realStore(t, filepath.Dir(path))
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, "corrupt"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, dbName)
			tt.make(t, path)
			before := fileSum(t, path)
			_, err := Open(dir)
			if !errors.Is(err, ErrNotStore) {
				t.Fatalf("Open = %v, want ErrNotStore", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, path+" is not a proctor store: ") || !strings.Contains(msg, tt.reason) || strings.Contains(msg, "\n") {
				t.Errorf("message %q: want one line naming %s and saying %q", msg, path, tt.reason)
			}
			if fileSum(t, path) != before {
				t.Errorf("Open changed %s", path)
			}
			// The failed Open released the lock.
			if _, err := Open(dir); !errors.Is(err, ErrNotStore) {
				t.Errorf("second Open = %v, want ErrNotStore again", err)
			}
			t.Log(msg)
		})
	}
}

func TestSuite(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, dir)
	defer s.Close()
	if _, err := s.Suite(); !errors.Is(err, ErrNoSuite) {
		t.Fatalf("Suite before CreateSuite = %v, want ErrNoSuite", err)
	}
	if tr, err := s.Claim(); tr != nil || err != nil {
		t.Fatalf("Claim on empty store = %v, %v", tr, err)
	}
	su := testSuite(2, 3, 2)
	if err := s.CreateSuite(su); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSuite(su); !errors.Is(err, ErrSuiteExists) {
		t.Fatalf("second CreateSuite = %v, want ErrSuiteExists", err)
	}
	got, err := s.Suite()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, su) {
		t.Errorf("Suite = %+v, want %+v", *got, su)
	}

	// Plan order: index, then task, then agent.
	trials, err := s.Trials()
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, tr := range trials {
		order = append(order, fmt.Sprintf("%d/%s/%s", tr.Index, tr.Task, tr.Agent))
		if tr.State != StatePending || tr.Attempt != 0 || tr.Result != nil {
			t.Errorf("fresh trial %+v", tr)
		}
	}
	want := []string{
		"0/task0/agent0", "0/task0/agent1", "0/task1/agent0", "0/task1/agent1", "0/task2/agent0", "0/task2/agent1",
		"1/task0/agent0", "1/task0/agent1", "1/task1/agent0", "1/task1/agent1", "1/task2/agent0", "1/task2/agent1",
	}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("plan order %v, want %v", order, want)
	}

	// Claims follow the plan; Finish only applies to running trials.
	a, _ := s.Claim()
	b, _ := s.Claim()
	if a.ID != trials[0].ID || b.ID != trials[1].ID || a.Attempt != 1 || a.State != StateRunning {
		t.Fatalf("claims %+v %+v", a, b)
	}
	if err := s.Finish(trials[2].ID, resultFor(3)); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Finish of pending trial = %v, want ErrNotRunning", err)
	}
	if err := s.Finish(999, resultFor(3)); !errors.Is(err, ErrNoTrial) {
		t.Errorf("Finish of unknown trial = %v, want ErrNoTrial", err)
	}
	if err := s.Finish(a.ID, resultFor(a.ID)); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(a.ID, resultFor(a.ID)); !errors.Is(err, ErrNotRunning) {
		t.Errorf("second Finish = %v, want ErrNotRunning", err)
	}
	failed := Result{Status: "error", Error: "workspace setup failed"}
	if err := s.Finish(b.ID, failed); err != nil {
		t.Fatal(err)
	}
	c, _ := s.Claim()
	if err := s.Finish(c.ID, Result{Status: "graded", Error: "grader timed out", BundleSHA256: "ab"}); err != nil {
		t.Fatal(err)
	}
	d, _ := s.Claim()
	counts, err := s.Counts()
	if err != nil {
		t.Fatal(err)
	}
	if w := map[string]int{"pending": 8, "running": 1, "done": 2, "failed": 1}; !reflect.DeepEqual(counts, w) {
		t.Errorf("Counts = %v, want %v", counts, w)
	}
	if n, err := s.Requeue(); n != 1 || err != nil {
		t.Errorf("Requeue = %d, %v", n, err)
	}
	again, _ := s.Claim()
	if again.ID != d.ID || again.Attempt != 2 {
		t.Errorf("requeued trial claimed as %+v, want ID %d attempt 2", again, d.ID)
	}

	// Everything survives a reopen.
	s.Close()
	s = mustOpen(t, dir)
	trials, err = s.Trials()
	if err != nil {
		t.Fatal(err)
	}
	if tr := trials[0]; tr.State != StateDone || !reflect.DeepEqual(*tr.Result, resultFor(a.ID)) || tr.Ended.Before(tr.Started) || tr.Started.IsZero() {
		t.Errorf("after reopen %+v", tr)
	}
	if tr := trials[1]; tr.State != StateFailed || !reflect.DeepEqual(*tr.Result, failed) {
		t.Errorf("after reopen %+v", tr)
	}
}

func TestCreateSuiteInvalid(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	defer s.Close()
	bad := map[string]Suite{
		"no trials":      {Trials: 0, Agents: []Agent{{Name: "a"}}, Tasks: []Task{{Name: "t"}}},
		"no agents":      {Trials: 1, Tasks: []Task{{Name: "t"}}},
		"no tasks":       {Trials: 1, Agents: []Agent{{Name: "a"}}},
		"repeated agent": {Trials: 1, Agents: []Agent{{Name: "a"}, {Name: "a"}}, Tasks: []Task{{Name: "t"}}},
		"bad options":    {Trials: 1, Agents: []Agent{{Name: "a"}}, Tasks: []Task{{Name: "t"}}, Options: json.RawMessage("{")},
	}
	for name, su := range bad {
		t.Run(name, func(t *testing.T) {
			if err := s.CreateSuite(su); err == nil {
				t.Error("CreateSuite accepted it")
			}
		})
	}
	if _, err := s.Suite(); !errors.Is(err, ErrNoSuite) {
		t.Errorf("a rejected suite was stored: %v", err)
	}
}

// TestTenThousand plans and finishes 10,000 trials and reads them back,
// logging the time of each step (a baseline for report speed).
func TestTenThousand(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping 10,000 durable commits in -short mode")
	}
	s := mustOpen(t, t.TempDir())
	defer s.Close()
	start := time.Now()
	if err := s.CreateSuite(testSuite(5, 100, 20)); err != nil {
		t.Fatal(err)
	}
	plan := time.Since(start)
	start = time.Now()
	for {
		tr, err := s.Claim()
		if err != nil {
			t.Fatal(err)
		}
		if tr == nil {
			break
		}
		if err := s.Finish(tr.ID, resultFor(tr.ID)); err != nil {
			t.Fatal(err)
		}
	}
	finish := time.Since(start)
	start = time.Now()
	trials, err := s.Trials()
	if err != nil {
		t.Fatal(err)
	}
	read := time.Since(start)
	if len(trials) != 10000 {
		t.Fatalf("%d trials, want 10000", len(trials))
	}
	for _, tr := range trials {
		if !reflect.DeepEqual(*tr.Result, resultFor(tr.ID)) {
			t.Fatalf("trial %d result %+v", tr.ID, tr.Result)
		}
	}
	t.Logf("10,000 trials: plan %v, claim+finish %v (%v each), read back %v",
		plan, finish, finish/10000, read)
}

func BenchmarkTrials(b *testing.B) {
	s, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateSuite(testSuite(5, 100, 20)); err != nil {
		b.Fatal(err)
	}
	for {
		tr, err := s.Claim()
		if err != nil {
			b.Fatal(err)
		}
		if tr == nil {
			break
		}
		if err := s.Finish(tr.ID, resultFor(tr.ID)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Trials(); err != nil {
			b.Fatal(err)
		}
	}
}

// ClaimAll claims every pending trial at one start time, EachTrial streams
// a state's trials in plan order, Trial reads one, Tallies counts by agent.
func TestClaimAllEachTrialTallies(t *testing.T) {
	s := mustOpen(t, t.TempDir())
	if err := s.CreateSuite(testSuite(2, 3, 2)); err != nil {
		t.Fatal(err)
	}
	first, err := s.Claim()
	if err != nil {
		t.Fatal(err)
	}
	n, at, err := s.ClaimAll()
	if err != nil || n != 11 {
		t.Fatalf("ClaimAll = %d, %v; want the 11 left", n, err)
	}
	var ids []int64
	fresh := 0
	if err := s.EachTrial(StateRunning, func(tr *Trial) error {
		ids = append(ids, tr.ID)
		if tr.Started.Equal(at) {
			fresh++
		}
		if tr.Attempt != 1 {
			t.Errorf("trial %d: attempt %d", tr.ID, tr.Attempt)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 12 || fresh != 11 || ids[0] != first.ID || !slices.IsSorted(ids) {
		t.Fatalf("running: %v, %d claimed by ClaimAll", ids, fresh)
	}
	if n, _, err := s.ClaimAll(); err != nil || n != 0 {
		t.Fatalf("ClaimAll again = %d, %v", n, err)
	}
	stop := errors.New("stop")
	calls := 0
	if err := s.EachTrial(StateRunning, func(*Trial) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("EachTrial stopped: %v after %d calls", err, calls)
	}
	if err := s.Finish(ids[0], resultFor(ids[0])); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ids[1], Result{Error: "no bundle"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Trial(ids[0])
	if err != nil || got.State != StateDone || got.Result == nil || got.Result.BundleSHA256 != resultFor(ids[0]).BundleSHA256 {
		t.Fatalf("Trial(%d) = %+v, %v", ids[0], got, err)
	}
	if _, err := s.Trial(9999); !errors.Is(err, ErrNoTrial) {
		t.Fatalf("Trial(9999): %v, want ErrNoTrial", err)
	}
	tal, err := s.Tallies()
	if err != nil {
		t.Fatal(err)
	}
	total := Tally{}
	for _, x := range tal {
		total.Finished += x.Finished
		total.Ran += x.Ran
		total.Passed += x.Passed
	}
	want := Tally{Finished: 2, Ran: 1}
	if resultFor(ids[0]).Passed {
		want.Passed = 1
	}
	if total != want {
		t.Fatalf("tallies %+v, want %+v in all", tal, want)
	}
}

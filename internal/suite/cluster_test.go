package suite_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/cluster"
	"github.com/proctor-sandbox/proctor/internal/store"
	"github.com/proctor-sandbox/proctor/internal/suite"
	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/testcorpus"
)

// fleet is a real JetStream server in the test process and worker
// processes around it.
type fleet struct {
	t     *testing.T
	srv   *cluster.Server
	url   string
	dir   string
	mu    sync.Mutex
	logs  map[string]*syncBuffer
	coord string // the coordinator's key, which the workers trust
}

// bench is `proctor bench --cluster` on the fleet, signing with its
// coordinator key.
func (f *fleet) bench(args ...string) *exec.Cmd {
	return bench(append(args, "--cluster", f.url, "--key", f.coord)...)
}

func newFleet(t *testing.T) *fleet {
	requireRoot(t)
	dir := t.TempDir()
	srv, err := cluster.Serve(cluster.ServeOptions{StoreDir: filepath.Join(dir, "nats"), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	f := &fleet{t: t, srv: srv, url: srv.ClientURL(), dir: dir, logs: map[string]*syncBuffer{}}
	f.coord = f.key("coordinator")
	return f
}

// key makes a signing key and returns its file.
func (f *fleet) key(name string) string {
	priv, err := bundle.GenerateKey()
	if err != nil {
		f.t.Fatal(err)
	}
	p := filepath.Join(f.dir, name+".key")
	if err := bundle.WriteKeyFiles(p, priv); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// worker starts `proctor worker` named name, signing with key, killed
// when the test ends. It caches what it fetches in cache.
func (f *fleet) worker(name, key, cache string, env ...string) *exec.Cmd {
	f.t.Helper()
	cmd := exec.Command(os.Args[0], "worker", "--cluster", f.url, "--jobs", "1", "--name", name, "--key", key,
		"--cache-dir", cache, "--trust", f.coord+".pub")
	cmd.Env = append(append(os.Environ(), "CI="), env...)
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	f.mu.Lock()
	f.logs[name] = log
	f.mu.Unlock()
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		f.t.Logf("worker %s:\n%s", name, log.String())
	})
	return cmd
}

// syncBuffer is a bytes.Buffer a child's output goroutine writes while
// the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// descendants returns the processes below pid, with their start times.
func descendants(pid int) map[int]string {
	children := map[int][]int{}
	start := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... starttime is field 22.
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 20 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], p)
		start[p] = fields[19]
	}
	out := map[int]string{}
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			out[c] = start[c]
			walk(c)
		}
	}
	walk(pid)
	return out
}

// alive returns those of procs still running (same pid, same start).
func alive(procs map[int]string) []int {
	var out []int
	for p, st := range procs {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) >= 20 && fields[19] == st && fields[0] != "Z" {
			out = append(out, p)
		}
	}
	return out
}

// Three workers on a real JetStream server; one is SIGKILLed in the middle
// of a trial, and so is the coordinator. Every trial completes exactly
// once, no bundle is lost, and nothing of the dead worker runs on or is
// left behind.
func TestClusterWorkerKilled(t *testing.T) {
	f := newFleet(t)
	preexisting := deadLeftovers(t)
	keys := []string{f.key("w1"), f.key("w2"), f.key("w3")}
	dir := filepath.Join(f.dir, "suite")
	tasks := filepath.Join(repoRoot(), "examples", "tasks", "py-bugfix")
	agents := filepath.Join(repoRoot(), "examples", "agents")
	args := []string{"--tasks", tasks, "--agent", "honest=sh /agent/honest.sh", "--agent", "slow=sleep 2.5",
		"--agent-dir", agents, "--trials", "4", "--out", dir, "--ack-wait", "3s",
		"--regrade", "0", "-q"}
	for _, k := range keys {
		args = append(args, "--trust", k+".pub")
	}
	coord := f.bench(args...)
	var clog bytes.Buffer
	coord.Stdout, coord.Stderr = &clog, &clog
	if err := coord.Start(); err != nil {
		t.Fatal(err)
	}
	w1 := f.worker("killed", keys[0], cacheDir(t))
	f.worker("second", keys[1], cacheDir(t))
	f.worker("third", keys[2], cacheDir(t))
	// cluster status lists the three, their load and the queue.
	var status []byte
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		sc := exec.Command(os.Args[0], "cluster", "status", "--cluster", f.url)
		sc.Env = append(os.Environ(), "CI=")
		if status, _ = sc.CombinedOutput(); bytes.Contains(status, []byte("workers: 3 live, running ")) {
			break
		}
	}
	for _, want := range []string{"workers: 3 live, running ", " of 3 job slot(s)", "  killed  ", "  second  ", "  third  ", "queue: "} {
		if !bytes.Contains(status, []byte(want)) {
			t.Fatalf("cluster status says no %q:\n%s", want, status)
		}
	}

	// Kill w1 while its trial's sandbox runs.
	deadline := time.Now().Add(2 * time.Minute)
	var procs map[int]string
	for time.Now().Before(deadline) {
		procs = descendants(w1.Process.Pid)
		if len(procs) >= 3 { // proctor run, and its sandbox's processes
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(procs) < 3 {
		t.Fatalf("the worker never ran a trial\n%s", clog.String())
	}
	w1.Process.Signal(syscall.SIGKILL)
	time.Sleep(500 * time.Millisecond)
	if left := alive(procs); len(left) > 0 {
		t.Fatalf("processes of the killed worker live on: %v", left)
	}

	// Kill the coordinator once a result is in, and start it again.
	for len(bundles(t, dir)) < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	coord.Process.Signal(syscall.SIGKILL)
	coord.Wait()
	before := bundles(t, dir)
	if len(before) < 1 {
		t.Fatalf("no result before the coordinator was killed\n%s", clog.String())
	}
	if b, err := bench("--resume", dir, "-q").CombinedOutput(); err == nil || !strings.Contains(string(b), "the suite runs on a cluster") {
		t.Fatalf("resumed without --cluster: %v\n%s", err, b)
	}
	resume := bench("--resume", dir, "--cluster", f.url, "--ack-wait", "3s", "--regrade", "0")
	resume.Env = append(resume.Env, "PROCTOR_KEY_FILE="+f.coord)
	out, err := resume.CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s\nfirst coordinator:\n%s", err, out, clog.String())
	}

	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	counts, _ := st.Counts()
	if counts["done"] != 8 || counts["pending"]+counts["running"]+counts["failed"] != 0 {
		t.Fatalf("after the suite: %v\n%s", counts, out)
	}
	after := bundles(t, dir)
	if len(after) != 8 {
		t.Fatalf("%d bundles, want 8", len(after))
	}
	for p, sum := range before {
		if after[p] != sum {
			t.Errorf("%s was replaced after it was recorded", p)
		}
	}
	ts, _ := st.Trials()
	for _, tr := range ts {
		if tr.Attempt != 1 {
			t.Errorf("trial %d claimed %d times", tr.ID, tr.Attempt)
		}
		if tr.Result.BundleSHA256 != after[filepath.Join(dir, suite.TrialDir(&tr), "bundle.json")] {
			t.Errorf("trial %s × %s #%d: the store's bundle digest is not the bundle's", tr.Agent, tr.Task, tr.Index)
		}
		if tr.Agent == "honest" != tr.Result.Passed {
			t.Errorf("trial %s #%d: passed=%t", tr.Agent, tr.Index, tr.Result.Passed)
		}
	}
	// The killed worker's trial went to another worker.
	f.mu.Lock()
	redelivered := strings.Contains(f.logs["second"].String()+f.logs["third"].String(), "delivery 2")
	f.mu.Unlock()
	if !redelivered {
		t.Error("no worker says it ran a redelivered trial")
	}
	// Every bundle verifies against the trusted worker keys: the report
	// counts all 8.
	rep := exec.Command(os.Args[0], "report", dir, "--format", "json", "--regrade", "0")
	rep.Env = append(os.Environ(), "CI=")
	st.Close()
	js, err := rep.Output()
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	var r struct {
		Integrity struct {
			Unverified []any `json:"unverified"`
		} `json:"integrity"`
		Agents []struct {
			Trials int `json:"trials"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(js, &r); err != nil {
		t.Fatalf("report: %v\n%s", err, js)
	}
	if len(r.Integrity.Unverified) != 0 || len(r.Agents) != 2 || r.Agents[0].Trials+r.Agents[1].Trials != 8 {
		t.Fatalf("report: %d unverified, agents %+v", len(r.Integrity.Unverified), r.Agents)
	}
	if left := newLeftovers(t, preexisting); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
}

// A worker whose key the coordinator does not trust: its results are
// recorded as rejected and counted nowhere.
func TestClusterUntrustedWorker(t *testing.T) {
	f := newFleet(t)
	trusted, rogue := f.key("trusted"), f.key("rogue")
	dir := filepath.Join(f.dir, "suite")
	f.worker("rogue", rogue, cacheDir(t))
	cmd := f.bench("--tasks", filepath.Join(repoRoot(), "examples", "tasks", "py-bugfix"),
		"--agent", "honest=sh /agent/honest.sh", "--agent-dir", filepath.Join(repoRoot(), "examples", "agents"),
		"--trials", "2", "--out", dir, "--trust", trusted+".pub", "--regrade", "0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, out)
	}
	fp := fingerprint(t, rogue)
	if !strings.Contains(string(out), "rejected: worker rogue: its message: not signed by a trusted key: signed by "+fp) ||
		!strings.Contains(string(out), "(attempt 3 of 3: recorded as not run)") {
		t.Fatalf("no rejection named the rogue key %s:\n%s", fp, out)
	}
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if counts, _ := st.Counts(); counts["done"] != 0 || counts["failed"] != 2 {
		t.Fatalf("counts: %v", counts)
	}
	ts, _ := st.Trials()
	for _, tr := range ts {
		if tr.Result == nil || !strings.HasPrefix(tr.Result.Error, "rejected: ") || tr.Result.Passed || tr.Result.BundleSHA256 != "" {
			t.Errorf("trial %d: %+v", tr.ID, tr.Result)
		}
	}
}

// A task archive altered in the cluster's store is refused by the worker,
// with an error naming it, and the trial is recorded as not run.
func TestClusterCorruptTaskArchive(t *testing.T) {
	f := newFleet(t)
	key := f.key("w")
	dir := filepath.Join(f.dir, "suite")
	cmd := f.bench("--tasks", filepath.Join(repoRoot(), "examples", "tasks", "py-bugfix"),
		"--agent", "nop=true", "--trials", "1", "--out", dir, "--trust", key+".pub", "--regrade", "0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	nc, err := nats.Connect(f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	// Wait for the trial, then swap the task's archive for other bytes
	// under the same name.
	var name string
	for ctx.Err() == nil && name == "" {
		time.Sleep(50 * time.Millisecond)
		s, err := js.Stream(ctx, cluster.TrialStream)
		if err != nil {
			continue
		}
		if info, err := s.Info(ctx); err != nil || info.State.Msgs == 0 {
			continue
		}
		obs, err := js.ObjectStore(ctx, cluster.TaskBucket)
		if err != nil {
			t.Fatal(err)
		}
		list, err := obs.List(ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("task objects: %v, %v", list, err)
		}
		name = list[0].Name
		data, err := obs.GetBytes(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		data[len(data)/2] ^= 1
		if _, err := obs.PutBytes(ctx, name, data); err != nil {
			t.Fatal(err)
		}
	}
	// A worker of its own cache: one that unpacked this task before holds
	// it checked, by its digest, and needs no archive.
	f.worker("w", key, t.TempDir())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("bench: %v\n%s", err, out.String())
		}
	case <-ctx.Done():
		cmd.Process.Kill()
		t.Fatalf("bench did not finish\n%s", out.String())
	}
	want := fmt.Sprintf("task py-bugfix: refused: %s: archive does not match its digest", name)
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts, _ := st.Trials()
	if len(ts) != 1 || ts[0].State != store.StateFailed || !strings.Contains(ts[0].Result.Error, want) {
		t.Fatalf("trial: %+v %+v; want failed with %q\n%s", ts[0], ts[0].Result, want, out.String())
	}
	f.mu.Lock()
	log := f.logs["w"].String()
	f.mu.Unlock()
	if !strings.Contains(log, want) {
		t.Errorf("the worker did not say why:\n%s", log)
	}
	if _, err := os.Stat(filepath.Join(dir, suite.TrialDir(&ts[0]), "bundle.json")); err == nil {
		t.Error("a bundle was made from a corrupted task")
	}
}

func fingerprint(t *testing.T, key string) string {
	priv, err := bundle.ReadPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return bundle.Fingerprint(priv.Public().(ed25519.PublicKey))
}

// A worker holding a trusted key that runs the trial otherwise than it was
// planned: another task (a cheaper one, say), the internet opened, the
// audit off, a bundle of another trial or of none (a replay). Each bundle
// verifies against a trusted key, and each is rejected for what it binds,
// each attempt of the trial, until it is recorded as not run.
func TestClusterForgedConditionsRejected(t *testing.T) {
	f := newFleet(t)
	key := f.key("insider")
	py := filepath.Join(repoRoot(), "examples", "tasks", "py-bugfix")
	for _, c := range []struct {
		name, want string
		args       func(id string) []string // proctor run arguments but --agent, --out, --key
	}{
		{"another task", "the bundle's task digest sha256:", func(id string) []string {
			return []string{"--task", filepath.Join(repoRoot(), "examples", "tasks", "hello-state"), "--nonce", id}
		}},
		{"a host allowed", "the agent was allowed example.com, which neither the task nor the suite allows", func(id string) []string {
			return []string{"--task", py, "--allow-host", "example.com", "--nonce", id}
		}},
		{"no audit", "the audit was off", func(id string) []string { return []string{"--task", py, "--no-audit", "--nonce", id} }},
		{"another trial's bundle", `the bundle is of trial "`, func(id string) []string { return []string{"--task", py, "--nonce", id + "0"} }},
		{"a bundle of no trial", `the bundle is of trial "", not "`, func(string) []string { return []string{"--task", py} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := forge(t, f, key, c.args)
			if !strings.Contains(out, "rejected: worker insider: "+c.want) || !strings.Contains(out, "attempt 3 of 3") {
				t.Fatalf("the forged result was not rejected with %q:\n%s", c.want, out)
			}
		})
	}
}

// forge runs a one-trial suite whose only worker is the test: it takes
// each attempt of the trial, runs proctor run with args, and returns the
// result as a worker does, signed with key; it returns the coordinator's
// output once it has checked the store.
func forge(t *testing.T, f *fleet, key string, args func(id string) []string) string {
	dir := filepath.Join(t.TempDir(), "suite")
	cmd := f.bench("--tasks", filepath.Join(repoRoot(), "examples", "tasks", "py-bugfix"),
		"--agent", "nop=true", "--trials", "1", "--out", dir, "--trust", key+".pub", "--regrade", "0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	conn, err := cluster.Connect(ctx, f.url, cluster.WithBind())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	priv, err := bundle.ReadPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		jctx, jcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		job, err := conn.Next(jctx)
		jcancel()
		if err != nil {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("bench: %v\n%s", err, out.String())
				}
				st, err := store.Open(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				if c, _ := st.Counts(); c["done"] != 0 || c["failed"] != 1 {
					t.Fatalf("counts: %v\n%s", c, out.String())
				}
				return out.String()
			default:
				if ctx.Err() != nil {
					t.Fatalf("bench did not finish:\n%s", out.String())
				}
				continue
			}
		}
		res := filepath.Join(t.TempDir(), "forged")
		run := exec.Command(os.Args[0], append([]string{"run", "--agent", job.Msg.AgentCommand, "--out", res, "--key", key,
			"--cache-dir", cacheDir(t), "-q"}, args(job.Msg.ID)...)...)
		run.Env = append(os.Environ(), "CI=")
		if b, err := run.CombinedOutput(); err != nil { // exit 1: not passed, as a nop agent is not
			if _, serr := os.Stat(filepath.Join(res, "bundle.json")); serr != nil {
				t.Fatalf("run: %v\n%s", err, b)
			}
		}
		path, digest, err := suite.PackTreeFile(res, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		a, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		name := suite.ResultName(job.Msg.Attempt, job.Delivered(), "insider")
		if err := conn.PutResult(ctx, job.Msg.ID, name, a); err != nil {
			t.Fatal(err)
		}
		a.Close()
		d := cluster.Done{Suite: job.Msg.Suite, Trial: job.Msg.ID, Worker: "insider", Attempt: job.Msg.Attempt, Delivery: job.Delivered(),
			Result: name, ResultDigest: digest, Nonce: job.Msg.ID}
		if err := d.Sign(priv); err != nil {
			t.Fatal(err)
		}
		if err := conn.PublishDone(ctx, d); err != nil {
			t.Fatal(err)
		}
		if err := job.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Anyone who can write to the queue publishes trials: unsigned, or signed
// by a key the worker does not trust, with a gateway to their own server.
// The worker runs none of them and calls nothing.
func TestClusterWorkerRefusesUnsignedTrials(t *testing.T) {
	f := newFleet(t)
	called := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called <- r.Header.Get("X-Api-Key")
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := cluster.Connect(ctx, f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	archive, err := os.CreateTemp(t.TempDir(), "t")
	if err != nil {
		t.Fatal(err)
	}
	py := filepath.Join(repoRoot(), "examples", "tasks", "py-bugfix")
	digest, err := suite.PackTree(py, archive)
	if err != nil {
		t.Fatal(err)
	}
	archive.Seek(0, 0)
	if err := conn.PutTask(ctx, digest, archive); err != nil {
		t.Fatal(err)
	}
	tree, _ := task.Digest(py)
	attacker, err := bundle.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	for i, sign := range []bool{false, true} {
		m := cluster.TrialMsg{ID: fmt.Sprintf("sx-%d", i+1), Suite: "sx", Agent: "a", Task: "py-bugfix", TaskDigest: digest, TaskTree: tree,
			AgentCommand: `curl -s -X POST "$ANTHROPIC_BASE_URL/v1/messages"`, Gateways: []string{"anthropic=" + srv.URL}}
		if sign {
			m.Sign(attacker)
		}
		if err := conn.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	f.worker("w", f.key("w"), cacheDir(t), "ANTHROPIC_API_KEY=sk-worker-secret")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		f.mu.Lock()
		log := f.logs["w"].String()
		f.mu.Unlock()
		if strings.Contains(log, "refused trial sx-1: not signed by a trusted key: unsigned") &&
			strings.Contains(log, "refused trial sx-2: not signed by a trusted key: signed by "+bundle.Fingerprint(attacker.Public().(ed25519.PublicKey))) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.mu.Lock()
	log := f.logs["w"].String()
	f.mu.Unlock()
	if !strings.Contains(log, "refused trial sx-2") || !strings.Contains(log, "refused trial sx-1") {
		t.Fatalf("the worker did not refuse both trials:\n%s", log)
	}
	select {
	case k := <-called:
		t.Fatalf("the attacker's gateway was called, key %q", k)
	default:
	}
	for _, id := range []string{"sx-1", "sx-2"} {
		if ok, _ := conn.Finished(ctx, "sx", id); ok {
			t.Errorf("trial %s was run", id)
		}
		if ok, _ := conn.Queued(ctx, id); !ok {
			t.Errorf("trial %s left the queue: a worker that trusts its signer could not take it", id)
		}
	}
}

// Two workers of one name on one cache would remove each other's trial
// outputs: the second is refused.
func TestClusterWorkerNameTaken(t *testing.T) {
	f := newFleet(t)
	key := f.key("w")
	cache := t.TempDir()
	first := f.worker("same", key, cache)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !strings.Contains(f.logs["same"].String(), "Ctrl-C stops it") {
		time.Sleep(20 * time.Millisecond)
	}
	cmd := exec.Command(os.Args[0], "worker", "--cluster", f.url, "--name", "same", "--key", key,
		"--cache-dir", cache, "--trust", f.coord+".pub")
	cmd.Env = append(os.Environ(), "CI=")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another worker of this name uses the cache") {
		t.Fatalf("a second worker of the name: %v\n%s", err, out)
	}
	if first.ProcessState != nil {
		t.Fatal("the first worker stopped")
	}
}

// A trial whose message is lost while the coordinator is down (the queue
// purged, say) is published again by the next coordinator, as a new
// attempt that deduplication cannot drop, and runs.
func TestClusterLostTrialRepublished(t *testing.T) {
	f := newFleet(t)
	key := f.key("w")
	dir := filepath.Join(f.dir, "suite")
	cmd := f.bench("--tasks", filepath.Join(repoRoot(), "examples", "tasks", "py-bugfix"),
		"--agent", "nop=true", "--trials", "1", "--out", dir, "--trust", key+".pub", "--regrade", "0")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	var s jetstream.Stream
	for ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
		if s, err = js.Stream(ctx, cluster.TrialStream); err != nil {
			continue
		}
		if info, err := s.Info(ctx); err == nil && info.State.Msgs == 1 {
			break
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if err := s.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	f.worker("w", key, cacheDir(t))
	resume := bench("--resume", dir, "--cluster", f.url, "--regrade", "0")
	resume.Env = append(resume.Env, "PROCTOR_KEY_FILE="+f.coord)
	out, err := resume.CombinedOutput()
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "was neither queued nor finished: published again (attempt 2)") {
		t.Fatalf("resume did not publish the lost trial again:\n%s", out)
	}
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if c, _ := st.Counts(); c["done"] != 1 {
		t.Fatalf("counts %v\n%s", c, out)
	}
}

// A task whose rootfs is a real Debian root (made by mmdebstrap: device
// nodes under /dev, set-id programs, files of many owners) runs on the
// cluster: its archive gives back the planned tree on the worker, and the
// trial passes there. Before, the archive could not carry such a tree and
// the coordinator refused the task.
func TestClusterRootfsTask(t *testing.T) {
	if raceEnabled {
		t.Skip("covered by the run without the race detector (it would only repeat packing and hashing 286 MB under it)")
	}
	f := newFleet(t)
	root := testcorpus.TrixieGit(t)
	tdir := filepath.Join(t.TempDir(), "debian-task")
	for p, content := range map[string]string{
		"task.toml":      "[environment]\nworkdir = \"/app\"\n[proctor]\nrootfs = \"environment/rootfs\"\ngrading = \"state\"\n",
		"instruction.md": "Write yes to /app/made.\n",
		"tests/test.sh":  "#!/bin/sh\n. /etc/os-release\nif [ \"$ID\" = debian ] && [ \"$(cat /app/made)\" = yes ] && [ -u /usr/bin/passwd ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(tdir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tdir, p), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mnt := filepath.Join(tdir, "environment", "rootfs")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(root, mnt, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	tk, err := task.Load(tdir)
	if err != nil {
		t.Fatal(err)
	}
	planned, err := task.DigestTree(tk.Dir, tk.DigestOptions(nil))
	if err != nil || len(planned.Special) == 0 {
		t.Fatalf("setup: the task's digest %v, special files %v", err, planned)
	}

	key := f.key("w")
	f.worker("debian", key, t.TempDir()) // a cache of its own: the tree is fetched and unpacked
	dir := filepath.Join(f.dir, "suite")
	out, err := f.bench("--tasks", tdir, "--agent", "honest=echo yes > /app/made", "--trials", "1",
		"--out", dir, "--trust", key+".pub", "--regrade", "0").CombinedOutput()
	if err != nil {
		t.Fatalf("bench --cluster: %v\n%s", err, out)
	}
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts, _ := st.Trials()
	if len(ts) != 1 || ts[0].State != "done" || !ts[0].Result.Passed {
		t.Fatalf("trials %+v\n%s", ts, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, suite.TrialDir(&ts[0]), "verdict.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Task        struct{ Digest string }
		Environment struct{ Digest string }
		Status      string
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if v.Task.Digest != planned.Digest || v.Status != "clean" {
		t.Errorf("the worker ran task %s (%s), planned %s", v.Task.Digest, v.Status, planned.Digest)
	}
}

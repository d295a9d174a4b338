package cli

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/report"
	"github.com/proctor-sandbox/proctor/internal/store"
	"github.com/proctor-sandbox/proctor/internal/suite"
	"github.com/proctor-sandbox/proctor/internal/task"
)

// SuiteKeyFile is the key a suite started without --key signs with, kept in
// its directory (its public half beside it) so that a resume signs alike.
const SuiteKeyFile = "suite.key"

func newBenchCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		taskDirs, agents, models []string
		datasets                 []string
		trials, jobs             int
		regrades                 int
		out, resume              string
		agentDir                 string
		tf                       trialFlags
		nf                       netFlags
		bc                       benchCluster
	)
	c := &cobra.Command{
		Use:   "bench --tasks DIR [DIR...] --agent NAME=COMMAND [--agent ...] --trials N --out DIR",
		Short: "Run every agent on every task, several trials each, into a resumable suite",
		Long: `Run a suite: every --agent on every task of --tasks (task directories, or
directories of them) and of --dataset (NAME@VERSION, as proctor dataset pull
cached it; each task checked against the digest it was pulled with),
--trials times each, --jobs at a time (default: what
the CPUs and memory hold at the tasks' limits). Every trial is an ordinary
proctor run with its own signed bundle under DIR/trials/; DIR/proctor.db is
the store of what is done. Killed at any moment, a suite loses no finished
trial: proctor bench --resume DIR runs what is left. proctor report DIR
reads the results. When every trial is done, --regrade N of them are graded
again from their frozen changesets; a verdict that changed is a warning
(the grader is not deterministic), kept in DIR/regrades.jsonl for the
report.

With --cluster URL the trials run on the cluster's workers (proctor
worker) instead of here: each task is uploaded once, one message is
published per trial, and each result is recorded in DIR as it comes back,
if its bundle is signed by a --trust'ed worker key and binds the planned
task and agent; any other is recorded as rejected and never counted.
Stopped, the trials stay queued and finished results wait on the cluster:
proctor bench --resume DIR --cluster URL picks them up.

Exit status: 0 when every trial ran (whatever they scored); 125 when the
suite could not run; 130 when stopped (resumable); 2 for a wrong command
line.`,
		RunE: func(c *cobra.Command, args []string) error {
			if bc.cf.set() {
				if jobs != 0 {
					return usageErr("--jobs: with --cluster each worker sets its own (proctor worker --jobs)")
				}
				if bc.ackWait < time.Second {
					return usageErr("--ack-wait: want 1s or more, got %v", bc.ackWait)
				}
				if resume == "" && len(bc.trust) == 0 {
					return usageErr("--trust: not set: with --cluster, name the public key of every worker whose bundles count")
				}
			} else if len(bc.trust) > 0 {
				return usageErr("--trust: only with --cluster")
			}
			if resume != "" {
				if len(taskDirs)+len(datasets)+len(agents)+len(models)+len(args) > 0 || out != "" || len(bc.trust) > 0 {
					return usageErr("--resume takes the suite directory alone: its tasks, agents, trusted keys and flags are in its store")
				}
				return resumeSuite(c, resume, jobs, regrades, tf.quiet, &bc, stdout, stderr)
			}
			taskDirs = append(taskDirs, args...)
			if len(taskDirs)+len(datasets) == 0 {
				return &exitError{code: exitUsage, err: errors.New("--tasks: not set"), hint: "name tasks with --tasks DIR, or a pulled dataset with --dataset NAME@VERSION"}
			}
			if len(agents) == 0 {
				return usageErr("--agent: not set (NAME=COMMAND)")
			}
			if out == "" {
				return usageErr("--out: not set")
			}
			if trials < 1 {
				return usageErr("--trials: want 1 or more, got %d", trials)
			}
			if regrades < 0 {
				return usageErr("--regrade: want 0 or more, got %d", regrades)
			}
			dirs, err := datasetTaskDirs(tf.cacheDir, datasets)
			if err != nil {
				return err
			}
			return startSuite(c, startArgs{append(taskDirs, dirs...), agents, models, trials, jobs, regrades, out, agentDir, &tf, &nf, &bc}, stdout, stderr)
		},
	}
	c.Flags().StringArrayVar(&taskDirs, "tasks", nil, "a task directory, or a directory of them (repeatable; more may follow as arguments)")
	c.Flags().StringArrayVar(&datasets, "dataset", nil, "NAME@VERSION: the tasks of a dataset proctor dataset pull cached (repeatable; no network)")
	c.Flags().StringArrayVar(&agents, "agent", nil, "an agent to run: a recipe's name (with --model), or NAME=COMMAND (repeatable)")
	c.Flags().StringArrayVar(&models, "model", nil, "PROVIDER/MODEL for the agents run by recipe: one for all, or one each in the order of their --agent (repeatable)")
	c.Flags().IntVar(&trials, "trials", 1, "trials of each agent on each task")
	c.Flags().IntVar(&jobs, "jobs", 0, "trials at once (default: what the CPUs and memory hold)")
	c.Flags().StringVar(&out, "out", "", "the suite directory (created; must be empty)")
	c.Flags().StringVar(&resume, "resume", "", "resume the suite in this directory")
	c.Flags().IntVar(&regrades, "regrade", 3, "when the suite is done, grade this many finished trials again and warn of any verdict that changed (0: none)")
	c.Flags().StringVar(&agentDir, "agent-dir", "", "a directory mounted read-only at /agent in every trial")
	tf.register(c)
	nf.register(c)
	bc.register(c)
	return c
}

type startArgs struct {
	taskDirs, agents, models []string
	trials, jobs             int
	regrades                 int
	out, agentDir            string
	tf                       *trialFlags
	nf                       *netFlags
	bc                       *benchCluster
}

// suiteAgents reads --agent and --model: NAME=COMMAND, or a recipe's name
// paired with a model (one --model for all recipes, or one each in order).
// Each recipe's layer is installed now, before any trial runs.
func suiteAgents(c *cobra.Command, a startArgs) ([]store.Agent, error) {
	cat, err := catalog(a.nf.config)
	if err != nil {
		return nil, err
	}
	var agents []store.Agent
	var recipes []int
	for _, s := range a.agents {
		name, cmd, ok := strings.Cut(s, "=")
		if !ok {
			if _, err := cat.Lookup(s); err != nil {
				return nil, usageErr("--agent %q: want NAME=COMMAND or a recipe's name: %v", s, err)
			}
			recipes = append(recipes, len(agents))
			agents = append(agents, store.Agent{Name: s})
			continue
		}
		if strings.TrimSpace(cmd) == "" {
			return nil, usageErr("--agent %q: want NAME=COMMAND", s)
		}
		agents = append(agents, store.Agent{Name: name, Command: cmd})
	}
	switch {
	case len(recipes) == 0 && len(a.models) > 0:
		return nil, usageErr("--model: for agents run by recipe, and no --agent names one")
	case len(recipes) > 0 && len(a.models) == 0:
		return nil, usageErr("--model: not set: agents run by recipe need PROVIDER/MODEL")
	case len(a.models) > 1 && len(a.models) != len(recipes):
		return nil, usageErr("--model: %d given for %d agent(s) run by recipe: give one for all, or one each", len(a.models), len(recipes))
	}
	o, err := a.tf.baseOptions(nil)
	if err != nil {
		return nil, err
	}
	for i, at := range recipes {
		model := a.models[0]
		if len(a.models) > 1 {
			model = a.models[i]
		}
		r, err := lookupRecipe(cat, agents[at].Name, model)
		if err != nil {
			return nil, err
		}
		ra, err := resolveRecipe(c.Context(), r, model, o.CacheDir, c.ErrOrStderr())
		if err != nil {
			return nil, err
		}
		agents[at].Command = suite.RecipeRef(r.Name, model)
		if slices.ContainsFunc(agents, func(x store.Agent) bool { return x.Name == r.Name && x.Command != agents[at].Command }) {
			// The same recipe with another model: named for both.
			agents[at].Name = r.Name + "-" + strings.Map(func(c rune) rune {
				if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' {
					return c
				}
				return '-'
			}, ra.model)
		}
	}
	seen := map[string]bool{}
	for _, ag := range agents {
		if !agentName().MatchString(ag.Name) {
			return nil, usageErr("--agent %q: the name must be 1-64 of letters, digits, '.', '_', '-'", ag.Name)
		}
		if seen[ag.Name] {
			return nil, usageErr("--agent %s: given twice", ag.Name)
		}
		seen[ag.Name] = true
	}
	return agents, nil
}

var agentName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

func startSuite(c *cobra.Command, a startArgs, stdout, stderr io.Writer) error {
	agents, err := suiteAgents(c, a)
	if err != nil {
		return err
	}
	tasks, loaded, err := findTasks(a.taskDirs)
	if err != nil {
		return err
	}
	if des, err := os.ReadDir(a.out); err == nil && len(des) > 0 {
		if _, serr := os.Stat(filepath.Join(a.out, store.File)); serr == nil {
			return &exitError{code: exitSetup, err: fmt.Errorf("--out %s: holds a suite already", a.out), hint: "proctor bench --resume " + a.out}
		}
		return fmt.Errorf("--out %s: not empty", a.out)
	}
	o, err := a.tf.baseOptions(stderr)
	if err != nil {
		return err
	}
	flags := suite.RunFlags{CacheDir: o.CacheDir, ScratchDir: a.tf.scratchDir, Storage: a.tf.storage, AllowHosts: a.nf.allowHosts,
		Gateways: a.nf.gateways, NoAudit: a.nf.noAudit, Internet: a.nf.internet, HostMap: a.nf.hostMap, VerifierHosts: a.nf.verifier, Jobs: a.jobs}
	for _, p := range []*string{&a.agentDir, &a.nf.config} {
		if *p != "" {
			if *p, err = filepath.Abs(*p); err != nil {
				return err
			}
		}
	}
	flags.AgentDir, flags.Config = a.agentDir, a.nf.config
	for _, t := range loaded {
		flags.MaxCPUs = max(flags.MaxCPUs, t.Environment.CPUs)
		flags.MaxMemoryMB = max(flags.MaxMemoryMB, t.Environment.MemoryMB)
	}
	if a.bc.cf.set() {
		if flags.Trust, err = readTrusted(a.bc.trust); err != nil {
			return err
		}
		if flags.Key, err = coordinatorKey(a.tf.keyFile, o.CacheDir, stderr); err != nil {
			return err
		}
		if flags.AgentDir != "" {
			if flags.AgentDirDigest, err = task.Digest(flags.AgentDir); err != nil {
				return fmt.Errorf("--agent-dir: %w", err)
			}
		}
		if flags.Suite, err = newSuiteID(); err != nil {
			return err
		}
		if flags.AllowHosts, flags.Gateways, flags.Internet, flags.HostMap, flags.VerifierHosts, flags.CAFiles, err = a.nf.resolvedAll(); err != nil {
			return err
		}
		flags.Config = ""
	}
	if err := os.MkdirAll(a.out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	plan := func() (*store.Store, error) {
		st, err := store.Open(a.out)
		if err != nil {
			return nil, err
		}
		opts, _ := json.Marshal(flags)
		if err := st.CreateSuite(store.Suite{Trials: a.trials, Agents: agents, Tasks: tasks, Options: opts, Created: time.Now().UTC()}); err != nil {
			st.Close()
			return nil, err
		}
		return st, nil
	}
	if a.bc.cf.set() {
		st, err := plan()
		if err != nil {
			return err
		}
		defer st.Close()
		return runClusterSuite(c, a.out, st, flags, a.bc, a.regrades, a.tf.quiet, stdout, stderr)
	}
	key := a.tf.keyFile
	if key == "" {
		key = os.Getenv("PROCTOR_KEY_FILE")
	}
	if key == "" {
		key = filepath.Join(a.out, SuiteKeyFile)
		priv, err := bundle.GenerateKey()
		if err != nil {
			return err
		}
		if err := bundle.WriteKeyFiles(key, priv); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "proctor: no --key: the suite signs with a key of its own, %s (%s)\n", key,
			bundle.Fingerprint(priv.Public().(ed25519.PublicKey)))
	} else if err := keyOutsideSandboxes(key); err != nil {
		return err
	}
	if flags.Key, err = filepath.Abs(key); err != nil {
		return err
	}
	if flags.AgentDir != "" && (flags.Key == flags.AgentDir || strings.HasPrefix(flags.Key, flags.AgentDir+"/")) {
		return fmt.Errorf("--key %s: lies under --agent-dir %s, which every agent sees", key, flags.AgentDir)
	}
	st, err := plan()
	if err != nil {
		return err
	}
	defer st.Close()
	return runSuite(c, a.out, st, flags, a.jobs, a.regrades, a.tf.quiet, stdout, stderr)
}

func resumeSuite(c *cobra.Command, dir string, jobs, regrades int, quiet bool, bc *benchCluster, stdout, stderr io.Writer) error {
	st, err := store.Open(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	su, err := st.Suite()
	if err != nil {
		return err
	}
	var flags suite.RunFlags
	if err := json.Unmarshal(su.Options, &flags); err != nil {
		return fmt.Errorf("%s: the suite's run flags: %w", filepath.Join(dir, store.File), err)
	}
	switch {
	case flags.Suite != "" && !bc.cf.set():
		return usageErr("--resume %s: the suite runs on a cluster (%s): pass --cluster URL", dir, flags.Suite)
	case flags.Suite == "" && bc.cf.set():
		return usageErr("--resume %s: the suite runs on this machine, not on a cluster: drop --cluster", dir)
	case flags.Suite != "":
		return runClusterSuite(c, dir, st, flags, bc, regrades, quiet, stdout, stderr)
	}
	return runSuite(c, dir, st, flags, jobs, regrades, quiet, stdout, stderr)
}

func runSuite(c *cobra.Command, dir string, st *store.Store, flags suite.RunFlags, jobs, regrades int, quiet bool, stdout, stderr io.Writer) error {
	if jobs > 0 {
		flags.Jobs = jobs
	}
	fits := suite.DefaultJobs(flags.MaxCPUs, flags.MaxMemoryMB)
	if flags.Jobs <= 0 {
		flags.Jobs = fits
	} else if flags.Jobs > fits {
		fmt.Fprintf(stderr, "proctor: warning: --jobs %d is more than this machine holds at the tasks' limits (%d): trials may slow one another\n", flags.Jobs, fits)
	}
	r := &suite.Runner{Dir: dir, Store: st, Flags: flags, Log: stderr, Terminal: isTerminal(stderr)}
	if quiet {
		r.Log = nil
	}
	fin, requeued, err := r.Recover()
	if err != nil {
		return err
	}
	if fin+requeued > 0 {
		fmt.Fprintf(stderr, "proctor: %d trial(s) were running when the last runner stopped: %d had finished (recorded), %d queued again\n", fin+requeued, fin, requeued)
	}
	counts, err := st.Counts()
	if err != nil {
		return err
	}
	if !quiet {
		fmt.Fprintf(stderr, "proctor: suite %s: %d trial(s) to run, %d done, %d at a time\n", dir, counts["pending"], counts["done"]+counts["failed"], flags.Jobs)
	}
	err = r.Run(c.Context())
	if errors.Is(err, c.Context().Err()) && c.Context().Err() != nil {
		fmt.Fprintf(stderr, "proctor: stopped; resume with: proctor bench --resume %s\n", dir)
		return exitStatus(130)
	}
	if err != nil {
		return err
	}
	counts, err = st.Counts()
	if err != nil {
		return err
	}
	if err := benchRegrades(c, dir, st, regrades, stdout, stderr); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "suite %s: %d trial(s) done, %d could not run; proctor report %s\n", dir, counts["done"], counts["failed"], dir)
	return nil
}

// RegradesFile, in a suite directory, holds the regrades of proctor bench's
// sample: one JSON object a line, {"agent","task","index","same","detail"}.
const RegradesFile = "regrades.jsonl"

// benchRegrades grades a sample of n finished trials again, evenly spread
// over the suite, and prints each whose verdict changed: a grader that is
// not deterministic on a frozen changeset makes its task's scores noise.
// The results go to DIR/regrades.jsonl, which proctor report lists.
func benchRegrades(c *cobra.Command, dir string, st *store.Store, n int, stdout, stderr io.Writer) error {
	if n <= 0 {
		return nil
	}
	su, err := st.Suite()
	if err != nil {
		return err
	}
	tasks := map[string]store.Task{}
	for _, t := range su.Tasks {
		tasks[t.Name] = t
	}
	ts, err := st.Trials()
	if err != nil {
		return err
	}
	var done []store.Trial
	for _, t := range ts {
		if t.State == store.StateDone && t.Result != nil && t.Result.BundleSHA256 != "" {
			done = append(done, t)
		}
	}
	if len(done) == 0 {
		return nil
	}
	var flags suite.RunFlags
	if err := json.Unmarshal(su.Options, &flags); err != nil {
		return err
	}
	var lines []byte
	same, changed := 0, 0
	step := max(len(done)/n, 1)
	for k := 0; k < len(done) && same+changed < n; k += step {
		t := done[k]
		rg := regradeResult(c, report.Regrade{Agent: t.Agent, Task: t.Task, Index: t.Index},
			filepath.Join(dir, t.Result.Out), tasks[t.Task].Dir, flags.CacheDir, flags.ScratchDir)
		switch {
		case rg.Same:
			same++
		case strings.HasPrefix(rg.Detail, "could not regrade"):
			changed++
			fmt.Fprintf(stderr, "proctor: warning: %s/%s/%d: %s\n", t.Agent, t.Task, t.Index, rg.Detail)
		default:
			changed++
			fmt.Fprintf(stderr, "proctor: warning: regrade of %s/%s/%d changed: %s\n", t.Agent, t.Task, t.Index, rg.Detail)
		}
		b, err := json.Marshal(rg)
		if err != nil {
			return err
		}
		lines = append(append(lines, b...), '\n')
	}
	if err := os.WriteFile(filepath.Join(dir, RegradesFile), lines, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "regrade: %d of %d sampled trial(s) graded again identically\n", same, same+changed)
	return nil
}

// findTasks loads the tasks of dirs: each a task (it holds task.toml) or a
// directory of tasks. Names must be unique.
func findTasks(dirs []string) ([]store.Task, []*task.Task, error) {
	var out []store.Task
	var loaded []*task.Task
	seen := map[string]string{}
	add := func(dir string) error {
		t, err := task.Load(dir)
		if err != nil {
			return err
		}
		abs, err := filepath.Abs(t.Dir)
		if err != nil {
			return err
		}
		if other, ok := seen[t.Name]; ok {
			return fmt.Errorf("two tasks named %q: %s and %s", t.Name, other, abs)
		}
		seen[t.Name] = abs
		d, err := task.DigestTree(abs, t.DigestOptions(nil))
		if err != nil {
			return err
		}
		out = append(out, store.Task{Name: t.Name, Dir: abs, Digest: d.Digest})
		loaded = append(loaded, t)
		return nil
	}
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "task.toml")); err == nil {
			if err := add(d); err != nil {
				return nil, nil, err
			}
			continue
		}
		des, err := os.ReadDir(d)
		if err != nil {
			return nil, nil, fmt.Errorf("--tasks %s: %w", d, err)
		}
		n := 0
		for _, de := range des {
			sub := filepath.Join(d, de.Name())
			if _, err := os.Stat(filepath.Join(sub, "task.toml")); err == nil && de.IsDir() {
				if err := add(sub); err != nil {
					return nil, nil, err
				}
				n++
			}
		}
		if n == 0 {
			return nil, nil, fmt.Errorf("--tasks %s: neither a task (no task.toml) nor a directory of tasks", d)
		}
	}
	return out, loaded, nil
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

package cli

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

// exitNotPassed is the status of a trial that ran and was judged, but did
// not pass.
const exitNotPassed = 1

// trialFlags are the flags every trial-running command shares.
type trialFlags struct {
	cacheDir, scratchDir, keyFile string
	storage                       string
	quiet                         bool
}

func (f *trialFlags) register(c *cobra.Command) {
	f.registerUnsigned(c)
	c.Flags().StringVar(&f.keyFile, "key", "", "the private key that signs each bundle (default $PROCTOR_KEY_FILE; without one, an ephemeral key)")
}

// registerUnsigned registers the flags but --key, for commands that sign
// nothing.
func (f *trialFlags) registerUnsigned(c *cobra.Command) {
	c.Flags().StringVar(&f.cacheDir, "cache-dir", "", "where prepared workspaces are kept (default $PROCTOR_CACHE_DIR, else the user cache dir)")
	c.Flags().StringVar(&f.scratchDir, "scratch-dir", "", "a directory on a disk (not a tmpfs) where each sandbox's filesystem image and mount point go while it runs (default the temp dir, or /var/tmp when that is a tmpfs)")
	c.Flags().StringVar(&f.storage, "storage", "", `where the sandboxes' writable layers live: "disk" (default: an ext4 image of the task's storage_mb each) or "memory" (a tmpfs whose pages count against memory_mb; recorded in the verdict)`)
	c.Flags().BoolVarP(&f.quiet, "quiet", "q", false, "no progress lines on stderr")
}

// keyOutsideSandboxes refuses a key file a sandbox could show: one under the
// host directories a "host" environment exposes (it would rest on a mask the
// host scan could miss), or one with other hard links (which could lie
// anywhere). The signing key must never enter a sandbox.
func keyOutsideSandboxes(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("--key %s: %w", path, err)
	}
	for _, d := range sandbox.HostDirs {
		rd, err := filepath.EvalSymlinks(d)
		if err != nil {
			continue
		}
		if real == rd || strings.HasPrefix(real, rd+"/") {
			return &exitError{code: exitSetup, err: fmt.Errorf("--key %s: lies under %s, which sandboxes show", path, d),
				hint: "keep signing keys outside /usr, /etc and the other system directories, e.g. in ~/.config/proctor"}
		}
	}
	fi, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("--key %s: %w", path, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return fmt.Errorf("--key %s: has %d hard links; a signing key must have one", path, st.Nlink)
	}
	return nil
}

// signingKey reads the key from --key or PROCTOR_KEY_FILE, or makes an
// ephemeral one and says so plainly.
func (f *trialFlags) signingKey(stderr io.Writer) (ed25519.PrivateKey, error) {
	path := f.keyFile
	if path == "" {
		path = os.Getenv("PROCTOR_KEY_FILE")
	}
	if path != "" {
		if err := keyOutsideSandboxes(path); err != nil {
			return nil, err
		}
		return bundle.ReadPrivateKey(path)
	}
	key, err := bundle.GenerateKey()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "proctor: signing with an ephemeral key %s: its bundles prove integrity, not who ran them (use --key, see proctor keygen)\n",
		bundle.Fingerprint(key.Public().(ed25519.PublicKey)))
	return key, nil
}

func (f *trialFlags) options(stderr io.Writer) (trial.Options, error) {
	o, err := f.baseOptions(stderr)
	if err != nil {
		return o, err
	}
	if o.Key, err = f.signingKey(stderr); err != nil {
		return o, err
	}
	return o, nil
}

// baseOptions are the options without a signing key (for regrade).
func (f *trialFlags) baseOptions(stderr io.Writer) (trial.Options, error) {
	o := trial.Options{ScratchDir: f.scratchDir, Storage: f.storage}
	var err error
	if o.CacheDir, err = cacheDir(f.cacheDir); err != nil {
		return o, err
	}
	if !f.quiet {
		o.Progress = stderr
	}
	return o, nil
}

// cacheDir is --cache-dir's value, else $PROCTOR_CACHE_DIR, else proctor
// in the user cache dir.
func cacheDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if d := os.Getenv("PROCTOR_CACHE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("--cache-dir: not set and no user cache dir: %w", err)
	}
	return filepath.Join(d, "proctor"), nil
}

func loadTask(dir string) (*task.Task, error) {
	if dir == "" {
		return nil, usageErr("--task: not set")
	}
	t, err := task.Load(dir)
	if err != nil {
		return nil, err
	}
	return t, nil
}

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		taskDir, agent, model, agentDir, out, cpuset, nonce string
		record                                              bool
		tf                                                  trialFlags
		nf                                                  netFlags
	)
	c := &cobra.Command{
		Use:   "run --task DIR --agent COMMAND|NAME [--model PROVIDER/MODEL] --out DIR",
		Short: "Run one agent on one task and grade it in a second sandbox",
		Long: `Run COMMAND (with /bin/sh -c, in the task's workdir) as the agent in a
sandbox over a copy-on-write view of the task's environment and workspace,
with the instruction at /proctor/instruction.md and no network (or, with an
allow-list, only an egress proxy at 127.0.0.1:3128, and model gateways at
127.0.0.1:4100 on). When it ends,
its whole process tree is killed, its changes are read into a changeset, and
the permitted part of them is graded by the task's tests/test.sh in a fresh
sandbox. The verdict, the logs, the changeset, the instruction and the
signed bundle binding them all (bundle.json) go to --out.

--agent NAME runs a real agent CLI by recipe (proctor agent ls lists them)
with --model PROVIDER/MODEL: its pinned package, installed once into a
read-only layer mounted at /proctor/agent, pointed at the model gateway of
its provider (whose upstream --model-gateway PROVIDER=URL sets; the real
key comes from the host's PROVIDER_API_KEY and never enters the sandbox).

Exit status: 0 when the trial passed; 1 when it was judged and did not pass
(failed, compromised, timed out); 125 when it could not be run or judged; 2
for a wrong command line.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if agent == "" {
				return usageErr("--agent: not set")
			}
			if out == "" {
				return usageErr("--out: not set")
			}
			t, err := loadTask(taskDir)
			if err != nil {
				return err
			}
			o, err := tf.options(stderr)
			if err != nil {
				return err
			}
			if err := nf.apply(&o); err != nil {
				return err
			}
			o.Task, o.Agent, o.AgentDir, o.Out, o.CPUSet, o.Net.Record = t, agent, agentDir, out, cpuset, record
			cat, err := catalog(nf.config)
			if err != nil {
				return err
			}
			r, err := lookupRecipe(cat, agent, model)
			if err != nil {
				return err
			}
			if r != nil {
				ra, err := resolveRecipe(c.Context(), r, model, o.CacheDir, o.Progress)
				if err != nil {
					return err
				}
				if err := ra.apply(&o); err != nil {
					return err
				}
			}
			if len(nonce) > 256 || strings.ContainsFunc(nonce, unicode.IsControl) {
				return usageErr("--nonce: at most 256 bytes, no control characters")
			}
			o.Nonce = nonce
			v, err := trial.Run(c.Context(), o)
			return reportTrial(stdout, v, err, out)
		},
	}
	c.Flags().StringVar(&taskDir, "task", "", "the task directory (Harbor layout)")
	c.Flags().StringVar(&agent, "agent", "", "the agent: a recipe's name (proctor agent ls), or a shell command")
	c.Flags().StringVar(&model, "model", "", "PROVIDER/MODEL for an agent run by recipe, e.g. anthropic/claude-sonnet-4-5")
	c.Flags().StringVar(&agentDir, "agent-dir", "", "a directory mounted read-only at /agent")
	c.Flags().StringVar(&out, "out", "", "the output directory (created; must be empty)")
	recordFlag(c, &record)
	c.Flags().StringVar(&nonce, "nonce", "", "a value of the caller's, recorded in the signed verdict, binding the bundle to the caller's trial (proctor worker passes the cluster's trial id)")
	c.Flags().StringVar(&cpuset, "cpuset", "", "run the trial's sandboxes on these CPUs only, e.g. 1 or 0-1 (proctor bench gives each concurrent trial its own)")
	tf.register(c)
	nf.register(c)
	return c
}

// reportTrial prints a one-line summary and turns the verdict into an exit
// status.
func reportTrial(stdout io.Writer, v *trial.Verdict, err error, out string) error {
	if v == nil {
		return err
	}
	word := "FAIL"
	if v.Passed {
		word = "PASS"
	}
	fmt.Fprintf(stdout, "%s %s: status %s, reward %g, %d violation(s), changeset %d file(s); verdict in %s\n",
		word, v.Task.Name, v.Status, v.Reward, len(v.Violations), v.Changeset.Files, filepath.Join(out, trial.VerdictFile))
	if line := auditLine(v); line != "" {
		fmt.Fprintln(stdout, line)
	}
	if err != nil {
		return err
	}
	if !v.Passed {
		return exitStatus(exitNotPassed)
	}
	return nil
}

var errValidate = errors.New("task failed validation")

// auditLine sums up, in one line, what the agent tried that the audit saw
// and what its models cost; "" when there is nothing to say.
func auditLine(v *trial.Verdict) string {
	var parts []string
	hidden, elsewhere := 0, 0
	for k, n := range v.Audit.Counts {
		switch {
		case strings.HasPrefix(k, "hidden."):
			hidden += n
		case k == "net.attempt":
			elsewhere += n
		}
	}
	if hidden > 0 {
		parts = append(parts, fmt.Sprintf("%d attempt(s) on hidden paths", hidden))
	}
	if elsewhere > 0 {
		parts = append(parts, fmt.Sprintf("%d connect/send attempt(s) outside the sandbox's listeners", elsewhere))
	}
	if v.Network.Allowed+v.Network.Denied > 0 {
		parts = append(parts, fmt.Sprintf("proxy allowed %d, denied %d", v.Network.Allowed, v.Network.Denied))
	}
	if m := v.Models; m != nil {
		var in, out int64
		for _, u := range m.Usage {
			in, out = in+u.InputTokens, out+u.OutputTokens
		}
		parts = append(parts, fmt.Sprintf("%d model call(s), %d input and %d output tokens", m.Calls, in, out))
	}
	if len(parts) == 0 {
		return ""
	}
	return "audit: " + strings.Join(parts, "; ")
}

package cli

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/cluster"
	"github.com/proctor-sandbox/proctor/internal/gateway"
	"github.com/proctor-sandbox/proctor/internal/store"
	"github.com/proctor-sandbox/proctor/internal/suite"
	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

// benchCluster are the flags of a suite run on a cluster's workers.
type benchCluster struct {
	cf      clusterFlags
	trust   []string
	ackWait time.Duration
}

func (b *benchCluster) register(c *cobra.Command) {
	b.cf.register(c)
	c.Flags().StringArrayVar(&b.trust, "trust", nil, "with --cluster: a worker's public key file; only bundles signed by a trusted key count (repeatable)")
	c.Flags().DurationVar(&b.ackWait, "ack-wait", cluster.DefaultAckWait, "with --cluster: how long a trial's worker may go unheard before the trial goes to another worker")
}

// newSuiteID names a suite on a cluster: "s" and 16 random hex digits.
func newSuiteID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "s" + hex.EncodeToString(b[:]), nil
}

// readTrusted reads the --trust files into the lines the suite keeps.
func readTrusted(files []string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, f := range files {
		pub, err := bundle.ReadPublicKey(f)
		if err != nil {
			return nil, &exitError{code: exitUsage, err: fmt.Errorf("--trust: %w", err)}
		}
		line := strings.TrimSpace(string(bundle.MarshalPublicKey(pub, "")))
		if !seen[line] {
			seen[line] = true
			out = append(out, line)
		}
	}
	return out, nil
}

// parseTrusted parses the public key lines a suite keeps.
func parseTrusted(lines []string) ([]ed25519.PublicKey, error) {
	var out []ed25519.PublicKey
	for i, l := range lines {
		pub, err := bundle.ParsePublicKey([]byte(l + "\n"))
		if err != nil {
			return nil, fmt.Errorf("the suite's trusted key %d: %w", i+1, err)
		}
		out = append(out, pub)
	}
	return out, nil
}

// trustedSigner returns the key of keys that signed the bundle data, or
// why none did.
func trustedSigner(path string, data []byte, keys []ed25519.PublicKey) (ed25519.PublicKey, error) {
	p, err := bundle.Verify(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for _, k := range keys {
		if bundle.Fingerprint(k) == p.Signer.Fingerprint {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%s: signed by %s, a key the suite does not trust", path, p.Signer.Fingerprint)
}

// acceptWorkerBundle is how a cluster suite checks a worker's output: the
// bundle verifies, with every artifact, against a trusted worker key, and
// binds the task, agent command and agent dir the trial was planned with,
// under the network and audit the suite gave it: whoever can write to the
// queue could otherwise send a trusted worker the suite's trial with the
// internet opened or the audit off.
func acceptWorkerBundle(keys []ed25519.PublicKey, flags suite.RunFlags) func(string, suite.Planned) error {
	gateways := map[string]string{}
	if len(flags.Gateways) > 0 {
		if specs, err := gateway.ParseSpecs(strings.Join(flags.Gateways, ",")); err == nil {
			for _, g := range specs {
				gateways[g.Name] = g.Upstream.String()
			}
		}
	}
	return func(dir string, pl suite.Planned) error {
		tk, a, agentTree := pl.Task, pl.Agent, pl.AgentDir
		path := filepath.Join(dir, trial.BundleFile)
		data, err := readSmallRegular(path)
		if err != nil {
			return fmt.Errorf("no bundle: %w", err)
		}
		pub, err := trustedSigner(trial.BundleFile, data, keys)
		if err != nil {
			return err
		}
		p, _, err := checkBundle(path, data, pub, true)
		if err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), dir+"/"))
		}
		switch {
		case p.Provenance.TaskDigest != tk.Digest:
			return fmt.Errorf("the bundle's task digest %s is not the suite's %s for %s", p.Provenance.TaskDigest, tk.Digest, tk.Name)
		case p.Provenance.Agent.Command != a.Command:
			return fmt.Errorf("the bundle's agent command %q is not %s's %q", p.Provenance.Agent.Command, a.Name, a.Command)
		case p.Provenance.Agent.DirDigest != agentTree:
			return fmt.Errorf("the bundle's agent dir digest %q is not the suite's %q", p.Provenance.Agent.DirDigest, agentTree)
		}
		var v trial.Verdict
		if err := json.Unmarshal(p.Verdict, &v); err != nil {
			return fmt.Errorf("the bundle's verdict: %w", err)
		}
		if v.Nonce != pl.Nonce {
			return fmt.Errorf("the bundle is of trial %q, not %q", v.Nonce, pl.Nonce)
		}
		if err := onlyManifest(dir, p); err != nil {
			return err
		}
		return sameConditions(&v, tk, flags, gateways)
	}
}

// onlyManifest checks that dir holds the bundle, its verdict and the
// artifacts its manifest names, as regular files, and nothing else: what
// a suite keeps of a worker is what the bundle binds.
func onlyManifest(dir string, p *bundle.Payload) error {
	want := map[string]bool{trial.BundleFile: true, trial.VerdictFile: true}
	for _, a := range p.Manifest {
		want[a.Name] = true
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			return nil // checked by what it holds
		}
		if !d.Type().IsRegular() || !want[filepath.ToSlash(rel)] {
			return fmt.Errorf("%s: not the bundle, its verdict or an artifact it names", rel)
		}
		return nil
	})
}

// sameConditions checks that a verdict's agent ran with no more network
// than its task and the suite allow, through the suite's gateways only,
// and watched unless the suite said --no-audit.
func sameConditions(v *trial.Verdict, tk store.Task, flags suite.RunFlags, gateways map[string]string) error {
	allowed := map[string]bool{}
	for _, h := range flags.AllowHosts {
		allowed[h] = true
	}
	if len(v.Network.AllowedHosts) > len(flags.AllowHosts) {
		t, err := task.Load(tk.Dir)
		if err != nil {
			return err
		}
		_, hosts := t.AgentNetwork()
		for _, h := range hosts {
			allowed[h] = true
		}
	}
	for _, h := range v.Network.AllowedHosts {
		if !allowed[h] {
			return fmt.Errorf("the agent was allowed %s, which neither the task nor the suite allows", h)
		}
	}
	if v.Models != nil {
		for _, g := range v.Models.Gateways {
			if up, ok := gateways[g.Name]; !ok || up != g.Upstream {
				return fmt.Errorf("the agent had the model gateway %s=%s, which the suite does not give", g.Name, g.Upstream)
			}
		}
	}
	if !flags.NoAudit && (v.Audit.Hidden != "trap" || v.Audit.Network != "seccomp-notify") {
		return fmt.Errorf("the audit was off (hidden: %s, network: %s); the suite did not say --no-audit", v.Audit.Hidden, v.Audit.Network)
	}
	return nil
}

// CoordinatorKeyFile is the key a coordinator started without --key signs
// its trial messages with, in the cache dir: made the first time, kept
// after, so that workers trust one key for all its suites.
const CoordinatorKeyFile = "coordinator.key"

// coordinatorKey returns the absolute path of the key that signs a cluster
// suite's trials: --key, $PROCTOR_KEY_FILE, or the cache dir's own.
func coordinatorKey(flag, cacheDir string, stderr io.Writer) (string, error) {
	path, _, err := ownKey(flag, cacheDir, CoordinatorKeyFile, "the coordinator signs its trials with a key of its own, %s; workers must --trust %s.pub", stderr)
	return path, err
}

// runClusterSuite runs a suite's trials on a cluster's workers and
// records them in st as they come back.
func runClusterSuite(c *cobra.Command, dir string, st *store.Store, flags suite.RunFlags, bc *benchCluster, regrades int, quiet bool, stdout, stderr io.Writer) error {
	keys, err := parseTrusted(flags.Trust)
	if err != nil {
		return err
	}
	priv, err := bundle.ReadPrivateKey(flags.Key)
	if err != nil {
		return fmt.Errorf("the coordinator's key: %w", err)
	}
	ctx := c.Context()
	conn, err := bc.cf.connect(ctx, cluster.WithAckWait(bc.ackWait))
	if err != nil {
		return err
	}
	defer conn.Close()
	co := &suite.Coordinator{Dir: dir, Store: st, Conn: conn, Suite: flags.Suite, Flags: flags, Key: priv, Trust: keys,
		Accept: acceptWorkerBundle(keys, flags), Log: stderr, Terminal: isTerminal(stderr), Stats: &suite.CoordStats{}}
	if quiet {
		co.Log = nil
	}
	counts, err := st.Counts()
	if err != nil {
		return err
	}
	if !quiet {
		fmt.Fprintf(stderr, "proctor: suite %s on cluster %s as %s, its trials signed by %s: %d trial(s) to publish, %d on the workers, %d done\n",
			dir, cluster.RedactURL(bc.cf.url), flags.Suite, bundle.Fingerprint(priv.Public().(ed25519.PublicKey)),
			counts["pending"], counts["running"], counts["done"]+counts["failed"])
	}
	err = co.Run(ctx)
	if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
		fmt.Fprintf(stderr, "proctor: stopped; the trials stay queued on the cluster; resume with: proctor bench --resume %s --cluster URL\n", dir)
		return exitStatus(130)
	}
	if err != nil {
		return err
	}
	if s := co.Stats; !quiet && s.Rejected+s.Duplicates > 0 {
		fmt.Fprintf(stderr, "proctor: %d result(s) rejected, %d duplicate(s) of recorded trials ignored\n", s.Rejected, s.Duplicates)
	}
	counts, err = st.Counts()
	if err != nil {
		return err
	}
	if err := benchRegrades(c, dir, st, regrades, stdout, stderr); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "suite %s: %d trial(s) done, %d could not run or were rejected; proctor report %s\n", dir, counts["done"], counts["failed"], dir)
	return nil
}

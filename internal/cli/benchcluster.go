package cli

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/cluster"
	"github.com/proctor-sandbox/proctor/internal/store"
	"github.com/proctor-sandbox/proctor/internal/suite"
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
// binds the task, agent command and agent dir the trial was planned with.
func acceptWorkerBundle(keys []ed25519.PublicKey) func(string, *store.Trial, store.Task, store.Agent, string) error {
	return func(dir string, t *store.Trial, tk store.Task, a store.Agent, agentTree string) error {
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
		return nil
	}
}

// runClusterSuite runs a suite's trials on a cluster's workers and
// records them in st as they come back.
func runClusterSuite(c *cobra.Command, dir string, st *store.Store, flags suite.RunFlags, bc *benchCluster, regrades int, quiet bool, stdout, stderr io.Writer) error {
	keys, err := parseTrusted(flags.Trust)
	if err != nil {
		return err
	}
	ctx := c.Context()
	conn, err := bc.cf.connect(ctx, cluster.WithAckWait(bc.ackWait))
	if err != nil {
		return err
	}
	defer conn.Close()
	co := &suite.Coordinator{Dir: dir, Store: st, Conn: conn, Suite: flags.Suite, Flags: flags,
		Accept: acceptWorkerBundle(keys), Log: stderr, Terminal: isTerminal(stderr), Stats: &suite.CoordStats{}}
	if quiet {
		co.Log = nil
	}
	counts, err := st.Counts()
	if err != nil {
		return err
	}
	if !quiet {
		fmt.Fprintf(stderr, "proctor: suite %s on cluster %s as %s: %d trial(s) to publish, %d on the workers, %d done\n",
			dir, cluster.RedactURL(bc.cf.url), flags.Suite, counts["pending"], counts["running"], counts["done"]+counts["failed"])
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

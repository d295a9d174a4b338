package cli

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/cluster"
	"github.com/proctor-sandbox/proctor/internal/suite"
)

// WorkerKeyFile is the key a worker started without --key signs with, in
// its cache dir: made the first time, kept after.
const WorkerKeyFile = "worker.key"

func newWorkerCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		cf    clusterFlags
		tf    trialFlags
		jobs  int
		name  string
		trust []string
	)
	c := &cobra.Command{
		Use:   "worker --cluster URL --trust COORDINATOR.pub [--jobs N] [--key KEYFILE] [--name NAME]",
		Short: "Run trials from a cluster's queue until interrupted",
		Long: `Take trials from the cluster's queue (proctor bench --cluster publishes
them), --jobs at a time, until interrupted. Only trials signed by a
--trust'ed coordinator key are run: whoever can write to the queue cannot
make the worker run anything, reach any host or spend its model keys. Each trial is an ordinary
proctor run on the task and agent dir its message names, fetched from the
cluster by digest, checked against the task digest the suite was planned
with, and cached. The bundle is signed with --key (default
$PROCTOR_KEY_FILE, else a key of the worker's own in the cache dir, made
the first time); the coordinator counts it only if it trusts that key
(--trust KEYFILE.pub). A trial's output is stored in the cluster before
the trial is acked: a worker killed at any moment loses no result, and its
trials go to another worker once the ack wait runs out.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !cf.set() {
				return usageErr("--cluster: not set (e.g. nats://127.0.0.1:4222)")
			}
			if jobs < 0 {
				return usageErr("--jobs: want 1 or more, got %d", jobs)
			}
			if jobs == 0 {
				jobs = runtime.NumCPU()
			}
			if name == "" {
				host, _ := os.Hostname()
				name = workerName(host) + "-" + strconv.Itoa(os.Getpid())
			}
			if !cluster.ValidID(name) || strings.Contains(name, ".") {
				return usageErr("--name %q: want 1-200 of letters, digits, '_' and '-'", name)
			}
			o, err := tf.baseOptions(io.Discard)
			if err != nil {
				return err
			}
			key, priv, err := workerKey(tf.keyFile, o.CacheDir, stderr)
			if err != nil {
				return err
			}
			pub := priv.Public().(ed25519.PublicKey)
			if len(trust) == 0 {
				return usageErr("--trust: not set: name the public key of each coordinator whose trials this worker runs (proctor bench --cluster prints where it is)")
			}
			lines, err := readTrusted(trust)
			if err != nil {
				return err
			}
			coords, err := parseTrusted(lines)
			if err != nil {
				return err
			}
			ctx := c.Context()
			conn, err := cf.connect(ctx, cluster.WithBind())
			if err != nil {
				return err
			}
			defer conn.Close()
			w := &suite.Worker{Conn: conn, Name: name, Jobs: jobs, Key: key, Priv: priv, Trust: coords, KeyID: bundle.Fingerprint(pub),
				Version: bundle.ThisBuild().Version, CacheDir: o.CacheDir, ScratchDir: tf.scratchDir, Storage: tf.storage, Log: stderr}
			if tf.quiet {
				w.Log = nil
			}
			fmt.Fprintf(stdout, "proctor: worker %s: %d job(s), signing with %s (%s); Ctrl-C stops it\n", name, jobs, key, bundle.Fingerprint(pub))
			start := time.Now()
			err = w.Run(ctx)
			if errors.Is(err, ctx.Err()) && ctx.Err() != nil {
				fmt.Fprintf(stdout, "proctor: worker %s stopped after %s\n", name, time.Since(start).Round(time.Second))
				return nil
			}
			return err
		},
	}
	cf.register(c)
	tf.register(c)
	c.Flags().IntVar(&jobs, "jobs", 0, "trials at once (default: one per CPU)")
	c.Flags().StringVar(&name, "name", "", "the worker's name in the cluster (default HOST-PID)")
	c.Flags().StringArrayVar(&trust, "trust", nil, "a coordinator's public key file: only trials it signed are run (repeatable; required)")
	return c
}

// workerName makes a host name a worker name: letters, digits, '-', '_'.
func workerName(host string) string {
	b := []byte(host)
	for i, r := range b {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "worker"
	}
	return string(b)
}

// workerKey returns the worker's signing key file and its public key:
// --key, $PROCTOR_KEY_FILE, or the cache dir's own, made if missing.
func workerKey(flag, cacheDir string, stderr io.Writer) (string, ed25519.PrivateKey, error) {
	return ownKey(flag, cacheDir, WorkerKeyFile, "the worker signs with a key of its own, %s; coordinators must --trust %s.pub", stderr)
}

// ownKey returns the absolute path and the key of --key, else of
// $PROCTOR_KEY_FILE, else of cacheDir/name, made the first time (made says
// so on stderr, with the path twice).
func ownKey(flag, cacheDir, name, made string, stderr io.Writer) (string, ed25519.PrivateKey, error) {
	path := flag
	if path == "" {
		path = os.Getenv("PROCTOR_KEY_FILE")
	}
	if path == "" {
		path = filepath.Join(cacheDir, name)
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(cacheDir, 0o700); err != nil {
				return "", nil, err
			}
			priv, err := bundle.GenerateKey()
			if err != nil {
				return "", nil, err
			}
			if err := bundle.WriteKeyFiles(path, priv); err != nil {
				return "", nil, err
			}
			fmt.Fprintf(stderr, "proctor: no --key: "+made+"\n", path, path)
		}
	}
	if err := keyOutsideSandboxes(path); err != nil {
		return "", nil, err
	}
	priv, err := bundle.ReadPrivateKey(path)
	if err != nil {
		return "", nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", nil, err
	}
	return abs, priv, nil
}

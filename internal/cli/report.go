package cli

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/report"
	"github.com/proctor-sandbox/proctor/internal/store"
	"github.com/proctor-sandbox/proctor/internal/suite"
	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

func newReportCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		format, output, pubkey string
		regrades               int
		tf                     trialFlags
	)
	c := &cobra.Command{
		Use:   "report DIR [--format html|md|csv|json] [-o FILE]",
		Short: "Leaderboard, comparisons and integrity of a suite's results",
		Long: `Read the suite in DIR (its store and its trials' bundles) and write a
report: per agent the pass rate with its 95% Wilson interval, mean reward,
pass@k, tokens and time; each two agents compared on the same tasks; the
task x agent matrix; how much trials disagree, and a regrade of a sample of
trials to check the grader is deterministic; compromised trials by kind.

Every bundle is verified (against --pubkey, or the suite's own key) before
its trial is counted; a trial whose bundle fails is listed, never counted.
Formats: html (one self-contained file with charts), md, csv (one row per
trial), json (the stable form, schema proctor.report/v1).`,
		Args: oneArg("report", "proctor report DIR"),
		RunE: func(c *cobra.Command, args []string) error {
			switch format {
			case "html", "md", "csv", "json":
			default:
				return usageErr("--format %q: want html, md, csv or json", format)
			}
			dir := args[0]
			in, err := reportInput(c, dir, pubkey, regrades, &tf, stderr)
			if err != nil {
				return err
			}
			r := report.Build(*in)
			var buf bytes.Buffer
			switch format {
			case "html":
				err = r.HTML(&buf)
			case "md":
				err = r.Markdown(&buf)
			case "csv":
				err = r.CSV(&buf)
			case "json":
				err = r.JSON(&buf)
			}
			if err != nil {
				return err
			}
			if output == "" || output == "-" {
				_, err = stdout.Write(buf.Bytes())
				return err
			}
			tmp := output + ".tmp"
			if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
				return err
			}
			return os.Rename(tmp, output)
		},
	}
	c.Flags().StringVar(&format, "format", "md", "html, md, csv or json")
	c.Flags().StringVarP(&output, "output", "o", "", "write the report to FILE (default stdout)")
	c.Flags().StringVar(&pubkey, "pubkey", "", "the public key every bundle must be signed with (default the suite's key's public half)")
	c.Flags().IntVar(&regrades, "regrade", 3, "regrade this many finished trials to check the grader is deterministic (0: none; needs root)")
	tf.registerUnsigned(c)
	return c
}

// reportInput reads the suite's store, verifies every finished trial's
// bundle and regrades a sample.
func reportInput(c *cobra.Command, dir, pubkey string, regrades int, tf *trialFlags, stderr io.Writer) (*report.Input, error) {
	st, err := store.Open(dir)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	su, err := st.Suite()
	if err != nil {
		return nil, err
	}
	var flags suite.RunFlags
	if err := json.Unmarshal(su.Options, &flags); err != nil {
		return nil, fmt.Errorf("%s: the suite's run flags: %w", filepath.Join(dir, store.File), err)
	}
	keys, err := suiteKeys(pubkey, &flags)
	if err != nil {
		return nil, err
	}
	ts, err := st.Trials()
	if err != nil {
		return nil, err
	}
	in := &report.Input{Suite: filepath.Base(filepath.Clean(dir)), Generated: time.Now().UTC()}
	for _, a := range su.Agents {
		in.Agents = append(in.Agents, a.Name)
	}
	tasks := map[string]store.Task{}
	for _, t := range su.Tasks {
		in.Tasks = append(in.Tasks, t.Name)
		tasks[t.Name] = t
	}
	in.Trials = make([]report.Trial, len(ts))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range ts {
		t := &ts[i]
		rt := &in.Trials[i]
		*rt = report.Trial{Agent: t.Agent, Task: t.Task, Index: t.Index}
		if t.State != "done" || t.Result == nil {
			continue
		}
		r := t.Result
		*rt = report.Trial{Agent: t.Agent, Task: t.Task, Index: t.Index, Status: r.Status, Passed: r.Passed, Reward: r.Reward,
			WallMS: r.WallMS, AgentMS: r.AgentMS, GraderMS: r.GraderMS, ModelCalls: r.ModelCalls,
			InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, Violations: r.Violations,
			Bundle: filepath.Join(r.Out, trial.BundleFile)}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var v *trial.Verdict
			v, rt.VerifyError = verifyTrialBundle(filepath.Join(dir, rt.Bundle), r.BundleSHA256, keys)
			rt.Verified = rt.VerifyError == ""
			if v != nil {
				rt.Tests = trialTests(v)
				if v.OpenNetwork {
					rt.Agent += OpenNetworkLabel
				}
			}
		}()
	}
	wg.Wait()
	// Trials whose agent had open egress are a leaderboard of their own,
	// beside their agent's sandboxed ones: never mixed into them.
	var agents []string
	for _, a := range in.Agents {
		plain, open := false, false
		for _, t := range in.Trials {
			plain = plain || t.Agent == a
			open = open || t.Agent == a+OpenNetworkLabel
		}
		if plain || !open {
			agents = append(agents, a)
		}
		if open {
			agents = append(agents, a+OpenNetworkLabel)
		}
	}
	in.Agents = agents
	for i := range in.Trials {
		if t := &in.Trials[i]; t.Status != "" && !t.Verified {
			fmt.Fprintf(stderr, "proctor: %s × %s #%d is not counted: %s\n", t.Agent, t.Task, t.Index, t.VerifyError)
		}
	}
	if in.Regrades, err = benchRegradesOf(dir); err != nil {
		return nil, err
	}
	if regrades > 0 {
		more, err := regradeSample(c, dir, in.Trials, tasks, regrades, tf, stderr)
		if err != nil {
			return nil, err
		}
		in.Regrades = append(in.Regrades, more...)
	}
	return in, nil
}

// benchRegradesOf reads the regrades proctor bench made (DIR/regrades.jsonl),
// if any.
func benchRegradesOf(dir string) ([]report.Regrade, error) {
	path := filepath.Join(dir, RegradesFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []report.Regrade
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		var g report.Regrade
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&g); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, i+1, err)
		}
		out = append(out, g)
	}
	return out, nil
}

// suiteKeys are the keys a suite's bundles may be signed with: --pubkey's,
// else the worker keys a cluster suite trusts, else the public half of the
// suite's signing key.
func suiteKeys(pubkey string, flags *suite.RunFlags) ([]ed25519.PublicKey, error) {
	if pubkey == "" && len(flags.Trust) > 0 {
		return parseTrusted(flags.Trust)
	}
	pub, err := suitePublicKey(pubkey, flags.Key)
	if err != nil {
		return nil, err
	}
	return []ed25519.PublicKey{pub}, nil
}

// suitePublicKey is --pubkey's key, or the public half of the suite's
// signing key.
func suitePublicKey(pubkey, keyFile string) (ed25519.PublicKey, error) {
	if pubkey != "" {
		return bundle.ReadPublicKey(pubkey)
	}
	if pub, err := bundle.ReadPublicKey(keyFile + ".pub"); err == nil {
		return pub, nil
	}
	priv, err := bundle.ReadPrivateKey(keyFile)
	if err != nil {
		return nil, fmt.Errorf("the suite's key: %w (pass --pubkey)", err)
	}
	return priv.Public().(ed25519.PublicKey), nil
}

// verifyTrialBundle checks a trial's bundle as proctor verify does (signed
// by pub, every artifact beside it, the verdict agreeing with them), and
// that it is the file the store recorded. It returns the signed verdict,
// or why the bundle failed.
func verifyTrialBundle(path, wantSHA string, keys []ed25519.PublicKey) (*trial.Verdict, string) {
	data, err := readSmallRegular(path)
	if err != nil {
		return nil, err.Error()
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != wantSHA {
		return nil, "the bundle is not the one the store recorded"
	}
	pub, err := trustedSigner(path, data, keys)
	if err != nil {
		return nil, err.Error()
	}
	p, _, err := checkBundle(path, data, pub, true)
	if err != nil {
		return nil, err.Error()
	}
	var v trial.Verdict
	if err := json.Unmarshal(p.Verdict, &v); err != nil { // checked by checkBundle
		return nil, err.Error()
	}
	return &v, ""
}

// trialTests is what a verdict says of each test: the tests its report
// named and its structured results' expected tests; nil without a report.
func trialTests(v *trial.Verdict) *report.TrialTests {
	if v.Tests == nil && v.Results == nil {
		return nil
	}
	return &report.TrialTests{Outcomes: v.TestOutcomes(), Informational: v.Tests != nil && v.Tests.Informational}
}

// OpenNetworkLabel marks, in reports, the trials of an agent that had open
// egress (proctor run --internet on a task that asked for the internet).
const OpenNetworkLabel = " [open-network]"

// regradeSample regrades up to n verified trials spread over the suite and
// reports whether each verdict came out the same.
func regradeSample(c *cobra.Command, dir string, trials []report.Trial, tasks map[string]store.Task, n int, tf *trialFlags, stderr io.Writer) ([]report.Regrade, error) {
	var pool []int
	for i := range trials {
		if trials[i].Verified {
			pool = append(pool, i)
		}
	}
	if len(pool) == 0 {
		return nil, nil
	}
	o, err := tf.baseOptions(io.Discard)
	if err != nil {
		return nil, err
	}
	var out []report.Regrade
	step := max(len(pool)/n, 1)
	for k := 0; k < len(pool) && len(out) < n; k += step {
		t := &trials[pool[k]]
		out = append(out, regradeResult(c, report.Regrade{Agent: t.Agent, Task: t.Task, Index: t.Index},
			filepath.Join(dir, filepath.Dir(t.Bundle)), tasks[t.Task].Dir, o.CacheDir, o.ScratchDir))
	}
	return out, nil
}

// regradeResult is rg with what regrading the trial in trialDir found.
func regradeResult(c *cobra.Command, rg report.Regrade, trialDir, taskDir, cacheDir, scratchDir string) report.Regrade {
	detail, err := regradeOne(c, trialDir, taskDir, cacheDir, scratchDir)
	switch {
	case err != nil:
		rg.Detail = "could not regrade: " + err.Error()
	case detail == "":
		rg.Same = true
	default:
		rg.Detail = detail
	}
	return rg
}

func regradeOne(c *cobra.Command, trialDir, taskDir, cacheDir, scratchDir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(trialDir, trial.VerdictFile))
	if err != nil {
		return "", err
	}
	var was trial.Verdict
	if err := json.Unmarshal(data, &was); err != nil {
		return "", err
	}
	if was.Changeset.Digest == "" {
		return "", fmt.Errorf("no changeset kept (%s)", was.Changeset.Limit)
	}
	t, err := task.Load(taskDir)
	if err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp("", "proctor-report-regrade-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	now, err := trial.Regrade(c.Context(), trial.RegradeOptions{
		Task: t, Archive: filepath.Join(trialDir, trial.ChangesetFile), Digest: was.Changeset.Digest,
		Out: filepath.Join(tmp, "out"), CacheDir: cacheDir, ScratchDir: scratchDir,
		AgentPhase: was.Phases[trial.PhaseAgent],
		Tooling:    bundledTooling(trialDir, &was), ToolingDigest: toolingDigest(&was),
		Recording: trialDir, RecordingDigest: recordingDigest(&was),
	})
	if err != nil {
		return "", err
	}
	return strings.Join(verdictDiffs(&was, now), "; "), nil
}

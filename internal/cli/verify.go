package cli

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/audit"
	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

func oneArg(name, usage string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != 1 {
			return &exitError{code: exitUsage, err: fmt.Errorf("%s: want one argument, got %d", name, len(args)), hint: usage}
		}
		return nil
	}
}

func newVerifyCmd(stdout io.Writer) *cobra.Command {
	var (
		pubkey  string
		require bool
	)
	c := &cobra.Command{
		Use:   "verify BUNDLE [--pubkey KEYFILE.pub] [--require-artifacts]",
		Short: "Check a trial's signed bundle and the artifacts beside it",
		Long: `Check BUNDLE (a bundle.json): its form, its signature, the key (against
--pubkey when given), the hash chain of its timeline, every artifact of its
manifest found beside it, and that the verdict agrees with the provenance
and the changeset. Prints a short summary; exits 1 naming the first field
that failed.`,
		Args: oneArg("verify", "proctor verify BUNDLE [--pubkey KEYFILE.pub]"),
		RunE: func(_ *cobra.Command, args []string) error {
			p, report, err := verifyBundle(args[0], pubkey, require)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, bundle.Summary(p))
			var v trial.Verdict
			if json.Unmarshal(p.Verdict, &v) == nil { // checked by verifyBundle
				if line := auditLine(&v); line != "" {
					fmt.Fprintln(stdout, line)
				}
			}
			fmt.Fprintf(stdout, "artifacts: %d checked", len(report.Checked))
			if len(report.Missing) > 0 {
				fmt.Fprintf(stdout, ", %d not found beside the bundle: %s", len(report.Missing), strings.Join(report.Missing, ", "))
			}
			fmt.Fprintln(stdout)
			if pubkey == "" {
				// Anyone can make a bundle that verifies with its own key.
				fmt.Fprintln(stdout, "key: not checked against a known public key (pass --pubkey)")
				fmt.Fprintln(stdout, "OK (integrity only: the signer is not checked)")
				return nil
			}
			fmt.Fprintln(stdout, "OK")
			return nil
		},
	}
	c.Flags().StringVar(&pubkey, "pubkey", "", "the public key the bundle must be signed with")
	c.Flags().BoolVar(&require, "require-artifacts", false, "fail when an artifact of the manifest is not beside the bundle")
	return c
}

// errMismatch marks a bundle that is well-formed and signed but whose
// verdict disagrees with its own provenance or artifacts.
var errMismatch = errors.New("the verdict disagrees with the bundle")

// verifyBundle verifies the bundle at path and cross-checks the verdict it
// carries. requireArtifacts makes a missing artifact an error.
func verifyBundle(path, pubkey string, requireArtifacts bool) (*bundle.Payload, bundle.ArtifactReport, error) {
	var pub ed25519.PublicKey
	if pubkey != "" {
		var err error
		if pub, err = bundle.ReadPublicKey(pubkey); err != nil {
			return nil, bundle.ArtifactReport{}, err
		}
	}
	// The bundle may come from anyone: a regular file only (not a symlink
	// to /dev/zero, not a fifo), read no further than a bundle can be.
	data, err := readSmallRegular(path)
	if err != nil {
		return nil, bundle.ArtifactReport{}, err
	}
	return checkBundle(path, data, pub, requireArtifacts)
}

// checkBundle is verifyBundle on the bundle's bytes, read from path, and a
// public key (nil: not checked).
func checkBundle(path string, data []byte, pub ed25519.PublicKey, requireArtifacts bool) (*bundle.Payload, bundle.ArtifactReport, error) {
	var report bundle.ArtifactReport
	opts := []bundle.VerifyOption{bundle.WithArtifactDir(filepath.Dir(path)), bundle.WithArtifactReport(&report)}
	if pub != nil {
		opts = append(opts, bundle.WithPublicKey(pub))
	}
	if requireArtifacts {
		opts = append(opts, bundle.WithRequireArtifacts())
	}
	p, err := bundle.Verify(data, opts...)
	if err != nil {
		return nil, report, &exitError{code: exitNotPassed, err: fmt.Errorf("%s: %w", path, err)}
	}
	var v trial.Verdict
	if err := json.Unmarshal(p.Verdict, &v); err != nil {
		return nil, report, &exitError{code: exitNotPassed, err: fmt.Errorf("%s: payload.verdict: %w", path, err)}
	}
	fail := func(field, format string, a ...any) error {
		return &exitError{code: exitNotPassed, err: fmt.Errorf("%s: %s: %w: %s", path, field, errMismatch, fmt.Sprintf(format, a...))}
	}
	if v.Task.Digest != p.Provenance.TaskDigest {
		return nil, report, fail("payload.verdict.task.digest", "%s, provenance says %s", v.Task.Digest, p.Provenance.TaskDigest)
	}
	if v.Environment.Digest != p.Provenance.EnvironmentDigest {
		return nil, report, fail("payload.verdict.environment.digest", "%s, provenance says %s", v.Environment.Digest, p.Provenance.EnvironmentDigest)
	}
	if v.Agent.Command != p.Provenance.Agent.Command || v.Agent.DirDigest != p.Provenance.Agent.DirDigest {
		return nil, report, fail("payload.verdict.agent", "differs from provenance.agent")
	}
	if err := timelineAgrees(p, &v); err != nil {
		return nil, report, fail("payload.timeline", "%v", err)
	}
	// The audit log beside the bundle (checked against the manifest) is
	// the timeline as it was written: event for event the same.
	if slices.Contains(report.Checked, trial.AuditFile) {
		evs, err := audit.ReadFile(filepath.Join(filepath.Dir(path), trial.AuditFile), bundle.MaxSize)
		if err != nil {
			return nil, report, fail(trial.AuditFile, "%v", err)
		}
		if len(evs) != len(p.Timeline) {
			return nil, report, fail(trial.AuditFile, "%d events, the timeline has %d", len(evs), len(p.Timeline))
		}
		for i := range evs {
			if evs[i].Hash != p.Timeline[i].Hash {
				return nil, report, fail(trial.AuditFile, "event %d differs from the timeline's", i)
			}
		}
	}
	if v.Audit.Events != 0 && v.Audit.Events != len(p.Timeline) {
		return nil, report, fail("payload.verdict.audit.events", "%d, the timeline has %d events", v.Audit.Events, len(p.Timeline))
	}
	// verdict.json beside the bundle is what people read: it must say what
	// the signed verdict says.
	if side, err := readSmallRegular(filepath.Join(filepath.Dir(path), trial.VerdictFile)); err == nil {
		canonSide, cerr := bundle.Canonicalize(side)
		canonSigned, _ := bundle.Canonicalize(p.Verdict)
		if cerr != nil || string(canonSide) != string(canonSigned) {
			return nil, report, fail(trial.VerdictFile, "the file beside the bundle differs from the signed verdict")
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, report, err
	}
	for _, a := range p.Manifest {
		if a.Name == trial.ChangesetFile && "sha256:"+a.SHA256 != v.Changeset.Digest {
			return nil, report, fail("payload.verdict.changeset.digest", "%s, the manifest's %s is sha256:%s", v.Changeset.Digest, a.Name, a.SHA256)
		}
	}
	return p, report, nil
}

// timelineAgrees checks that the signed timeline tells the verdict's story:
// one violation event per violation, in order, and a final verdict event
// with the same status, pass and reward.
func timelineAgrees(p *bundle.Payload, v *trial.Verdict) error {
	var violations []trial.Violation
	var last map[string]any
	for _, e := range p.Timeline {
		switch e.Kind {
		case "violation":
			var d trial.Violation
			if err := json.Unmarshal(e.Detail, &d); err != nil {
				return fmt.Errorf("event %d: %w", e.Seq, err)
			}
			violations = append(violations, d)
		case "verdict":
			last = map[string]any{}
			if err := json.Unmarshal(e.Detail, &last); err != nil {
				return fmt.Errorf("event %d: %w", e.Seq, err)
			}
		}
	}
	if len(violations) != len(v.Violations) {
		return fmt.Errorf("%d violation events, the verdict has %d violations", len(violations), len(v.Violations))
	}
	for i := range violations {
		if violations[i] != v.Violations[i] {
			return fmt.Errorf("violation %d: the event says %s %q, the verdict %s %q", i, violations[i].Kind, violations[i].Path, v.Violations[i].Kind, v.Violations[i].Path)
		}
	}
	if last == nil {
		return fmt.Errorf("no verdict event")
	}
	if last["status"] != string(v.Status) || last["passed"] != v.Passed || last["reward"] != v.Reward {
		return fmt.Errorf("the verdict event says status %v, passed %v, reward %v; the verdict %s, %t, %g",
			last["status"], last["passed"], last["reward"], v.Status, v.Passed, v.Reward)
	}
	if n := len(p.Timeline); n == 0 || p.Timeline[n-1].Kind != "verdict" {
		return fmt.Errorf("the timeline does not end with the verdict")
	}
	return nil
}

// readSmallRegular reads a regular file of at most bundle.MaxSize bytes.
func readSmallRegular(path string) ([]byte, error) {
	f, err := trial.OpenRegularFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, bundle.MaxSize+1))
	if err == nil && len(data) > bundle.MaxSize {
		err = fmt.Errorf("%s: larger than %d bytes", path, bundle.MaxSize)
	}
	return data, err
}

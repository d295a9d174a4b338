package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

func newRegradeCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		taskDir, out, pubkey string
		tf                   trialFlags
	)
	c := &cobra.Command{
		Use:   "regrade BUNDLE --task DIR",
		Short: "Grade a trial's changeset again and compare the verdict",
		Long: `Verify BUNDLE, check that the task at --task is the one it names (same
digest), and run the policy and the grading phase again from the bundled
changeset (changeset.tar beside the bundle). Prints whether the new verdict
is identical: passed, reward, status, violations and what reached the
grader.

Exit status: 0 identical; 1 different, or the bundle does not verify; 125
when the regrade could not run.`,
		Args: oneArg("regrade", "proctor regrade BUNDLE --task DIR"),
		RunE: func(c *cobra.Command, args []string) error {
			if taskDir == "" {
				return usageErr("--task: not set")
			}
			p, was, err := verifiedVerdict(args[0], pubkey)
			if err != nil {
				return err
			}
			t, err := sameTask(p, taskDir)
			if err != nil {
				return err
			}
			if was.Changeset.Digest == "" {
				return &exitError{code: exitNotPassed, err: fmt.Errorf("%s: the trial kept no changeset (%s): nothing to regrade", args[0], was.Changeset.Limit)}
			}
			o, err := tf.baseOptions(stderr)
			if err != nil {
				return err
			}
			if out == "" {
				if out, err = os.MkdirTemp("", "proctor-regrade-"); err != nil {
					return err
				}
				defer os.RemoveAll(out)
				out = filepath.Join(out, "out")
			}
			now, err := trial.Regrade(c.Context(), trial.RegradeOptions{
				Task: t, Archive: filepath.Join(filepath.Dir(args[0]), trial.ChangesetFile), Digest: was.Changeset.Digest,
				Out: out, CacheDir: o.CacheDir, ScratchDir: o.ScratchDir, Storage: o.Storage, Progress: o.Progress,
				AgentPhase: was.Phases[trial.PhaseAgent], Smuggled: smuggled(was),
				Tooling: bundledTooling(filepath.Dir(args[0]), was), ToolingDigest: toolingDigest(was),
				Recording: filepath.Dir(args[0]), RecordingDigest: recordingDigest(was),
			})
			if err != nil {
				return err
			}
			diffs := verdictDiffs(was, now)
			if len(diffs) == 0 {
				fmt.Fprintf(stdout, "identical: passed=%t status=%s reward=%g, %d violation(s), %d change(s) graded\n",
					now.Passed, now.Status, now.Reward, len(now.Violations), now.Changeset.Permitted)
				return nil
			}
			for _, d := range diffs {
				fmt.Fprintf(stdout, "differs: %s\n", d)
			}
			return exitStatus(exitNotPassed)
		},
	}
	c.Flags().StringVar(&taskDir, "task", "", "the task directory the bundle names")
	c.Flags().StringVar(&out, "out", "", "keep the regrade's verdict and grader log here")
	c.Flags().StringVar(&pubkey, "pubkey", "", "the public key the bundle must be signed with")
	tf.registerUnsigned(c)
	return c
}

// verifiedVerdict verifies the bundle at path, with every artifact beside
// it, and returns it with its verdict.
func verifiedVerdict(path, pubkey string) (*bundle.Payload, *trial.Verdict, error) {
	p, _, err := verifyBundle(path, pubkey, true)
	if err != nil {
		return nil, nil, err
	}
	var v trial.Verdict
	if err := json.Unmarshal(p.Verdict, &v); err != nil {
		return nil, nil, fmt.Errorf("%s: the verdict: %w", path, err)
	}
	return p, &v, nil
}

// sameTask loads the task at dir, which must have the digest the bundle's
// trial was made with.
func sameTask(p *bundle.Payload, dir string) (*task.Task, error) {
	t, err := loadTask(dir)
	if err != nil {
		return nil, err
	}
	td, err := task.DigestTree(t.Dir, t.DigestOptions(nil))
	if err != nil {
		return nil, err
	}
	if d := td.Digest; d != p.Provenance.TaskDigest {
		return nil, &exitError{code: exitNotPassed, err: fmt.Errorf("%s: task digest %s, but the bundle was made with %s: not the same task", t.Dir, td.Digest, p.Provenance.TaskDigest)}
	}
	return t, nil
}

// verdictDiffs lists what a regrade decided differently.
func verdictDiffs(was, now *trial.Verdict) []string {
	var d []string
	if was.Passed != now.Passed {
		d = append(d, fmt.Sprintf("passed: was %t, now %t", was.Passed, now.Passed))
	}
	if was.Reward != now.Reward {
		d = append(d, fmt.Sprintf("reward: was %g, now %g", was.Reward, now.Reward))
	}
	if was.Status != now.Status {
		d = append(d, fmt.Sprintf("status: was %s, now %s", was.Status, now.Status))
	}
	if !reflect.DeepEqual(was.Violations, now.Violations) {
		d = append(d, fmt.Sprintf("violations: was %d, now %d", len(was.Violations), len(now.Violations)))
	}
	if was.Environment.Digest != now.Environment.Digest {
		d = append(d, fmt.Sprintf("environment: was %s, now %s", was.Environment.Digest, now.Environment.Digest))
	}
	if !reflect.DeepEqual(was.Changeset.LeftOut, now.Changeset.LeftOut) {
		d = append(d, fmt.Sprintf("left out: was %d, now %d", len(was.Changeset.LeftOut), len(now.Changeset.LeftOut)))
	}
	if was.Error != now.Error {
		d = append(d, fmt.Sprintf("error: was %q, now %q", was.Error, now.Error))
	}
	if was.Changeset.Permitted != now.Changeset.Permitted {
		d = append(d, fmt.Sprintf("changes graded: was %d, now %d", was.Changeset.Permitted, now.Changeset.Permitted))
	}
	// Each expected test whose outcome changed ("test T: [passed failed]").
	for _, ch := range trial.Changes([]*trial.Verdict{was, now}) {
		if strings.HasPrefix(ch, "test ") {
			d = append(d, ch)
		}
	}
	return d
}

// smuggled are the violations the trial found in what its agent brought,
// which a regrade carries.
func smuggled(v *trial.Verdict) []trial.Violation {
	var out []trial.Violation
	for _, vi := range v.Violations {
		if vi.Kind == trial.ViolationSmuggledAnswer {
			out = append(out, vi)
		}
	}
	return out
}

// bundledTooling is the trial's tooling profile beside its bundle, or ""
// for a trial made before profiles were recorded.
func bundledTooling(dir string, v *trial.Verdict) string {
	if v.Tooling == nil {
		return ""
	}
	return filepath.Join(dir, trial.ToolingFile)
}

func toolingDigest(v *trial.Verdict) string {
	if v.Tooling == nil {
		return ""
	}
	return v.Tooling.Digest
}

// recordingDigest is the digest of the trial's recording of the
// verifier's fetches, "" for a trial from before hermetic grading.
func recordingDigest(v *trial.Verdict) string {
	if v.Hermetic == nil {
		return ""
	}
	return v.Hermetic.Digest
}

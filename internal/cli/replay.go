package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/gateway"
	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

func newReplayCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		taskDir, agentDir, out, pubkey, config string
		tf                                     trialFlags
	)
	c := &cobra.Command{
		Use:   "replay BUNDLE --task DIR [--agent-dir DIR] --out DIR",
		Short: "Run a recorded trial's agent again, its model answering from the recording",
		Long: `Verify BUNDLE (a trial run with --record; its recording.jsonl and the
other artifacts beside it), check that --task and --agent-dir are the ones
it names (same digests), and run its agent again in a fresh sandbox with
the same model gateways, which answer from the recording: no model server,
no key, no network. Each request must be the recorded one, in order; the
first that is not stops the agent ("the agent diverged at call N", with
the two request digests) and the trial is an error. The new verdict and
bundle go to --out, and say whether the changeset is identical to the
recorded trial's.

Exit status: 0 when the replay made every recorded call and the identical
changeset; 1 when it diverged or changed something else, or the bundle
does not verify; 125 when it could not run; 2 for a wrong command line.`,
		Args: oneArg("replay", "proctor replay BUNDLE --task DIR --out DIR"),
		RunE: func(c *cobra.Command, args []string) error {
			if taskDir == "" {
				return usageErr("--task: not set")
			}
			if out == "" {
				return usageErr("--out: not set")
			}
			p, was, err := verifiedVerdict(args[0], pubkey)
			if err != nil {
				return err
			}
			if was.Recording == nil {
				return &exitError{code: exitNotPassed, err: fmt.Errorf("%s: the trial's model calls were not recorded", args[0]),
					hint: "record a trial with proctor run --record --model-gateway ..."}
			}
			if was.Network.Mode == task.NetworkAllowlist {
				// What went through the egress proxy is not in the
				// recording; a replay has no network at all.
				return &exitError{code: exitNotPassed, err: fmt.Errorf("%s: the recorded trial's agent had an allow-list (%s), whose traffic a recording does not hold: it cannot be replayed without the network", args[0], strings.Join(was.Network.AllowedHosts, ", "))}
			}
			t, err := sameTask(p, taskDir)
			if err != nil {
				return err
			}
			if want := p.Provenance.Agent.DirDigest; want != "" || agentDir != "" {
				if agentDir == "" {
					return usageErr("--agent-dir: not set, but the recorded trial had one (%s)", want)
				}
				got, err := task.Digest(agentDir)
				if err != nil {
					return fmt.Errorf("--agent-dir: %w", err)
				}
				if got != want {
					return &exitError{code: exitNotPassed, err: fmt.Errorf("--agent-dir %s: digest %s, but the recorded trial's was %q: not the same agent", agentDir, got, want)}
				}
			}
			tape, err := readTape(filepath.Join(filepath.Dir(args[0]), trial.RecordingFile), was.Recording.SHA256)
			if err != nil {
				return err
			}
			var specs []string
			if was.Models != nil {
				for _, g := range was.Models.Gateways {
					specs = append(specs, g.Name+"="+g.Upstream)
				}
			}
			o, err := tf.options(stderr)
			if err != nil {
				return err
			}
			if len(specs) > 0 {
				if o.Net.Gateways, err = gateway.ParseSpecs(strings.Join(specs, ",")); err != nil {
					return fmt.Errorf("%s: the recorded gateways: %w", args[0], err)
				}
			}
			o.Net.Replay = tape
			o.ReplayOf = &trial.ReplayRef{Recording: was.Recording.SHA256, Calls: tape.Calls(), RecordedChangeset: was.Changeset.Digest}
			o.Task, o.Agent, o.AgentDir, o.Out = t, p.Provenance.Agent.Command, agentDir, out
			if pl := p.Provenance.Agent.Layer; pl != nil {
				// A real agent CLI, run from its recipe's layer: the same
				// layer, and its requests matched by conversation (its
				// framing differs from run to run).
				l, ignore, err := replayLayer(c.Context(), pl.Recipe, pl.RecipeDigest, pl.Digest, o.CacheDir, configPath(config))
				if err != nil {
					return err
				}
				o.AgentLayer = l
				tape.MatchConversation, tape.IgnoreLines = true, ignore
			}
			// Graded as the recorded trial was: its tooling profile and its
			// recording of the verifier's fetches, from its bundle.
			if was.Tooling != nil {
				o.Frozen = &trial.Frozen{Tooling: bundledTooling(filepath.Dir(args[0]), was), ToolingDigest: toolingDigest(was),
					Recording: filepath.Dir(args[0]), RecordingDigest: recordingDigest(was)}
			}
			v, err := trial.Run(c.Context(), o)
			if v == nil {
				return err
			}
			switch {
			case v.Replay != nil && v.Replay.Diverged != "":
				fmt.Fprintf(stdout, "diverged: %s; verdict in %s\n", v.Replay.Diverged, filepath.Join(out, trial.VerdictFile))
				return exitStatus(exitNotPassed)
			case err != nil:
				return err
			case v.Replay != nil && v.Replay.Identical:
				fmt.Fprintf(stdout, "identical: all %d recorded call(s) replayed, changeset %s as recorded; passed=%t status=%s reward=%g; verdict in %s\n",
					v.Replay.Calls, v.Changeset.Digest, v.Passed, v.Status, v.Reward, filepath.Join(out, trial.VerdictFile))
				return nil
			}
			fmt.Fprintf(stdout, "differs: all %d recorded call(s) replayed, but the changeset is %s, recorded %s; verdict in %s\n",
				v.Replay.Calls, v.Changeset.Digest, was.Changeset.Digest, filepath.Join(out, trial.VerdictFile))
			return exitStatus(exitNotPassed)
		},
	}
	c.Flags().StringVar(&taskDir, "task", "", "the task directory the bundle names")
	c.Flags().StringVar(&agentDir, "agent-dir", "", "the directory mounted at /agent in the recorded trial")
	c.Flags().StringVar(&config, "config", "", "a TOML file whose [agents.NAME] tables hold the recorded trial's recipe, if it is not a shipped one (default $PROCTOR_CONFIG)")
	c.Flags().StringVar(&out, "out", "", "the output directory (created; must be empty)")
	c.Flags().StringVar(&pubkey, "pubkey", "", "the public key the bundle must be signed with")
	tf.register(c)
	return c
}

// readTape reads a recording beside a bundle: the bytes read must be the
// ones the bundle signed (sum), whatever happened to the file since
// verify looked at it.
func readTape(path, sum string) (*gateway.Tape, error) {
	f, err := trial.OpenRegularFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, gateway.MaxRecordingSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sum {
		return nil, &exitError{code: exitNotPassed, err: fmt.Errorf("%s: not the recording the bundle signed (sha256 %x, want %s)", path, h, sum)}
	}
	tape, err := gateway.ReadTape(bytes.NewReader(data), gateway.MaxRecordingSize)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tape, nil
}

// recordFlag is proctor run's --record.
func recordFlag(c *cobra.Command, o *bool) {
	c.Flags().BoolVar(o, "record", false, "keep every model call through the gateways, request and response, in recording.jsonl (for proctor replay)")
}

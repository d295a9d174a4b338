package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/swebench"
)

func newSWEBenchCmd(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "swebench",
		Short: "SWE-bench instances as Proctor tasks",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	var repos, out, imageMap string
	imp := &cobra.Command{
		Use:   "import INSTANCES.jsonl --repos DIR --out TASKS_DIR [--image-map FILE]",
		Short: "Turn SWE-bench instances into tasks",
		Long: `Read SWE-bench instances (one JSON object a line, the dataset's fields) and
write one task each under --out: the workspace is the repository (a local
clone of --repos/OWNER__NAME) at base_commit, which every trial sanitizes
(no later history); the grader applies test_patch, runs the test files it
touches with a JUnit report and the harness's tripwire, and the harness
resolves as SWE-bench does (every FAIL_TO_PASS and PASS_TO_PASS test
passed). The gold patch is the oracle (proctor validate). Test
configuration, start-up hooks and the test_patch files are protected.
--image-map is a JSON object from instance_id (or repo) to a container
image to run in; without one, tasks run on the host's system.

Every instance is checked before any task is written; if one cannot be
imported, none of this run's tasks is kept.`,
		Args: oneArg("swebench import", "proctor swebench import INSTANCES.jsonl --repos DIR --out TASKS_DIR"),
		RunE: func(_ *cobra.Command, args []string) error {
			if repos == "" {
				return usageErr("--repos: not set")
			}
			if out == "" {
				return usageErr("--out: not set")
			}
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			insts, err := swebench.ReadInstances(f, args[0])
			if err != nil {
				return err
			}
			o := swebench.Options{Repos: repos, Out: out}
			if imageMap != "" {
				data, err := os.ReadFile(imageMap)
				if err != nil {
					return err
				}
				if err := json.Unmarshal(data, &o.ImageMap); err != nil {
					return fmt.Errorf("--image-map %s: want a JSON object from instance_id or repo to image: %v", imageMap, err)
				}
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			var made []string
			for _, in := range insts {
				dir, err := swebench.Import(in, o)
				if err != nil {
					for _, d := range made {
						os.RemoveAll(d)
					}
					return err
				}
				made = append(made, dir)
				fmt.Fprintf(stdout, "%s\n", dir)
			}
			return nil
		},
	}
	imp.Flags().StringVar(&repos, "repos", "", "a directory of repository clones, OWNER__NAME")
	imp.Flags().StringVar(&out, "out", "", "where the tasks go, one directory each")
	imp.Flags().StringVar(&imageMap, "image-map", "", "a JSON object from instance_id or repo to a container image")
	c.AddCommand(imp)
	return c
}

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
	var repos, out, imageMap, envMap string
	imp := &cobra.Command{
		Use:   "import INSTANCES.jsonl --repos DIR --out TASKS_DIR [--image-map FILE] [--env-map FILE]",
		Short: "Turn SWE-bench instances into tasks",
		Long: `Read SWE-bench instances (one JSON object a line, the dataset's fields) and
write one task each under --out: the workspace is the repository (a local
clone of --repos/OWNER__NAME) at base_commit, which every trial sanitizes
(no later history); the grader applies test_patch and runs what it
touches, with the harness's tripwire: Python test files under pytest with a
JUnit report, or the packages of Go _test.go files under go test -json.
The harness resolves as SWE-bench does (every FAIL_TO_PASS and
PASS_TO_PASS test passed). The gold patch is the oracle (proctor
validate). Test configuration, start-up hooks and the test_patch files are
protected. --image-map is a JSON object from instance_id (or repo) to a
container image to run in; without one, tasks run on the host's system.
--env-map is a JSON object from instance_id (or repo) to an object of
environment variables every phase gets (e.g. {"pallets/jinja":
{"PYTHONPATH": "src"}}).

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
			if err := readJSONMap("--image-map", imageMap, "a JSON object from instance_id or repo to image", &o.ImageMap); err != nil {
				return err
			}
			if err := readJSONMap("--env-map", envMap, "a JSON object from instance_id or repo to an object of variables", &o.EnvMap); err != nil {
				return err
			}
			if envMap != "" {
				for k, env := range o.EnvMap {
					if err := swebench.CheckEnv(env); err != nil {
						return fmt.Errorf("--env-map %s: %q: %w", envMap, k, err)
					}
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
	imp.Flags().StringVar(&envMap, "env-map", "", "a JSON object from instance_id or repo to environment variables")
	c.AddCommand(imp)
	return c
}

// readJSONMap decodes the JSON file a flag names into v; an unset flag
// leaves v alone.
func readJSONMap(flag, file, want string, v any) error {
	if file == "" {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s %s: want %s: %v", flag, file, want, err)
	}
	return nil
}

package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/dataset"
)

func newDatasetCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		cache, registry, config string
		quiet, verify           bool
	)
	options := func() (dataset.Options, error) {
		dir, err := cacheDir(cache)
		if err != nil {
			return dataset.Options{}, err
		}
		o := dataset.Options{CacheDir: dir}
		if !quiet {
			o.Progress = stderr
		}
		return o, nil
	}
	c := &cobra.Command{
		Use:   "dataset",
		Short: "Datasets of tasks by name, from Harbor's registry: pull, list",
		Long: `Datasets by name, as Harbor names them (terminal-bench@2.0). proctor
dataset pull reads the registry (Harbor's registry.json format), fetches
each task's git repository at the commit it names with git, and keeps the
tasks read-only in the cache directory, pinned by commit and digest.
proctor bench --dataset NAME@VERSION runs them, offline once pulled; a
cached task whose digest changed is refused as tampered with.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	pull := &cobra.Command{
		Use:   "pull NAME@VERSION [--registry URL|FILE]",
		Short: "Fetch a dataset's tasks into the cache",
		Args:  oneArg("dataset pull", "proctor dataset pull NAME@VERSION [--registry URL|FILE]"),
		RunE: func(c *cobra.Command, args []string) error {
			ref, err := dataset.ParseRef(args[0])
			if err != nil {
				return usageErr("%v", err)
			}
			loc, err := registryLocation(registry, config)
			if err != nil {
				return err
			}
			o, err := options()
			if err != nil {
				return err
			}
			// A dataset already cached needs no registry and no network.
			if l, err := dataset.Open(o, ref); err == nil && registry == "" {
				if err := l.Verify(); err != nil {
					return err
				}
				fmt.Fprintf(stdout, "%s: %d task(s) cached in %s\n", ref, len(l.Tasks), l.Dir)
				return nil
			}
			reg, err := dataset.LoadRegistry(c.Context(), loc, nil)
			if err != nil {
				return err
			}
			l, err := dataset.Pull(c.Context(), o, reg, ref)
			if errors.Is(err, dataset.ErrUnknownVersion) || errors.Is(err, dataset.ErrUnknownDataset) {
				return &exitError{code: exitSetup, err: err, hint: "the registry is " + loc + " (--registry, or registry in the --config file)"}
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s: %d task(s) cached in %s\n", ref, len(l.Tasks), l.Dir)
			return nil
		},
	}
	pull.Flags().StringVar(&registry, "registry", "", "the registry, a URL or a file in Harbor's registry.json format (default: registry in the --config file, else Harbor's, "+dataset.DefaultRegistry+")")
	pull.Flags().StringVar(&config, "config", "", "a TOML file whose registry = \"URL|FILE\" names the registry (default $PROCTOR_CONFIG)")
	ls := &cobra.Command{
		Use:   "ls [--verify]",
		Short: "List the cached datasets",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			o, err := options()
			if err != nil {
				return err
			}
			locks, err := dataset.List(o)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "DATASET\tTASKS\tCOMMITS\tPULLED\tREGISTRY")
			for _, l := range locks {
				commits := map[string]bool{}
				for _, t := range l.Tasks {
					commits[t.Commit] = true
				}
				fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", l.Ref(), len(l.Tasks), len(commits), l.Pulled.Format("2006-01-02T15:04:05Z"), l.Registry)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if verify {
				for _, l := range locks {
					if err := l.Verify(); err != nil {
						return err
					}
				}
				fmt.Fprintf(stdout, "verified: every task of %d dataset(s) has the digest it was pulled with\n", len(locks))
			}
			return nil
		},
	}
	ls.Flags().BoolVar(&verify, "verify", false, "check every cached task's digest")
	for _, sub := range []*cobra.Command{pull, ls} {
		sub.Flags().StringVar(&cache, "cache-dir", "", "where datasets are kept, under datasets/ (default $PROCTOR_CACHE_DIR, else the user cache dir)")
		sub.Flags().BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	}
	c.AddCommand(pull, ls)
	return c
}

// registryLocation is --registry, else the config file's registry, else
// Harbor's.
func registryLocation(flag, config string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if config == "" {
		config = os.Getenv("PROCTOR_CONFIG")
	}
	if config != "" {
		cfg, err := readRunConfig(config)
		if err != nil {
			return "", err
		}
		if cfg.Registry != "" {
			return cfg.Registry, nil
		}
	}
	return dataset.DefaultRegistry, nil
}

// datasetTaskDirs resolves bench's --dataset names to their cached task
// directories, each verified against its lock; no network.
func datasetTaskDirs(cache string, refs []string) ([]string, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	dir, err := cacheDir(cache)
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, s := range refs {
		ref, err := dataset.ParseRef(s)
		if err != nil {
			return nil, usageErr("--dataset: %v", err)
		}
		d, err := dataset.TaskDirs(dataset.Options{CacheDir: dir}, ref)
		if errors.Is(err, dataset.ErrNotCached) {
			return nil, &exitError{code: exitSetup, err: fmt.Errorf("--dataset: %w", err), hint: "proctor dataset pull " + ref.String()}
		}
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, d...)
	}
	return dirs, nil
}

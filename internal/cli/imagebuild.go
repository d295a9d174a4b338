package cli

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/image"
	"github.com/proctor-sandbox/proctor/internal/imagebuild"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

// newImageBuildCmd is `proctor image build`.
func newImageBuildCmd(stdout, stderr io.Writer) *cobra.Command {
	var (
		tf         trialFlags
		file       string
		tags       []string
		buildArgs  []string
		allowHosts []string
		config     string
		target     string
		logFile    string
		timeout    time.Duration
		pull       bool
		noCache    bool
	)
	c := &cobra.Command{
		Use:   "build CONTEXT",
		Short: "Build an image from a Dockerfile, without a daemon",
		Long: `Build the Dockerfile in CONTEXT (a task's environment/ directory) into the
image store. RUN steps run in Proctor's own sandbox, over the image's layers;
they have no network unless the build is given an allow-list (--allow-host,
or [build] allow_hosts in the config file), and then only through the
egress proxy, every decision written to the build log. Each step is cached
by its content: a second build of an unchanged context runs nothing.`,
		Args: oneArg("image build", "proctor image build CONTEXT [-t NAME] [--build-arg K=V] [--allow-host HOST]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := tf.baseOptions(io.Discard)
			if err != nil {
				return err
			}
			st, err := image.Open(filepath.Join(o.CacheDir, trial.ImageStoreDir))
			if err != nil {
				return err
			}
			hosts, err := buildHosts(config, allowHosts)
			if err != nil {
				return err
			}
			bargs := map[string]string{}
			for _, a := range buildArgs {
				k, v, ok := strings.Cut(a, "=")
				if !ok || k == "" {
					return usageErr("--build-arg %q: want KEY=VALUE", a)
				}
				bargs[k] = v
			}
			df := file
			if df == "" {
				df = filepath.Join(args[0], "Dockerfile")
			}
			bo := imagebuild.Options{
				Context: args[0], Dockerfile: df, Name: df, Tags: tags, Args: bargs, Target: target,
				AllowHosts: hosts, Pull: pull, NoCache: noCache, Timeout: timeout,
				Store: st, CacheDir: filepath.Join(o.CacheDir, trial.BuildCacheDir), LogFile: logFile,
			}
			if !tf.quiet {
				bo.Progress = stderr
			}
			res, err := imagebuild.Build(cmd.Context(), bo)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s %v\n", res.Image.Digest, res.Image.Refs)
			if !tf.quiet {
				fmt.Fprintf(stderr, "built in %d steps (%d cached, %d RUN run); context %s; log %s\n",
					res.Steps, res.Cached, res.Ran, res.ContextDigest, res.Log)
			}
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVarP(&file, "file", "f", "", "the Dockerfile (default CONTEXT/Dockerfile)")
	fl.StringArrayVarP(&tags, "tag", "t", nil, "a name for the image (repeatable)")
	fl.StringArrayVar(&buildArgs, "build-arg", nil, "KEY=VALUE: a build argument (repeatable)")
	fl.StringArrayVar(&allowHosts, "allow-host", nil, "let RUN steps and ADD URLs reach HOST[:PORT] through the build's egress proxy (repeatable; default none: no network)")
	fl.StringVar(&config, "config", "", "a TOML file whose [build] allow_hosts = [...] adds to --allow-host (default $PROCTOR_CONFIG)")
	fl.StringVar(&target, "target", "", "the stage to build (default the last)")
	fl.StringVar(&logFile, "log", "", "write the build log here (default under the cache dir's build/logs)")
	fl.DurationVar(&timeout, "timeout", 0, "stop the build after this long (default none)")
	fl.BoolVar(&pull, "pull", false, "pull FROM images named by tag even when the store has them")
	fl.BoolVar(&noCache, "no-cache", false, "run every step again")
	fl.StringVar(&tf.cacheDir, "cache-dir", "", "where images and build steps are kept (default $PROCTOR_CACHE_DIR, else the user cache dir)")
	fl.BoolVarP(&tf.quiet, "quiet", "q", false, "no progress lines on stderr")
	return c
}

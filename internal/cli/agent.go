package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/agentlayer"
	"github.com/proctor-sandbox/proctor/internal/gateway"
	"github.com/proctor-sandbox/proctor/internal/recipe"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

// catalog is the shipped recipes with the config file's [agents] tables.
func catalog(config string) (*recipe.Catalog, error) {
	c, err := recipe.Builtin()
	if err != nil {
		return nil, err
	}
	p := configPath(config)
	if p == "" {
		return c, nil
	}
	cfg, err := readRunConfig(p)
	if err != nil {
		return nil, err
	}
	if len(cfg.Agents) == 0 {
		return c, nil
	}
	return c.With(cfg.Agents, p)
}

// recipeAgent is an agent run by recipe: the command, its layer and the
// gateway its provider needs.
type recipeAgent struct {
	recipe   *recipe.Recipe
	provider recipe.Provider
	model    string // as the provider knows it
	command  string
	layer    *trial.AgentLayer
}

// lookupRecipe returns the recipe --agent names, or nil when it names none
// (it is then a shell command). --model is for recipes only.
func lookupRecipe(cat *recipe.Catalog, agent, model string) (*recipe.Recipe, error) {
	r, err := cat.Lookup(agent)
	if errors.Is(err, recipe.ErrUnknown) {
		if model != "" {
			return nil, usageErr("--model: for an agent run by recipe, and %v", err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := r.Usable(); err != nil {
		return nil, &exitError{code: exitSetup, err: fmt.Errorf("--agent %w", err)}
	}
	if model == "" {
		return nil, usageErr("--model: not set: --agent %s runs by recipe and needs PROVIDER/MODEL (it takes %s)", agent, strings.Join(r.Providers, ", "))
	}
	return r, nil
}

// resolveRecipe checks the model against the recipe, installs its layer
// when the cache has none, and returns the agent to run.
func resolveRecipe(ctx context.Context, r *recipe.Recipe, model, cache string, progress io.Writer) (*recipeAgent, error) {
	p, bare, err := r.Provider(model)
	if err != nil {
		return nil, usageErr("--model %v", err)
	}
	lo := agentlayer.Options{CacheDir: cache}
	if progress != nil {
		lo.Installing = func() {
			fmt.Fprintf(progress, "proctor: installing agent %s (%s@%s) into %s\n", r.Name, r.Package.NPM, r.Package.Version, agentlayer.Dir(cache, r))
		}
	}
	l, err := agentlayer.Ensure(ctx, r, lo)
	if err != nil {
		return nil, &exitError{code: exitSetup, err: fmt.Errorf("--agent %s: %w", r.Name, err)}
	}
	return &recipeAgent{recipe: r, provider: p, model: bare, command: r.Command(p, bare, trial.InstructionPath), layer: trialLayer(l)}, nil
}

// trialLayer is an installed layer as a trial mounts it.
func trialLayer(l *agentlayer.Layer) *trial.AgentLayer {
	pkgs := make([]string, len(l.Packages))
	for i, p := range l.Packages {
		pkgs[i] = p.Name + "@" + p.Version + " " + p.Integrity
	}
	return &trial.AgentLayer{Dir: l.Dir, Recipe: l.Recipe, RecipeDigest: l.RecipeDigest, Digest: l.Digest, Packages: pkgs, Logs: l.Logs,
		Version: l.Package + "@" + l.Version}
}

// apply sets the trial's agent, and adds the gateway of the agent's
// provider at its default upstream unless one of that name is set.
func (a *recipeAgent) apply(o *trial.Options) error {
	o.Agent, o.AgentLayer = a.command, a.layer
	for _, g := range o.Net.Gateways {
		if g.Name == a.provider.Name {
			return nil
		}
	}
	specs, err := gateway.ParseSpecs(a.provider.Name + "=" + a.provider.Upstream)
	if err != nil {
		return err
	}
	o.Net.Gateways = append(o.Net.Gateways, specs...)
	return nil
}

func newAgentCmd(stdout, stderr io.Writer) *cobra.Command {
	var cache, config string
	catalogAndCache := func() (*recipe.Catalog, string, error) {
		cat, err := catalog(config)
		if err != nil {
			return nil, "", err
		}
		dir, err := cacheDir(cache)
		return cat, dir, err
	}
	c := &cobra.Command{
		Use:   "agent",
		Short: "Agent recipes: list them, install their agents ahead of time",
		Long: `Real agent CLIs by name. A recipe (shipped, or an [agents.NAME] table of
the config file) names an npm package at a pinned version, how to run it
headless, and the providers it can be pointed at through a model gateway.
proctor run --agent NAME --model PROVIDER/MODEL runs it; its layer is
installed on first use, or ahead of time with proctor agent install.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the recipes known, their pinned versions, and which are installed",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			cat, dir, err := catalogAndCache()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tPACKAGE\tPROVIDERS\tINSTALLED\tSOURCE")
			for _, name := range cat.Names() {
				r, _ := cat.Lookup(name)
				state := "no"
				if l, err := agentlayer.Lookup(dir, r); err != nil {
					state = "broken: " + err.Error()
				} else if l != nil {
					state = "yes " + l.Digest[:19]
				}
				if err := r.Usable(); err != nil {
					state = "refused: " + strings.TrimPrefix(err.Error(), r.Name+": ")
				}
				fmt.Fprintf(tw, "%s\t%s@%s\t%s\t%s\t%s\n", r.Name, r.Package.NPM, r.Package.Version, strings.Join(r.Providers, ","), state, r.Source)
			}
			return tw.Flush()
		},
	}
	install := &cobra.Command{
		Use:   "install NAME...",
		Short: "Install agents' layers now (otherwise on first use)",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageErr("agent install: name at least one recipe (proctor agent ls lists them)")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			cat, dir, err := catalogAndCache()
			if err != nil {
				return err
			}
			for _, name := range args {
				r, err := cat.Lookup(name)
				if err != nil {
					return usageErr("%v", err)
				}
				if err := r.Usable(); err != nil {
					return &exitError{code: exitSetup, err: err}
				}
				l, err := agentlayer.Ensure(c.Context(), r, agentlayer.Options{CacheDir: dir, Log: prefixed(stderr, "proctor: "+name+": ")})
				if err != nil {
					return &exitError{code: exitSetup, err: fmt.Errorf("%s: %w", name, err)}
				}
				fmt.Fprintf(stdout, "%s: %s@%s installed, %d package(s), %s in %s\n", name, r.Package.NPM, r.Package.Version, len(l.Packages), l.Digest, l.Dir)
			}
			return nil
		},
	}
	for _, s := range []*cobra.Command{ls, install} {
		s.Flags().StringVar(&cache, "cache-dir", "", "where agent layers are kept (default $PROCTOR_CACHE_DIR, else the user cache dir)")
		s.Flags().StringVar(&config, "config", "", "a TOML file whose [agents.NAME] tables add or replace recipes (default $PROCTOR_CONFIG)")
	}
	c.AddCommand(ls, install)
	return c
}

// prefixed writes each line to w with a prefix.
func prefixed(w io.Writer, prefix string) io.Writer {
	return &linePrefixer{w: w, prefix: prefix, start: true}
}

type linePrefixer struct {
	w      io.Writer
	prefix string
	start  bool
}

func (p *linePrefixer) Write(b []byte) (int, error) {
	var out []byte
	for _, c := range b {
		if p.start {
			out = append(out, p.prefix...)
			p.start = false
		}
		out = append(out, c)
		if c == '\n' {
			p.start = true
		}
	}
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// replayLayer finds the layer a recorded trial ran its agent from: in the
// cache by its recipe's digest, else installed from the recipe of that
// name when its digest is the recorded one. The installed tree must be
// the recorded one.
func replayLayer(ctx context.Context, name, recipeDigest, digest, cache, config string) (*trial.AgentLayer, []*regexp.Regexp, error) {
	l, err := agentlayer.LookupDigest(cache, recipeDigest, digest)
	if errors.Is(err, os.ErrNotExist) {
		cat, cerr := catalog(config)
		if cerr != nil {
			return nil, nil, cerr
		}
		r, lerr := cat.Lookup(name)
		if lerr != nil || r.Digest() != recipeDigest {
			return nil, nil, &exitError{code: exitSetup, err: fmt.Errorf("the recorded trial ran agent %s from recipe %s, which is neither installed nor known here", name, recipeDigest),
				hint: "install the same recipe (proctor agent install, or an [agents] table of --config) and replay again"}
		}
		if _, err := agentlayer.Ensure(ctx, r, agentlayer.Options{CacheDir: cache}); err != nil {
			return nil, nil, &exitError{code: exitSetup, err: fmt.Errorf("installing agent %s: %w", name, err)}
		}
		l, err = agentlayer.LookupDigest(cache, recipeDigest, digest)
	}
	if err != nil {
		return nil, nil, &exitError{code: exitNotPassed, err: fmt.Errorf("the recorded trial's agent layer: %w", err)}
	}
	var ignore []*regexp.Regexp
	for _, p := range l.ReplayIgnore {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: replay_ignore: %w", l.Dir, err)
		}
		ignore = append(ignore, re)
	}
	return trialLayer(l), ignore, nil
}

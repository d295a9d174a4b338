package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/gateway"
	"github.com/proctor-sandbox/proctor/internal/netpolicy"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

// netFlags are the network a run adds: hosts, model gateways, the config
// file that may hold both, and whether the audit watches.
type netFlags struct {
	allowHosts []string
	gateways   []string
	config     string
	noAudit    bool
	internet   bool
	hostMap    []string
	verifier   []string // the grader's allow-list while the verifier's fetches are recorded
	caFiles    []string
	// buildAllowHosts is the allow-list of a task's environment build
	// (its RUN steps and ADD URLs), not the agent's.
	buildAllowHosts []string
}

func (f *netFlags) register(c *cobra.Command) {
	c.Flags().StringArrayVar(&f.allowHosts, "allow-host", nil, "let the agent reach HOST[:PORT] through the egress proxy (repeatable; *.example.com matches names below example.com; a loopback address or localhost is also served at that address inside)")
	c.Flags().StringArrayVar(&f.gateways, "model-gateway", nil, "NAME=URL[,NAME=URL…]: serve a model gateway inside; the real key comes from the host's NAME_API_KEY, the agent gets NAME_BASE_URL and a dummy NAME_API_KEY (repeatable)")
	c.Flags().StringArrayVar(&f.buildAllowHosts, "build-allow-host", nil, "let the RUN steps and ADD URLs of a task's environment/Dockerfile reach HOST[:PORT] through the build's egress proxy (repeatable; default none: no network)")
	c.Flags().StringVar(&f.config, "config", "", "a TOML file with allow_hosts = [...], internet = true|false, host_map, verifier_allow_hosts, ca_files, a [model_gateway] table and a [build] table with allow_hosts (default $PROCTOR_CONFIG)")
	c.Flags().StringArrayVar(&f.hostMap, "host-map", nil, "NAME=ADDR[:PORT]: the proxy dials ADDR for NAME, still deciding and recording on NAME, as curl --resolve does (a mirror, a server of the operator's; repeatable)")
	c.Flags().StringArrayVar(&f.verifier, "verifier-allow-host", nil, "let the task's verifier fetch its tools from HOST[:PORT] while they are recorded on the pristine environment, once per task (repeatable; trials' graders get only the recording, replayed)")
	c.Flags().StringArrayVar(&f.caFiles, "ca-file", nil, "PEM certificates the verifier's recorder trusts upstream besides the system's (a mirror's, a test's; repeatable)")
	c.Flags().BoolVar(&f.internet, "internet", false, "grant open egress through the proxy to tasks that ask for the internet (allow_internet = true), as Harbor does: every connection decided and recorded, private and metadata addresses refused, the trial marked open-network (without it such a task's agent gets the allow-list and its gateways only)")
	c.Flags().BoolVar(&f.noAudit, "no-audit", false, "do not record the agent's attempts on hidden paths and its connects (recorded as off in the verdict; hiding and the network cut stay)")
}

// runConfig is the config file: the same as the flags, for runs that share
// them.
type runConfig struct {
	AllowHosts   []string          `toml:"allow_hosts"`
	ModelGateway map[string]string `toml:"model_gateway"`
	Internet     bool              `toml:"internet"`
	HostMap      []string          `toml:"host_map"`
	Verifier     []string          `toml:"verifier_allow_hosts"`
	CAFiles      []string          `toml:"ca_files"`
	Registry     string            `toml:"registry"` // proctor dataset pull's registry, a URL or a file
	Build        buildConfig       `toml:"build"`
	// Agents are the user's agent recipes, by name (internal/recipe).
	Agents map[string]any `toml:"agents"`
}

// buildConfig is the config file's [build] table: the network of image
// builds (proctor image build, and the builds of tasks' environments).
type buildConfig struct {
	AllowHosts []string `toml:"allow_hosts"`
}

// configPath is the --config file, else $PROCTOR_CONFIG, else "".
func configPath(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv("PROCTOR_CONFIG")
}

// buildHosts returns the build allow-list of the config file's [build]
// table and the flags together.
func buildHosts(config string, flags []string) ([]string, error) {
	var hosts []string
	if p := configPath(config); p != "" {
		cfg, err := readRunConfig(p)
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, cfg.Build.AllowHosts...)
	}
	return append(hosts, flags...), nil
}

// resolved returns the hosts and gateway specs of the config file and the
// flags together, the gateways checked, and whether open egress is granted
// (by either).
func (f *netFlags) resolved() (hosts, gateways []string, internet bool, hostMap []string, err error) {
	hosts, gateways, internet, hostMap, _, _, err = f.resolvedAll()
	return hosts, gateways, internet, hostMap, err
}

// resolvedAll is resolved, with the verifier's allow-list and the
// recorder's upstream roots.
func (f *netFlags) resolvedAll() (hosts, gateways []string, internet bool, hostMap, verifier, caFiles []string, err error) {
	if path := configPath(f.config); path != "" {
		cfg, err := readRunConfig(path)
		if err != nil {
			return nil, nil, false, nil, nil, nil, err
		}
		internet, hostMap, verifier, caFiles = cfg.Internet, cfg.HostMap, cfg.Verifier, cfg.CAFiles
		hosts = append(hosts, cfg.AllowHosts...)
		names := make([]string, 0, len(cfg.ModelGateway))
		for k := range cfg.ModelGateway {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			gateways = append(gateways, k+"="+cfg.ModelGateway[k])
		}
	}
	hosts = append(hosts, f.allowHosts...)
	gateways = append(gateways, f.gateways...)
	if len(gateways) > 0 {
		if _, err := gateway.ParseSpecs(strings.Join(gateways, ",")); err != nil {
			return nil, nil, false, nil, nil, nil, usageErr("--model-gateway: %v", err)
		}
	}
	hostMap = append(hostMap, f.hostMap...)
	if _, err := netpolicy.ParseHostMap(hostMap); err != nil {
		return nil, nil, false, nil, nil, nil, usageErr("--host-map: %v", err)
	}
	verifier = append(verifier, f.verifier...)
	if _, err := netpolicy.ParseAllowList(verifier); err != nil {
		return nil, nil, false, nil, nil, nil, usageErr("--verifier-allow-host: %v", err)
	}
	caFiles = append(caFiles, f.caFiles...)
	for i, c := range caFiles {
		if caFiles[i], err = filepath.Abs(c); err != nil {
			return nil, nil, false, nil, nil, nil, err
		}
	}
	return hosts, gateways, internet || f.internet, hostMap, verifier, caFiles, nil
}

// apply fills o.Net and o.NoAudit from the flags and the config file.
func (f *netFlags) apply(o *trial.Options) error {
	hosts, gw, internet, hostMap, verifier, caFiles, err := f.resolvedAll()
	if err != nil {
		return err
	}
	o.Net.AllowHosts = append(o.Net.AllowHosts, hosts...)
	o.Net.Internet, o.Net.HostMap, o.Net.VerifierHosts, o.Net.CAFiles = internet, hostMap, verifier, caFiles
	if len(gw) > 0 {
		specs, err := gateway.ParseSpecs(strings.Join(gw, ","))
		if err != nil {
			return usageErr("--model-gateway: %v", err)
		}
		o.Net.Gateways = specs
	}
	o.Net.Getenv = os.Getenv
	o.NoAudit = f.noAudit
	if o.Build.AllowHosts, err = buildHosts(f.config, f.buildAllowHosts); err != nil {
		return err
	}
	return nil
}

// readRunConfig reads the config file strictly: an unknown key is an error.
func readRunConfig(path string) (*runConfig, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--config: %w", err)
	}
	var cfg runConfig
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		var sm *toml.StrictMissingError
		if errors.As(err, &sm) && len(sm.Errors) > 0 {
			return nil, fmt.Errorf("%s: unknown key %s (want allow_hosts, internet, host_map, verifier_allow_hosts, ca_files, registry, [model_gateway], [build] allow_hosts or [agents.NAME])", path, strings.Join(sm.Errors[0].Key(), "."))
		}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%s:%d:%d: %v", path, row, col, de)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &cfg, nil
}

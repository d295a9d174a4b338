package trial

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"

	"github.com/proctor-sandbox/proctor/internal/gateway"
	"github.com/proctor-sandbox/proctor/internal/hermetic"
	"github.com/proctor-sandbox/proctor/internal/netpolicy"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/seccomp"
	"github.com/proctor-sandbox/proctor/internal/task"
)

// Addresses on the agent sandbox's own loopback. They are fixed, so that the
// agent's environment is the same in every trial.
const (
	ProxyAddr       = "127.0.0.1:3128"
	gatewayBasePort = 4100
)

// NetOptions are the network a run adds to the task's: hosts for the
// allow-list, model gateways, and (for tests) how the proxy resolves names
// and how the gateways reach their upstreams.
type NetOptions struct {
	AllowHosts []string       // netpolicy rules added to the task's allowed_hosts
	Gateways   []gateway.Spec // model gateways
	// Internet grants open egress through the proxy to a task that asks
	// for the internet (allow_internet = true): every connection still
	// decided and recorded, the metadata, private and host addresses
	// still refused, and the trial marked open-network. Without it such a
	// task's agent gets the allow-list (AllowHosts) and its gateways.
	Internet bool
	// HostMap sends names to the operator's addresses (NAME=ADDR[:PORT],
	// as curl --resolve): decided on the name, dialled at the address.
	HostMap []string
	// VerifierHosts are the grader's allow-list while the pristine
	// verifier's fetches are recorded (hermetic.go), with the task's
	// [proctor] verifier_hosts; Internet opens that run too. CAFiles are
	// PEM roots the recorder trusts upstream besides the system's.
	VerifierHosts []string
	CAFiles       []string
	// Getenv reads the host's real API keys (NAME_API_KEY); nil: none.
	Getenv func(string) string
	// Resolve and Dial replace the proxy's DNS and dialling (tests).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// GatewayTransport replaces the gateways' HTTP transport (tests).
	GatewayTransport http.RoundTripper
	// Record keeps every model call of the agent phase, request and
	// response, in OUT/recording.jsonl (an artifact of the bundle).
	Record bool
	// Replay answers the gateways' calls from a recording instead of the
	// providers (no key, no network); the first call that differs from the
	// recording stops the agent, and the trial is an error that says where.
	Replay *gateway.Tape
}

// NetworkRef is the agent's network in the verdict: the mode, the
// allow-list in force, and what the proxy decided.
type NetworkRef struct {
	Mode string `json:"mode"` // task.NetworkNone, task.NetworkAllowlist or NetworkOpen
	// Requested is what the task asked for its agent: task.NetworkNone,
	// task.NetworkAllowlist, or task.NetworkPublic (allow_internet =
	// true); Mode is what the operator granted.
	Requested    string   `json:"requested"`
	AllowedHosts []string `json:"allowed_hosts"`
	Allowed      int      `json:"allowed"` // proxy requests let through
	Denied       int      `json:"denied"`
	BytesUp      int64    `json:"bytes_up"`
	BytesDown    int64    `json:"bytes_down"`
}

// ModelsRef is what the agent asked of its models through the gateways.
type ModelsRef struct {
	Gateways []GatewayRef `json:"gateways"`
	Calls    int          `json:"calls"`
	Usage    []ModelUsage `json:"usage"`
}

// GatewayRef names one gateway: the env prefix and where it forwards.
type GatewayRef struct {
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
}

// ModelUsage totals the calls to one model through one gateway.
type ModelUsage struct {
	Gateway      string `json:"gateway"`
	Model        string `json:"model"`
	Calls        int    `json:"calls"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
}

// agentNet is the network of one agent phase: what listens inside, what
// serves it on the host, and the environment that points there.
type agentNet struct {
	listen []string
	serve  []func(net.Listener) error
	close  []func() error
	env    []string

	proxy    *netpolicy.Proxy
	gateways []*gateway.Gateway
	tape     *gateway.Tape // recording the gateways' calls (to keep with --record, else for the trajectory), or nil

	mu  sync.Mutex // guards net
	net NetworkRef
	wg  sync.WaitGroup
}

// checkNet validates the run's network options before anything runs:
// rules parse, none names an address where Proctor listens inside the
// sandbox, gateways have their keys on the host.
func checkNet(o *Options) (keys map[string]string, err error) {
	n := &o.Net
	for _, h := range n.AllowHosts {
		if _, err := netpolicy.ParseRule(h); err != nil {
			return nil, fmt.Errorf("--allow-host %s: %w", h, err)
		}
	}
	if _, err := netpolicy.ParseHostMap(n.HostMap); err != nil {
		return nil, fmt.Errorf("--host-map: %w", err)
	}
	if _, err := netpolicy.ParseAllowList(n.VerifierHosts); err != nil {
		return nil, fmt.Errorf("--verifier-allow-host: %w", err)
	}
	if _, err := hermetic.ReadRoots(n.CAFiles...); err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	if err := checkLoopback(o); err != nil {
		return nil, err
	}
	keys = map[string]string{}
	switch {
	case n.Record && n.Replay != nil:
		return nil, fmt.Errorf("--record: a replay is not recorded again")
	case (n.Record || n.Replay != nil) && len(n.Gateways) == 0:
		return nil, fmt.Errorf("--record: no --model-gateway to record or replay")
	case n.Replay != nil:
		return keys, nil // answered from the recording: no key needed
	}
	for _, g := range n.Gateways {
		getenv := n.Getenv
		if getenv == nil {
			getenv = func(string) string { return "" }
		}
		k, err := gateway.KeyFromEnv(g, getenv)
		if err != nil {
			return nil, fmt.Errorf("--model-gateway %s: %w", g.Name, err)
		}
		keys[g.Name] = k
	}
	return keys, nil
}

// checkLoopback refuses an allow-list rule, the task's or the run's, that
// would have a loopback forwarder (netpolicy.AllowList.Loopback) where
// Proctor's own listeners are inside the sandbox: the proxy, a gateway.
// Their addresses are fixed, so that the agent's environment is the same
// in every trial; the rule is refused, naming where it came from.
func checkLoopback(o *Options) error {
	own := map[netip.AddrPort]string{netip.MustParseAddrPort(ProxyAddr): "the egress proxy"}
	for i, g := range o.Net.Gateways {
		own[gatewayAddr(i)] = "the " + g.Name + " model gateway"
	}
	type source struct{ host, where string }
	var rules []source
	if mode, hosts := o.Task.AgentNetwork(); mode == task.NetworkAllowlist {
		table := "[environment]"
		if o.Task.Agent.NetworkMode != "" {
			table = "[agent]"
		}
		for i, h := range hosts {
			rules = append(rules, source{h, fmt.Sprintf("%s: %s.allowed_hosts[%d] %q", filepath.Join(o.Task.Dir, "task.toml"), table, i, h)})
		}
	}
	for _, h := range o.Net.AllowHosts {
		rules = append(rules, source{h, "--allow-host " + h})
	}
	for _, s := range rules {
		r, err := netpolicy.ParseRule(s.host)
		if err != nil {
			continue // the task's were checked when it was loaded, the run's by checkNet
		}
		for _, a := range (netpolicy.AllowList{r}).Loopback() {
			if who, ok := own[a]; ok {
				return fmt.Errorf("%s: %s listens at %s inside the sandbox", s.where, who, a)
			}
		}
	}
	return nil
}

func gatewayAddr(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(gatewayBasePort+i))
}

// NetworkOpen is the agent's network mode when the operator granted open
// egress (NetOptions.Internet) to a task that asked for the internet.
const NetworkOpen = "open"

// agentNetwork returns the network of the agent phase: the mode granted,
// what the task asked for, and the allow-list: the task's (when its agent
// network is an allow-list) and the run's additions. A task that asks for
// the internet gets the operator's policy: open egress when granted, else
// the run's allow-list (empty: only the gateways, every attempt refused
// and recorded by the proxy).
func (r *runner) agentNetwork() (mode, requested string, hosts []string) {
	mode, hosts = r.o.Task.AgentNetwork()
	requested = mode
	hosts = slices.Clone(hosts)
	if r.o.Task.InternetRequested() {
		requested, mode = task.NetworkPublic, task.NetworkAllowlist
		if r.o.Net.Internet {
			mode = NetworkOpen
		}
	}
	if len(r.o.Net.AllowHosts) > 0 {
		if mode == task.NetworkNone {
			mode = task.NetworkAllowlist
		}
		hosts = append(hosts, r.o.Net.AllowHosts...)
	}
	if hosts == nil {
		hosts = []string{}
	}
	return mode, requested, hosts
}

// startNet builds the agent phase's proxy and gateways. Nothing listens
// yet: the sandbox makes the listeners and hands them to serve.
func (r *runner) startNet() (*agentNet, error) {
	n := &agentNet{}
	switch {
	case r.o.Net.Record:
		n.tape = gateway.NewTape()
	case len(r.o.Net.Gateways) > 0 && r.o.Net.Replay == nil:
		// Kept in memory for the trajectory (trajectory.go): past its
		// limits it stops recording, and refuses the agent nothing.
		n.tape = gateway.NewTape(gateway.KeepServing())
	}
	mode, requested, hosts := r.agentNetwork()
	n.net = NetworkRef{Mode: mode, Requested: requested, AllowedHosts: hosts}
	if mode == task.NetworkAllowlist || mode == NetworkOpen {
		allow, err := netpolicy.ParseAllowList(hosts)
		if err != nil {
			return nil, fmt.Errorf("the allow-list: %w", err)
		}
		hm, err := netpolicy.ParseHostMap(r.o.Net.HostMap)
		if err != nil {
			return nil, fmt.Errorf("--host-map: %w", err)
		}
		p, err := netpolicy.New(netpolicy.Options{Allow: allow, Open: mode == NetworkOpen, HostMap: hm,
			Record: r.proxyDecision(n), Resolve: r.o.Net.Resolve})
		if err != nil {
			return nil, fmt.Errorf("starting the egress proxy: %w", err)
		}
		n.proxy = p
		n.listen = append(n.listen, ProxyAddr)
		n.serve = append(n.serve, p.Serve)
		n.close = append(n.close, p.Close)
		// Loopback hosts on the list are served where the agent connects
		// to them directly (NO_PROXY, or a client that ignores the proxy):
		// on its own loopback, forwarded to the host's.
		for _, a := range allow.Loopback() {
			if a.Addr().Is6() && !sandbox.IPv6Loopback() {
				// No ::1 inside: [::1] cannot be asked for directly, and
				// localhost is 127.0.0.1 there.
				continue
			}
			n.listen = append(n.listen, a.String())
			n.serve = append(n.serve, p.ServeLoopback)
		}
		// NO_PROXY keeps the gateways, and the loopback hosts on the
		// list, direct; Node reads the proxy variables only when asked to.
		n.env = append(n.env, proxyEnv()...)
	}
	for i, g := range r.o.Net.Gateways {
		gw, err := gateway.New(gateway.Options{Spec: g, Key: r.keys[g.Name], Transport: r.o.Net.GatewayTransport, Record: r.gatewayCall,
			Inspect: r.inspector(), Tape: n.tape, Replay: r.o.Net.Replay})
		if err != nil {
			n.stop()
			return nil, fmt.Errorf("starting the %s gateway: %w", g.Name, err)
		}
		addr := gatewayAddr(i).String()
		n.gateways = append(n.gateways, gw)
		n.listen = append(n.listen, addr)
		n.serve = append(n.serve, gw.Serve)
		n.close = append(n.close, gw.Close)
		n.env = append(n.env, g.BaseURLEnv()+"="+g.BaseURL(addr), g.KeyEnv()+"="+gateway.DummyKey)
	}
	return n, nil
}

// serveAll is the sandbox's Serve: one server per listener.
func (n *agentNet) serveAll(ls []net.Listener) {
	for i, l := range ls {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			_ = n.serve[i](l) // ends when closed; each request's fate is in its record
		}()
	}
}

// stop closes every server (each waits for its last record) and their
// listeners.
func (n *agentNet) stop() error {
	var first error
	for _, c := range n.close {
		if err := c(); err != nil && first == nil {
			first = err
		}
	}
	n.wg.Wait()
	return first
}

// proxyDecision records one proxy decision on the timeline and in the
// verdict's tallies.
func (r *runner) proxyDecision(n *agentNet) func(netpolicy.Decision) {
	return func(d netpolicy.Decision) {
		kind := "proxy.deny"
		if d.Allowed {
			kind = "proxy.allow"
		}
		r.audit.Observe(kind, detail("method", d.Method, "host", d.Host, "port", d.Port, "rule", d.Rule, "addr", d.Addr,
			"sni", d.SNI, "reason", d.Reason, "bytes_up", d.BytesUp, "bytes_down", d.BytesDown,
			"duration_ms", d.Duration.Milliseconds()), d.Time)
		n.mu.Lock()
		defer n.mu.Unlock()
		if d.Allowed {
			n.net.Allowed++
		} else {
			n.net.Denied++
		}
		n.net.BytesUp += d.BytesUp
		n.net.BytesDown += d.BytesDown
	}
}

// gatewayCall records one model call.
func (r *runner) gatewayCall(c gateway.Call) {
	r.audit.Observe("gateway.call", detail("gateway", c.Gateway, "method", c.Method, "path", c.Path,
		"model", c.Model, "status", c.Status, "input_tokens", c.InputTokens, "output_tokens", c.OutputTokens,
		"latency_ms", c.Latency.Milliseconds(), "request_sha256", c.RequestSHA256,
		"response_sha256", c.ResponseSHA256, "bytes_up", c.BytesUp, "bytes_down", c.BytesDown, "error", c.Error), c.Time)
}

// netAttempt records one connect or send the agent's tree made, as the
// seccomp watch saw it: "net.local" to the sandbox's own listeners (the
// proxy, the gateways, the loopback forwarders, whose connections the
// proxy records too), "net.unix" to a unix socket, "net.attempt" to
// anything else. A send on a connected socket names no address and is not
// recorded (its connect was).
func (r *runner) netAttempt(n *agentNet) func(seccomp.Attempt) {
	local := map[netip.AddrPort]bool{}
	if n != nil {
		for _, a := range n.listen {
			local[netip.MustParseAddrPort(a)] = true
		}
	}
	return func(a seccomp.Attempt) {
		kind := "net.attempt"
		switch a.Family {
		case "":
			if a.Unread == "" {
				return
			}
		case "unix":
			kind = "net.unix"
		case "inet", "inet6":
			if ip, err := netip.ParseAddr(a.Addr); err == nil && local[netip.AddrPortFrom(ip.Unmap(), uint16(a.Port))] {
				kind = "net.local"
			}
		}
		r.audit.Observe(kind, detail("syscall", a.Syscall, "family", a.Family, "addr", a.Addr, "port", a.Port,
			"pid", a.PID, "unread", a.Unread), a.Time)
	}
}

// models totals the gateways' usage for the verdict.
func (n *agentNet) models(specs []gateway.Spec) *ModelsRef {
	if len(specs) == 0 {
		return nil
	}
	m := &ModelsRef{Gateways: []GatewayRef{}, Usage: []ModelUsage{}}
	for _, g := range specs {
		m.Gateways = append(m.Gateways, GatewayRef{Name: g.Name, Upstream: g.Upstream.String()})
	}
	for _, gw := range n.gateways {
		for _, u := range gw.Usage() {
			m.Usage = append(m.Usage, ModelUsage{Gateway: u.Gateway, Model: u.Model, Calls: u.Calls,
				InputTokens: u.InputTokens, OutputTokens: u.OutputTokens})
			m.Calls += u.Calls
		}
	}
	return m
}

package trial

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/proctor-sandbox/proctor/internal/hermetic"
	"github.com/proctor-sandbox/proctor/internal/netpolicy"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/tooling"
)

// Hermetic grading (internal/hermetic): a verifier that fetches its own
// tools (apt-get, curl | sh, uvx) gets them, and nothing the agent wrote
// reaches the network while it runs. Once per task and environment, in
// the run that learns the tooling (the oracle's, or a do-nothing agent's
// when the task has none), the grader's network is a Recorder: what the
// grader's allow-list lets through is fetched and recorded. Every trial's
// grader then gets a Replayer of that recording: it answers only what was
// recorded, never connects anywhere, and refuses every other request as a
// violation. TLS is ended by a CA made per cache store, whose certificate
// reaches only the grader sandbox's trust (bound over its system bundle,
// and the usual variables) and whose key never leaves this process.

// HermeticStoreDir is the hermetic store under the cache directory.
const HermeticStoreDir = "hermetic"

// ViolationNetwork is a request of the grader's that the pristine
// verifier never made: refused, and the trial compromised.
const ViolationNetwork = "network"

// hermeticSchemaKey names the rules a recording's key is made by.
const hermeticSchemaKey = "proctor.hermetic/1"

// HermeticRef is the verdict's record of the grader's network.
type HermeticRef struct {
	// Mode is "replay" in a trial (and a regrade).
	Mode   string `json:"mode"`
	Digest string `json:"digest"` // of the recording's index
	Cached bool   `json:"cached"` // recorded by an earlier trial
	// Exchanges, Bodies and Bytes size the recording; its index and
	// bodies are artifacts of the bundle (Files).
	Exchanges int      `json:"exchanges"`
	Bodies    int      `json:"bodies"`
	Bytes     int64    `json:"bytes"`
	Files     []string `json:"files"`
	// Served and Refused count the grader's requests; Violations those
	// the recording does not hold.
	Served     int `json:"served"`
	Refused    int `json:"refused"`
	Violations int `json:"violations"`
}

// graderNet is the grader's network for one grading phase: a Recorder
// (learning) or a Replayer (a trial), served on the proxy's address
// inside, with the CA's certificate bound over the system's bundle.
type graderNet struct {
	recorder *hermetic.Recorder
	replayer *hermetic.Replayer
	binds    []sandbox.Bind
	env      []string

	mu         sync.Mutex
	served     int
	refused    int
	violations []Violation
}

// hermeticKey names the task's recording in the store: the task, the
// environment, and what the recorder was allowed (the grader's
// allow-list, open egress, host maps and upstream roots).
func (r *runner) hermeticKey() (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", hermeticSchemaKey, r.toolingKey())
	hosts := r.verifierHosts()
	slices.Sort(hosts)
	fmt.Fprintf(h, "allow %q\nopen %v\n", hosts, r.o.Net.Internet)
	hm, err := netpolicy.ParseHostMap(r.o.Net.HostMap)
	if err != nil {
		return "", fmt.Errorf("--host-map: %w", err)
	}
	fmt.Fprintf(h, "map %q\n", hm.Strings())
	for _, f := range r.o.Net.CAFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("--ca-file: %w", err)
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "root %x\n", sum)
	}
	return "k" + hex.EncodeToString(h.Sum(nil))[:40], nil
}

// verifierHosts is the grader's allow-list while its fetches are
// recorded: the operator's, and the hosts the task names.
func (r *runner) verifierHosts() []string {
	return append(slices.Clone(r.o.Net.VerifierHosts), r.o.Task.Proctor.VerifierHosts...)
}

// hermeticStore opens the cache's hermetic store and its CA.
func (r *runner) hermeticStore() (*hermetic.Store, *hermetic.CA, error) {
	st, err := hermetic.OpenStore(filepath.Join(r.o.CacheDir, HermeticStoreDir))
	if err != nil {
		return nil, nil, fmt.Errorf("the hermetic store: %w", err)
	}
	ca, err := st.CA()
	if err != nil {
		return nil, nil, fmt.Errorf("the hermetic store's CA: %w", err)
	}
	return st, ca, nil
}

// cachedRecording loads the task's recording from the store: nil when
// there is none or it is damaged (it is recorded again).
func (r *runner) cachedRecording(key string) (*hermetic.Recording, error) {
	st, _, err := r.hermeticStore()
	if err != nil {
		return nil, err
	}
	rec, err := st.Load(key)
	switch {
	case err == nil:
		return rec, nil
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, hermetic.ErrTampered), errors.Is(err, hermetic.ErrMalformed),
		errors.Is(err, hermetic.ErrMissingBlob):
		return nil, nil
	}
	return nil, fmt.Errorf("loading the verifier's recording: %w", err)
}

// startGraderNet builds the grading phase's network over layout l: the
// learning run's Recorder, or a Replayer of the trial's recording. nil
// when neither applies (a run with no recording: no network at all).
func (r *runner) startGraderNet(l *layout, s *scratch) (*graderNet, error) {
	if r.learn == nil && r.recording == nil {
		return nil, nil
	}
	st, ca, err := r.hermeticStore()
	if err != nil {
		return nil, err
	}
	g := &graderNet{}
	if r.learn != nil {
		allow, err := netpolicy.ParseAllowList(r.verifierHosts())
		if err != nil {
			return nil, fmt.Errorf("the verifier's allow-list: %w", err)
		}
		hm, err := netpolicy.ParseHostMap(r.o.Net.HostMap)
		if err != nil {
			return nil, fmt.Errorf("--host-map: %w", err)
		}
		roots, err := hermetic.ReadRoots(r.o.Net.CAFiles...)
		if err != nil {
			return nil, err
		}
		if g.recorder, err = hermetic.NewRecorder(st, hermetic.RecordOptions{Allow: allow, Open: r.o.Net.Internet, HostMap: hm,
			Roots: roots, Record: g.decision(r), Resolve: r.o.Net.Resolve}); err != nil {
			return nil, fmt.Errorf("the verifier's recorder: %w", err)
		}
	} else if g.replayer, err = hermetic.NewReplayer(r.recording, ca, hermetic.ReplayOptions{Record: g.decision(r)}); err != nil {
		return nil, fmt.Errorf("the verifier's replay: %w", err)
	}
	// The CA reaches the grader's trust: its bundle (the environment's
	// own, then the CA's certificate) bound over the system's, and the
	// variables clients read.
	pv := &layoutEnv{l: l}
	var system []byte
	if final, err := tooling.Resolve(pv, hermetic.BundlePaths[0]); err == nil {
		system, _ = pv.Read(final, 16<<20) // absent or unreadable: the CA's alone
	}
	tr, err := ca.Trust(system)
	if err != nil {
		return nil, err
	}
	bundle := filepath.Join(s.dir, "ca-bundle.pem")
	if err := os.WriteFile(bundle, tr.Bundle, 0o644); err != nil {
		return nil, fmt.Errorf("writing the grader's CA bundle: %w", err)
	}
	for i, p := range tr.Paths {
		if i > 0 {
			if k, _, err := pv.Lstat(p); err != nil || k != tooling.File {
				continue // bound only where the environment has one
			}
		}
		g.binds = append(g.binds, sandbox.Bind{Src: bundle, Dst: p})
	}
	g.env = append(proxyEnv(), tr.Env...)
	return g, nil
}

// proxyEnv points every client at the proxy inside, the loopback kept
// direct.
func proxyEnv() []string {
	url := "http://" + ProxyAddr
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+url, strings.ToLower(k)+"="+url)
	}
	return append(env, "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1", "NODE_USE_ENV_PROXY=1")
}

// serve is the grader sandbox's Serve.
func (g *graderNet) serve(ls []net.Listener) {
	for _, l := range ls {
		if g.recorder != nil {
			go g.recorder.Serve(l)
		} else {
			go g.replayer.Serve(l)
		}
	}
}

// decision puts each of the proxy's decisions on the timeline, counts it,
// and keeps a violation for the verdict.
func (g *graderNet) decision(r *runner) func(hermetic.Decision) {
	return func(d hermetic.Decision) {
		kind := "hermetic.allow"
		switch {
		case d.Violation:
			kind = "hermetic.violation"
		case !d.Served:
			kind = "hermetic.deny"
		}
		r.event(kind, detail("mode", string(d.Mode), "method", d.Method, "url", d.URL, "status", d.Status, "recorded", d.Recorded,
			"reason", d.Reason, "rule", d.Rule, "addr", d.Addr, "sni", d.SNI, "body_sha256", d.BodySHA256, "bytes", d.BodyBytes,
			"duration_ms", d.Duration.Milliseconds()))
		g.mu.Lock()
		defer g.mu.Unlock()
		if d.Served {
			g.served++
		} else {
			g.refused++
		}
		if d.Violation {
			g.violations = append(g.violations, Violation{Kind: ViolationNetwork, Path: d.URL,
				Detail: fmt.Sprintf("%s %s, which the pristine verifier never fetched: refused (%s)", d.Method, d.URL, d.Reason)})
		}
	}
}

// finish stops the proxy once the grader is done and records what it
// did: a trial's violations and counts, or the learning run's recording.
func (r *runner) finishGraderNet(g *graderNet) error {
	if g == nil {
		return nil
	}
	if g.recorder != nil {
		if err := g.recorder.Close(); err != nil {
			return fmt.Errorf("the verifier's recorder: %w", err)
		}
		rec, err := g.recorder.Recording()
		if err != nil {
			return fmt.Errorf("recording the verifier's fetches: %w", err)
		}
		r.learn.recording = rec
		return nil
	}
	if err := g.replayer.Close(); err != nil {
		return fmt.Errorf("the verifier's replay: %w", err)
	}
	if err := g.replayer.Err(); err != nil {
		return fmt.Errorf("the verifier's recording could not be served as recorded: %w", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	r.v.Violations = append(r.v.Violations, g.violations...)
	for _, vi := range g.violations {
		r.say("violation: %s %q: %q", vi.Kind, vi.Path, vi.Detail)
	}
	if r.v.Hermetic != nil {
		r.v.Hermetic.Served, r.v.Hermetic.Refused, r.v.Hermetic.Violations = g.served, g.refused, len(g.violations)
	}
	return nil
}

// useRecording gives the trial its recording: into the verdict, and its
// index and bodies beside it in OUT, as artifacts of the bundle (linked
// from the store where the two share a filesystem).
func (r *runner) useRecording(rec *hermetic.Recording, cached bool) error {
	r.recording = rec
	if err := rec.Export(r.o.Out); err != nil {
		return fmt.Errorf("writing the verifier's recording: %w", err)
	}
	files := rec.Files()
	r.v.Hermetic = &HermeticRef{Mode: "replay", Digest: rec.Digest(), Cached: cached, Exchanges: len(rec.Exchanges()),
		Bodies: len(rec.Blobs()), Bytes: rec.Size(), Files: files}
	r.v.Artifacts = append(r.v.Artifacts, files...)
	return nil
}

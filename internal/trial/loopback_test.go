package trial

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/gateway"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

// serveOn serves an HTTP server on the host at addr ("127.0.0.1:0") that
// answers every request with body, counting them in hits (if not nil). It
// returns the port.
func serveOn(t *testing.T, addr, body string, hits *atomic.Int64) string {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits != nil {
			hits.Add(1)
		}
		fmt.Fprint(w, body)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return port(t, "http://"+l.Addr().String())
}

// A server the operator names on the host's loopback (--allow-host
// 127.0.0.1:PORT, localhost:PORT in the task file, [::1]:PORT) is reached
// by the environment the agent is given, with Python's urllib, curl and
// Node's fetch, directly or through the proxy, while the proxy and the
// gateway keep working for every client. A port not on the list, another
// loopback address, and a wildcard rule over loopback reach nothing, and
// every connection is on the record.
func TestLoopbackAllowHosts(t *testing.T) {
	requireRoot(t)
	for _, tool := range []string{"python3", "curl", "node"} {
		requireTool(t, tool)
	}
	t.Setenv("OPENAI_API_KEY", "sk-host-key")
	v4 := serveOn(t, "127.0.0.1:0", "v4-ok", nil)
	// The localhost rule's server is on the host's 127.0.0.1 only: a client
	// that tries ::1 first (curl does) must still get it.
	local := serveOn(t, "127.0.0.1:0", "localhost-ok", nil)
	provider := serveOn(t, "127.0.0.1:0", "provider-ok", nil)
	models := serveOn(t, "127.0.0.1:0", `{"data":[{"id":"gateway-ok"}]}`, nil)
	var deniedHits atomic.Int64
	denied := serveOn(t, "127.0.0.1:0", "the answer", &deniedHits)
	v6 := ""
	if sandbox.IPv6Loopback() {
		if l, err := net.Listen("tcp", "[::1]:0"); err == nil {
			l.Close()
			v6 = serveOn(t, "[::1]:0", "v6-ok", nil)
		}
	}
	if v6 == "" {
		t.Log("no IPv6 loopback here: [::1] rules are not tried")
	}

	type fetch struct{ client, url, want string } // want "": an error
	var fetches []fetch
	each := func(url, want string, clients ...string) {
		for _, c := range clients {
			fetches = append(fetches, fetch{c, url, want})
		}
	}
	all := []string{"py", "curl", "node", "proxy"}
	each("http://127.0.0.1:"+v4+"/", "v4-ok", all...)
	each("http://localhost:"+local+"/", "localhost-ok", all...)
	if v6 != "" {
		each("http://[::1]:"+v6+"/", "v6-ok", all...)
		// Python's urllib sends "[::1]" to the proxy whatever no_proxy says,
		// and the proxy decides on the literal, which no rule names.
		each("http://[::1]:"+local+"/", "localhost-ok", "curl", "node")
	}
	// The proxy, for a name on the list; the gateway, for every client.
	each("http://api.provider.test:"+provider+"/", "provider-ok", "py", "curl", "proxy")
	each("http://127.0.0.1:4100/v1/models", "gateway-ok", "py", "curl", "node")
	// Not on the list: another port on the same address, the allowed port on
	// another loopback address, a port only a wildcard rule names.
	each("http://127.0.0.1:"+denied+"/", "", all...)
	each("http://127.0.0.2:"+v4+"/", "", "py", "curl", "node")
	each("http://sub.wild.test:"+denied+"/", "", "proxy")

	agentDir := t.TempDir()
	script, err := os.ReadFile(filepath.Join("testdata", "loopback.py"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(agentDir, "loopback.py"), script, 0o644))
	openUp(t, agentDir)
	var pairs [][2]string
	for _, f := range fetches {
		pairs = append(pairs, [2]string{f.client, f.url})
	}
	args, _ := json.Marshal(pairs)
	specs, err := gateway.ParseSpecs("openai=http://127.0.0.1:" + models + "/v1")
	must(t, err)
	hosts := []string{"127.0.0.1:" + v4, "api.provider.test:" + provider, "*.wild.test:" + denied}
	if v6 != "" {
		hosts = append(hosts, "[::1]:"+v6)
	}

	out := filepath.Join(t.TempDir(), "out")
	tk := writeTask(t, taskSpec{files: map[string]string{"a.txt": "a\n"}, test: "echo 1 > /logs/verifier/reward.txt",
		allowedHosts: []string{"localhost:" + local}})
	v, err := Run(context.Background(), Options{Task: tk, Agent: "python3 /agent/loopback.py " + shellQuote(string(args)),
		AgentDir: agentDir, Out: out, CacheDir: sharedCache, Key: testKey,
		Net: NetOptions{AllowHosts: hosts, Gateways: specs, Getenv: os.Getenv, Resolve: testResolve}})
	log := readFile(t, filepath.Join(out, AgentLog))
	if err != nil {
		t.Fatalf("Run: %v\nagent log:\n%s", err, log)
	}
	res := probeResults(log)
	for _, f := range fetches {
		got, ok := res[f.client+" "+f.url]
		switch {
		case !ok:
			t.Errorf("%s %s: no result", f.client, f.url)
		case f.want == "" && !strings.HasPrefix(got, "error"):
			t.Errorf("%s %s: %q, want an error", f.client, f.url, got)
		case f.want != "" && !strings.Contains(got, f.want):
			t.Errorf("%s %s: %q, want %q", f.client, f.url, got, f.want)
		}
	}
	if t.Failed() {
		t.Logf("agent log:\n%s", log)
	}
	if n := deniedHits.Load(); n != 0 {
		t.Errorf("the host server that is not on the list got %d request(s)", n)
	}

	evs := verifiedEvents(t, out)
	direct := map[string]int{} // "host port rule addr" of the direct connections let through
	for _, d := range eventsOf(evs, "proxy.allow") {
		if d["method"] == "DIRECT" {
			if d["bytes_down"].(float64) == 0 || d["bytes_up"].(float64) == 0 {
				t.Errorf("a direct connection moved no bytes: %v", d)
			}
			direct[fmt.Sprint(d["host"], " ", d["port"], " ", d["rule"], " ", d["addr"])]++
		}
	}
	for _, want := range []string{
		"127.0.0.1 " + v4 + " 127.0.0.1:" + v4 + " 127.0.0.1:" + v4,
		"127.0.0.1 " + local + " localhost:" + local + " 127.0.0.1:" + local,
	} {
		if direct[want] < 3 {
			t.Errorf("%d direct connections recorded as %q, want one for each of py, curl and node (recorded: %v)", direct[want], want, direct)
		}
	}
	if v6 != "" {
		// Through [::1], on to the host's 127.0.0.1: the localhost rule means
		// the host's loopback, whichever family the service is on.
		if want := "[::1] " + local + " localhost:" + local + " 127.0.0.1:" + local; direct[want] == 0 {
			t.Errorf("no direct connection recorded as %q (recorded: %v)", want, direct)
		}
	}
	for _, d := range eventsOf(evs, "proxy.deny") {
		if d["method"] == "DIRECT" {
			t.Errorf("a direct connection was denied: %v", d)
		}
	}
	attempts, locals := map[string]bool{}, map[string]bool{}
	for _, a := range eventsOf(evs, "net.attempt") {
		attempts[fmt.Sprint(a["addr"], " ", a["port"])] = true
	}
	for _, a := range eventsOf(evs, "net.local") {
		locals[fmt.Sprint(a["addr"], " ", a["port"])] = true
	}
	for _, want := range []string{"127.0.0.1 " + denied, "127.0.0.2 " + v4} {
		if !attempts[want] {
			t.Errorf("no net.attempt event for %s (saw %v)", want, attempts)
		}
	}
	for _, want := range []string{"127.0.0.1 " + v4, "127.0.0.1 " + local, "127.0.0.1 3128", "127.0.0.1 4100"} {
		if !locals[want] {
			t.Errorf("no net.local event for %s (saw %v)", want, locals)
		}
	}
	if v.Network.Allowed < len(direct) || v.Network.Denied < 2 || v.Models == nil || v.Models.Calls != 3 {
		t.Errorf("verdict network %+v, models %+v", v.Network, v.Models)
	}
}

// An allow-list rule for an address where Proctor itself listens inside
// the sandbox (the proxy, a gateway) is refused before anything runs, with
// one line naming where the rule came from; one beside them is not.
func TestLoopbackCollisions(t *testing.T) {
	gw, err := gateway.ParseSpecs("openai=http://127.0.0.1:1/v1,anthropic=http://127.0.0.1:2")
	must(t, err)
	tests := []struct {
		name      string
		flags     []string // --allow-host
		task      []string // [environment] allowed_hosts
		gateways  []gateway.Spec
		wantError string // "": none
	}{
		{name: "the proxy", flags: []string{"127.0.0.1:3128"},
			wantError: `--allow-host 127.0.0.1:3128: the egress proxy listens at 127.0.0.1:3128 inside the sandbox`},
		{name: "the proxy by name", flags: []string{"api.example.com", "localhost:3128"},
			wantError: `--allow-host localhost:3128: the egress proxy listens at 127.0.0.1:3128 inside the sandbox`},
		{name: "the proxy in the task", task: []string{"127.0.0.1:3128"},
			wantError: `[environment].allowed_hosts[0] "127.0.0.1:3128": the egress proxy listens at 127.0.0.1:3128 inside the sandbox`},
		{name: "a gateway", flags: []string{"127.0.0.1:4101"}, gateways: gw,
			wantError: `--allow-host 127.0.0.1:4101: the anthropic model gateway listens at 127.0.0.1:4101 inside the sandbox`},
		{name: "a gateway in the task", task: []string{"localhost:4100"}, gateways: gw,
			wantError: `[environment].allowed_hosts[0] "localhost:4100": the openai model gateway listens at 127.0.0.1:4100 inside the sandbox`},
		{name: "no gateway there", flags: []string{"127.0.0.1:4102", "127.0.0.1:4100"}, gateways: gw[:0]},
		{name: "another address", flags: []string{"[::1]:3128", "127.0.0.2:3128", "127.0.0.1:3129"}, gateways: gw},
		{name: "not loopback", flags: []string{"10.0.0.1:3128", "proxy.example.com:3128"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := &taskSpec{files: map[string]string{"a.txt": "a\n"}, test: "true", allowedHosts: tt.task}
			o := Options{Task: writeTask(t, *tk), Agent: "true", Net: NetOptions{AllowHosts: tt.flags, Gateways: tt.gateways,
				Getenv: func(string) string { return "sk-x" }}}
			_, err := checkNet(&o)
			switch {
			case tt.wantError == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantError == "":
				return
			case err == nil:
				t.Fatalf("accepted, want %q", tt.wantError)
			case !strings.HasSuffix(err.Error(), tt.wantError) || strings.Contains(err.Error(), "\n"):
				t.Fatalf("error %q, want one line ending %q", err, tt.wantError)
			}
			if os.Geteuid() != 0 {
				return
			}
			// Through Run: nothing is prepared, written or run.
			o.Out, o.CacheDir, o.Key = filepath.Join(t.TempDir(), "out"), sharedCache, testKey
			v, err := Run(context.Background(), o)
			if v != nil || err == nil || !strings.HasSuffix(err.Error(), tt.wantError) {
				t.Errorf("Run: verdict %v, error %v", v, err)
			}
			if _, err := os.Stat(o.Out); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("Run made its output directory: %v", err)
			}
		})
	}
}

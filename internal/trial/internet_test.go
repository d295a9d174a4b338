package trial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/workspace"
)

// A task that asks for the internet gets the operator's policy, not its
// wish: without --internet its agent reaches nothing but what the run's
// allow-list names (every attempt refused and recorded); with it, open
// egress through the proxy (the metadata and private addresses still
// refused), the trial marked open-network in its signed verdict. A task
// that does not ask gets no network whatever the operator grants.
func TestInternetIsTheOperatorsToGrant(t *testing.T) {
	if raceEnabled {
		t.Skip("trials under the race detector are too slow")
	}
	requireRoot(t)
	requireTool(t, "curl")
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "the answer is 42") }))
	defer site.Close()
	_, port, _ := net.SplitHostPort(site.Listener.Addr().String())
	// The "internet" stands on the host's loopback: the operator maps its
	// name there, as curl --resolve would.
	hostMap := []string{"answers.example=" + site.Listener.Addr().String()}
	fetch := func(url string) string {
		return "curl -sS --max-time 20 -o /app/got.txt " + url + "; echo curl=$? > /app/curl.txt"
	}
	asks := writeTask(t, taskSpec{internet: true, files: map[string]string{"a.txt": "a\n"}, test: "echo 1 > /logs/verifier/reward.txt"})
	quiet := writeTask(t, taskSpec{files: map[string]string{"a.txt": "a\n"}, test: "echo 1 > /logs/verifier/reward.txt"})
	cases := []struct {
		name    string
		tk      bool // the task asks
		net     NetOptions
		url     string
		mode    string
		reached bool
		open    bool
		refusal string // the proxy's reason, for a refused fetch through it
	}{
		{"asks, not granted", true, NetOptions{HostMap: hostMap}, "http://answers.example:" + port + "/", "allowlist", false, false, "not on the allow-list"},
		{"asks, the operator's allow-list", true, NetOptions{HostMap: hostMap, AllowHosts: []string{"answers.example:" + port}}, "http://answers.example:" + port + "/", "allowlist", true, false, ""},
		{"asks, granted", true, NetOptions{HostMap: hostMap, Internet: true}, "http://answers.example:" + port + "/", NetworkOpen, true, true, ""},
		{"granted, the metadata address", true, NetOptions{Internet: true}, "http://169.254.169.254/latest/meta-data/", NetworkOpen, false, true, "metadata address"},
		{"granted, a private address", true, NetOptions{Internet: true}, "http://10.1.2.3/", NetworkOpen, false, true, "private address"},
		{"does not ask, granted", false, NetOptions{HostMap: hostMap, Internet: true}, "http://answers.example:" + port + "/", "no-network", false, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tk := quiet
			if c.tk {
				tk = asks
			}
			out := filepath.Join(t.TempDir(), "out")
			v, err := Run(context.Background(), Options{Task: tk, Agent: fetch(c.url), Out: out, CacheDir: sharedCache, Key: testKey, Net: c.net})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			cs := changesetFiles(t, out)
			got := strings.Contains(cs["/app/got.txt"], "the answer is 42")
			if got != c.reached || v.Network.Mode != c.mode || v.OpenNetwork != c.open {
				t.Errorf("reached %v (curl %q), mode %s, open %v; want %v, %s, %v", got, cs["/app/curl.txt"], v.Network.Mode, v.OpenNetwork, c.reached, c.mode, c.open)
			}
			wantAsked := "no-network"
			if c.tk {
				wantAsked = "public"
			}
			if v.Network.Requested != wantAsked {
				t.Errorf("requested %q, want %q", v.Network.Requested, wantAsked)
			}
			evs := verifiedEvents(t, out)
			if c.mode != "no-network" && len(eventsOf(evs, "proxy.allow"))+len(eventsOf(evs, "proxy.deny")) == 0 {
				t.Errorf("no proxy decision on the timeline")
			}
			if c.refusal != "" {
				denied := eventsOf(evs, "proxy.deny")
				if len(denied) == 0 || !strings.Contains(fmt.Sprint(denied[0]["reason"]), c.refusal) {
					t.Errorf("proxy denials %v, want one for %q", denied, c.refusal)
				}
			}
		})
	}
}

// changesetFiles reads the trial's changeset: each file's content by path.
func changesetFiles(t *testing.T, out string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(out, ChangesetFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd := workspace.NewReader(f, workspace.DefaultLimits())
	m := map[string]string{}
	for {
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return m
		}
		if err != nil {
			t.Fatal(err)
		}
		if e.Kind == workspace.KindFile {
			b, err := io.ReadAll(rd)
			if err != nil {
				t.Fatal(err)
			}
			m[e.Path] = string(b)
		}
	}
}

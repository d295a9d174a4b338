package imagebuild

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Hostile inputs are one-line errors naming the Dockerfile's line, and
// nothing outside the context is read: a context symlink pointing out
// (absolute or climbing), COPY ../x, ADD of a URL the build's allow-list
// does not name, ADD of a URL with no network at all. A step that fails
// names its exit status, its last line and the log holding its output.
func TestBuildHostile(t *testing.T) {
	f := newFixture(t)
	base := f.busybox(t)
	outside := filepath.Join(f.dir, "outside")
	if err := os.WriteFile(outside, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A web server on the host: what a build must not reach unless allowed.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "payload") }))
	defer srv.Close()
	port := strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	// The proxy resolves these names to the server.
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
	}
	ctx := map[string]string{"abs": "->" + outside, "up": "->../outside", "ok.txt": "ok", "d/inner": "->" + outside}
	for _, tc := range []struct {
		name  string
		df    string
		allow []string
		is    error
		want  string
	}{
		{"absolute symlink out", "COPY abs /x", nil, ErrEscape, "COPY abs: "},
		{"climbing symlink out", "COPY up /x", nil, ErrEscape, "COPY up: "},
		{"dot-dot source", "COPY ../outside /x", nil, ErrEscape, "COPY ../outside: "},
		{"dot-dot inside the path", "COPY ok.txt/../../outside /x", nil, ErrEscape, ""},
		{"ADD URL off the allow-list", "ADD http://blocked.example:" + port + "/f /f", []string{"allowed.example:" + port}, ErrNetwork, "not on the allow-list"},
		{"ADD URL without network", "ADD http://allowed.example:" + port + "/f /f", nil, ErrNetwork, "no network"},
		{"RUN fails", "RUN echo starting; echo 'E: Unable to locate package nope' >&2; exit 100", nil, ErrStepFailed, "RUN exited 100: E: Unable to locate package nope (log: "},
		{"RUN without network", "RUN wget -q -O- http://127.0.0.1:" + port + "/", nil, ErrStepFailed, "RUN exited 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			df := "FROM " + base + "\nWORKDIR /app\n" + tc.df + "\n"
			res, err := f.build(t, df, ctx, Options{AllowHosts: tc.allow, Resolve: resolve})
			if err == nil {
				t.Fatalf("built: %v", res.Image.Digest)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "environment/Dockerfile:3: ") || strings.Contains(msg, "\n") {
				t.Errorf("message %q: want one line naming environment/Dockerfile:3", msg)
			}
			if !errors.Is(err, tc.is) || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q: want %v and %q", msg, tc.is, tc.want)
			}
			if strings.Contains(msg, "host secret") {
				t.Errorf("the outside file was read: %q", msg)
			}
		})
	}

	// A failed step's whole output is kept in the log.
	res, _ := f.build(t, "FROM "+base+"\nRUN echo first-line-of-output; exit 3\n", nil, Options{})
	if b, _ := os.ReadFile(res.Log); !strings.Contains(string(b), "first-line-of-output") {
		t.Errorf("the build log lacks the step's output:\n%s", b)
	}

	// A directory holding a symlink out is copied with the symlink as a
	// symlink: its target is never read.
	res = f.mustBuild(t, "FROM "+base+"\nCOPY d /d\n", ctx, Options{})
	if l, err := os.Readlink(filepath.Join(res.Image.Rootfs, "d/inner")); err != nil || l != outside {
		t.Errorf("d/inner: %q, %v; want the symlink itself", l, err)
	}

	// On the allow-list, ADD goes through the proxy, and the log has the
	// decision.
	res = f.mustBuild(t, "FROM "+base+"\nADD http://allowed.example:"+port+"/f /f\n", ctx,
		Options{AllowHosts: []string{"allowed.example:" + port}, Resolve: resolve})
	if got := read(t, res.Image, "f"); got != "payload" {
		t.Errorf("ADD through the proxy: %q", got)
	}
	if fi := stat(t, res.Image, "f"); fi.Mode().Perm() != 0o600 {
		t.Errorf("ADD URL mode %v, want 0600 as Docker gives", fi.Mode())
	}
	if b, _ := os.ReadFile(res.Log); !strings.Contains(string(b), "proxy allow GET allowed.example:"+port) || res.ProxyAllowed != 1 {
		t.Errorf("the proxy's decision is not in the log (%d allowed):\n%s", res.ProxyAllowed, b)
	}

	// A RUN step on the allow-list reaches it through the proxy; one
	// off the list is refused by the proxy, and both are in the log.
	res, err := f.build(t, "FROM "+base+"\nRUN wget -q -O /got http://allowed.example:"+port+"/ && ! wget -q -O- http://other.example:"+port+"/\n", nil,
		Options{AllowHosts: []string{"allowed.example:" + port}, Resolve: resolve})
	if err != nil {
		t.Fatalf("RUN through the proxy: %v", err)
	}
	if got := read(t, res.Image, "got"); got != "payload" || res.ProxyAllowed != 1 || res.ProxyDenied != 1 {
		t.Errorf("RUN through the proxy: %q, allowed %d, denied %d", got, res.ProxyAllowed, res.ProxyDenied)
	}
	if b, _ := os.ReadFile(res.Log); !strings.Contains(string(b), "proxy deny GET other.example:"+port) {
		t.Errorf("the denial is not in the log:\n%s", b)
	}

	// The build's deadline ends a RUN that outlasts it.
	start := time.Now()
	_, err = f.build(t, "FROM "+base+"\nRUN sleep 60\n", nil, Options{Timeout: 2 * time.Second})
	if err == nil || !strings.HasPrefix(err.Error(), "environment/Dockerfile:2: RUN hit the timeout limit") || time.Since(start) > 30*time.Second {
		t.Errorf("a RUN past the build's timeout: %v after %v", err, time.Since(start))
	}
	_ = net.IPv4len
}

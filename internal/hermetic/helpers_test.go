package hermetic

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/proctor-sandbox/proctor/internal/netpolicy"
)

// decisions collects the Decisions of a Recorder or Replayer.
type decisions struct {
	mu  sync.Mutex
	all []Decision
}

func (c *decisions) record(d Decision) {
	c.mu.Lock()
	c.all = append(c.all, d)
	c.mu.Unlock()
}

func (c *decisions) list() []Decision {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.all)
}

// find returns the decisions for method and URL.
func (c *decisions) find(method, u string) []Decision {
	var out []Decision
	for _, d := range c.list() {
		if d.Method == method && d.URL == u {
			out = append(out, d)
		}
	}
	return out
}

func (c *decisions) violations() []Decision {
	var out []Decision
	for _, d := range c.list() {
		if d.Violation {
			out = append(out, d)
		}
	}
	return out
}

// upstreamCA is the test's stand-in for the internet's roots: the
// upstream servers' certificates are signed by it, and only the recorder
// trusts it (RecordOptions.Roots, as --ca-file).
type upstreamCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newUpstreamCA(t testing.TB) *upstreamCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "Test Internet Root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	var b bytes.Buffer
	fmt.Fprintf(&b, "-----BEGIN CERTIFICATE-----\n%s\n-----END CERTIFICATE-----\n", base64.StdEncoding.EncodeToString(der))
	return &upstreamCA{cert: cert, key: key, pem: b.Bytes()}
}

func (u *upstreamCA) leaf(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		DNSNames: names, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, u.cert, &key.PublicKey, u.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// Names of the stand-ins for the internet.
const (
	astralHost = "astral.sh"         // serves an installer and redirects to a release
	indexHost  = "index.example.org" // a package index and file host
	debHost    = "deb.example.org"   // a plain-http mirror
)

// world is the test's internet: HTTPS servers for astral.sh and the index,
// a plain-HTTP mirror, each on loopback, reached through a host map.
type world struct {
	ca       *upstreamCA
	servers  map[string]*httptest.Server
	hostMap  HostMap
	conns    atomic.Int64 // connections the servers accepted
	flaky    atomic.Int64
	mu       sync.Mutex
	seen     []http.Header // headers of /headers requests
	tarball  []byte
	wheel    []byte
	big      []byte
	debFiles map[string][]byte // a Debian repository below /debian/, when set
	stopOnce sync.Once
}

// uvScript stands for uv: what the tarball installs.
const uvScript = "#!/bin/sh\necho \"uv 0.9.5 (test stand-in) $*\"\n"

// installScript is the installer astral.sh serves: the shape of the real
// one (download a release with curl, unpack it into ~/.local/bin, write
// an env file), small.
const installScript = `#!/bin/sh
set -eu
url="https://astral.sh/uv/0.9.5/uv-x86_64-unknown-linux-gnu.tar.gz"
tmp=$(mktemp -d)
curl -LsSf "$url" -o "$tmp/uv.tar.gz"
mkdir -p "$HOME/.local/bin"
tar -xzf "$tmp/uv.tar.gz" -C "$HOME/.local/bin"
printf 'export PATH="$HOME/.local/bin:$PATH"\n' > "$HOME/.local/bin/env"
echo "installed uv to $HOME/.local/bin"
`

func newWorld(t testing.TB) *world {
	t.Helper()
	w := &world{ca: newUpstreamCA(t), servers: map[string]*httptest.Server{}, hostMap: HostMap{}}
	w.tarball = makeTarball(t, "uv", uvScript)
	w.wheel = makeWheel(t)
	w.big = bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	start := func(name string, h http.Handler, tlsOn bool) {
		s := httptest.NewUnstartedServer(h)
		s.Config.ErrorLog = log.New(io.Discard, "", 0)
		s.Config.ConnState = func(c net.Conn, st http.ConnState) {
			if st == http.StateNew {
				w.conns.Add(1)
			}
		}
		if tlsOn {
			s.TLS = &tls.Config{Certificates: []tls.Certificate{w.ca.leaf(t, name)}}
			s.StartTLS()
		} else {
			s.Start()
		}
		w.servers[name] = s
		w.hostMap[name] = netip.MustParseAddrPort(s.Listener.Addr().String())
	}
	start(astralHost, http.HandlerFunc(w.astral), true)
	start(indexHost, http.HandlerFunc(w.index), true)
	start(debHost, http.HandlerFunc(w.deb), false)
	t.Cleanup(w.stop)
	return w
}

// stop takes the internet down: every server closed.
func (w *world) stop() {
	w.stopOnce.Do(func() {
		for _, s := range w.servers {
			s.Close()
		}
	})
}

func (w *world) allow(t testing.TB) netpolicy.AllowList {
	a, err := netpolicy.ParseAllowList([]string{astralHost, indexHost, debHost})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (w *world) astral(rw http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/uv/0.9.5/install.sh":
		rw.Header().Set("Content-Type", "text/x-sh")
		io.WriteString(rw, installScript)
	case "/uv/0.9.5/uv-x86_64-unknown-linux-gnu.tar.gz":
		// As GitHub does: a redirect to a signed URL on another host.
		http.Redirect(rw, r, "https://"+indexHost+"/files/uv-0.9.5.tar.gz?sig=c2lnbmVk&expires=1", http.StatusFound)
	default:
		http.NotFound(rw, r)
	}
}

func (w *world) index(rw http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/files/uv-0.9.5.tar.gz":
		if r.URL.Query().Get("sig") != "c2lnbmVk" {
			http.Error(rw, "bad signature", http.StatusForbidden)
			return
		}
		rw.Header().Set("Content-Type", "application/gzip")
		rw.Write(w.tarball)
	case "/simple/tinypkg/":
		sum := sha256.Sum256(w.wheel)
		link := "https://" + indexHost + "/files/tinypkg-1.0-py3-none-any.whl#sha256=" + hex.EncodeToString(sum[:])
		if strings.Contains(r.Header.Get("Accept"), "application/vnd.pypi.simple.v1+json") {
			rw.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
			fmt.Fprintf(rw, `{"meta":{"api-version":"1.0"},"name":"tinypkg","files":[{"filename":"tinypkg-1.0-py3-none-any.whl","url":%q,"hashes":{"sha256":%q}}]}`,
				strings.Split(link, "#")[0], hex.EncodeToString(sum[:]))
			return
		}
		rw.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(rw, "<!DOCTYPE html><html><body><a href=%q>tinypkg-1.0-py3-none-any.whl</a></body></html>\n", link)
	case "/files/tinypkg-1.0-py3-none-any.whl":
		rw.Header().Set("Content-Type", "application/octet-stream")
		rw.Write(w.wheel)
	case "/api/echo":
		b, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(b)
		fmt.Fprintf(rw, "%s %s\n", r.Method, hex.EncodeToString(sum[:]))
	case "/flaky":
		if w.flaky.Add(1) == 1 {
			http.Error(rw, "try again", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(rw, "steady now\n")
	case "/ranged":
		rw.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(rw, r, "ranged", time.Unix(1700000000, 0), bytes.NewReader(w.big))
	case "/big":
		rw.Write(w.big)
	case "/gzipped":
		rw.Header().Set("Content-Encoding", "gzip")
		rw.Header().Set("Content-Type", "text/plain")
		gz := gzip.NewWriter(rw)
		io.WriteString(gz, "compressed whatever was asked\n")
		gz.Close()
	case "/headers":
		w.mu.Lock()
		w.seen = append(w.seen, r.Header.Clone())
		w.mu.Unlock()
		rw.Header().Set("Set-Cookie", "session=1")
		rw.Header().Set("X-Request-Id", fmt.Sprint(time.Now().UnixNano()))
		rw.Header().Set("ETag", `"v1"`)
		rw.Header()["Content-Type"] = nil // none: net/http would sniff one
		io.WriteString(rw, "no type given: text sniffing would say text/plain\n")
	case "/nobody":
		rw.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(rw, r)
	}
}

func (w *world) deb(rw http.ResponseWriter, r *http.Request) {
	if w.debFiles != nil {
		if b, ok := w.debFiles[strings.TrimPrefix(r.URL.Path, "/debian/")]; ok {
			rw.Write(b)
		} else {
			http.NotFound(rw, r)
		}
		return
	}
	switch r.URL.Path {
	case "/debian/dists/stable/InRelease":
		rw.Header().Set("Last-Modified", "Sat, 01 Nov 2025 00:00:00 GMT")
		io.WriteString(rw, "Origin: Debian\nSuite: stable\nDate: Sat, 01 Nov 2025 00:00:00 UTC\n")
	case "/debian/pool/main/c/curl/curl_1.0_amd64.deb":
		rw.Write(bytes.Repeat([]byte{0xde, 0xb0}, 5000))
	default:
		http.NotFound(rw, r)
	}
}

func makeTarball(t testing.TB, name, content string) []byte {
	t.Helper()
	var b bytes.Buffer
	gz := gzip.NewWriter(&b)
	tw := tar.NewWriter(gz)
	tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(content)), ModTime: time.Unix(1700000000, 0)})
	io.WriteString(tw, content)
	tw.Close()
	gz.Close()
	return b.Bytes()
}

// makeWheel builds a minimal valid wheel of tinypkg 1.0.
func makeWheel(t testing.TB) []byte {
	t.Helper()
	files := []struct{ name, body string }{
		{"tinypkg/__init__.py", "VERSION = '1.0'\n"},
		{"tinypkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n"},
		{"tinypkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: proctor-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var rec strings.Builder
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, f := range files {
		w, _ := zw.CreateHeader(&zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: time.Unix(1700000000, 0)})
		io.WriteString(w, f.body)
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&rec, "%s,sha256=%s,%d\n", f.name, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	rec.WriteString("tinypkg-1.0.dist-info/RECORD,,\n")
	w, _ := zw.CreateHeader(&zip.FileHeader{Name: "tinypkg-1.0.dist-info/RECORD", Method: zip.Deflate, Modified: time.Unix(1700000000, 0)})
	io.WriteString(w, rec.String())
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// serve starts p (a Recorder or Replayer) on a loopback listener and
// returns its address; the test closes it.
func serve(t testing.TB, p interface {
	Serve(net.Listener) error
	Close() error
}) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Serve(l) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return l.Addr().String()
}

// newRecorder is a Recorder on the world, through its host map, trusting
// its CA, with no resolver (a name not mapped does not resolve).
func newRecorder(t testing.TB, st *Store, w *world, dec *decisions, tweak func(*RecordOptions)) (*Recorder, string) {
	t.Helper()
	o := RecordOptions{Allow: w.allow(t), HostMap: w.hostMap, Roots: []*x509.Certificate{w.ca.cert}, Record: dec.record,
		Resolve: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return nil, fmt.Errorf("no such host %s", host)
		}}
	if tweak != nil {
		tweak(&o)
	}
	r, err := NewRecorder(st, o)
	if err != nil {
		t.Fatal(err)
	}
	return r, serve(t, r)
}

// client is a Go HTTP client through the proxy at addr, trusting bundle
// only.
func client(t testing.TB, addr string, bundle []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("no certificate in the bundle")
	}
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		Proxy:           http.ProxyURL(&url.URL{Scheme: "http", Host: addr}),
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
}

// response is what a client saw: status, every header, body.
type response struct {
	Status int
	Header http.Header
	Body   string
}

func do(t testing.TB, c *http.Client, method, u string, body string, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading: %v", method, u, err)
	}
	return response{resp.StatusCode, resp.Header, string(b)}
}

// requireTool skips a test that needs a program, except under CI
// (CI=true) or with PROCTOR_NO_SKIP set, where the skip is a failure.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		skipOrFail(t, "needs "+name+" (scripts/deps.sh installs it)")
	}
	return p
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root (a sandbox with its own network namespace)")
	}
}

func skipOrFail(t *testing.T, reason string) {
	t.Helper()
	if os.Getenv("CI") == "true" || os.Getenv("PROCTOR_NO_SKIP") != "" {
		t.Fatalf("cannot run here: %s (under CI a skipped test is a failure)", reason)
	}
	t.Skip(reason)
}

// openStore is a fresh store in a test directory.
func openStore(t testing.TB) *Store {
	t.Helper()
	st, err := OpenStore(filepath.Join(t.TempDir(), "hermetic"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// trustOf is the store CA's trust over an empty system bundle.
func trustOf(t testing.TB, st *Store) Trust {
	t.Helper()
	ca, err := st.CA()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ca.Trust(nil)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// String shows a response without a long body.
func (r response) String() string {
	b := r.Body
	if len(b) > 200 {
		b = fmt.Sprintf("%s... (%d bytes, sha256 %x)", b[:200], len(r.Body), sha256.Sum256([]byte(r.Body)))
	}
	return fmt.Sprintf("{%d %v %q}", r.Status, r.Header, b)
}

// session is one recording of the test's internet: the recorder, what it
// reported, the trust a client needs, and a Go client through it.
type session struct {
	t    testing.TB
	st   *Store
	w    *world
	rd   decisions
	rec  *Recorder
	addr string
	tr   Trust
	c    *http.Client
}

func record(t testing.TB, tweak func(*RecordOptions)) *session {
	t.Helper()
	s := &session{t: t, st: openStore(t), w: newWorld(t)}
	s.rec, s.addr = newRecorder(t, s.st, s.w, &s.rd, tweak)
	s.tr = trustOf(t, s.st)
	s.c = client(t, s.addr, s.tr.Bundle)
	return s
}

// finish closes the recorder and returns its recording.
func (s *session) finish() *Recording {
	s.t.Helper()
	if err := s.rec.Close(); err != nil {
		s.t.Fatal(err)
	}
	r, err := s.rec.Recording()
	if err != nil {
		s.t.Fatal(err)
	}
	return r
}

// replaying is a Replayer of a recording, serving on loopback, what it
// reported, and a Go client through it.
type replaying struct {
	*Replayer
	pd   decisions
	addr string
	c    *http.Client
}

func (s *session) replay(r *Recording) *replaying {
	s.t.Helper()
	ca, err := s.st.CA()
	if err != nil {
		s.t.Fatal(err)
	}
	p := &replaying{}
	if p.Replayer, err = NewReplayer(r, ca, ReplayOptions{Record: p.pd.record}); err != nil {
		s.t.Fatal(err)
	}
	p.addr = serve(s.t, p.Replayer)
	p.c = client(s.t, p.addr, s.tr.Bundle)
	return p
}

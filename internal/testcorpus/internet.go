package testcorpus

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Internet stands in, on the host's loopback, for the hosts a published
// Terminal-Bench 2 verifier fetches its tools from:
//
//	curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
//	source $HOME/.local/bin/env
//	uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA
//
// astral.sh serves an installer that fetches a uv release from github.com;
// the release holds a small uvx of ours (Python) that resolves its
// requirements on pypi.org's simple index, downloads the wheels from
// files.pythonhosted.org, unpacks them and runs the tool. The pytest wheel
// is made at test time from a Debian root's pytest (with pluggy, iniconfig
// and packaging inside it); pytest-json-ctrf's is a plugin of ours that
// writes the CTRF report the real one writes. Every name is served over
// HTTPS by one server, its certificate signed by a CA of the test's own:
// a harness reaches it with HostMap (as curl --resolve) and trusts it with
// CAFile. Nothing here reaches the real hosts.
type Internet struct {
	// CAFile is the PEM certificate of the CA that signed the server's.
	CAFile string
	// Addr is the server's address; HostMap maps every name to it,
	// NAME=ADDR as proctor's --host-map takes it.
	Addr    string
	HostMap []string

	srv *http.Server
	mu  sync.Mutex
	got []string // request URLs served, in order
}

// InternetHosts are the names Internet serves.
var InternetHosts = []string{"astral.sh", "github.com", "pypi.org", "files.pythonhosted.org"}

// Served returns the URLs fetched so far.
func (n *Internet) Served() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got)
}

// StartInternet starts the stand-in, its wheels made from the Python
// packages in sitePackages (a Debian root's /usr/lib/python3/dist-packages
// holding pytest); it stops when the test ends.
func StartInternet(t testing.TB, sitePackages string) *Internet {
	t.Helper()
	dir := t.TempDir()
	caCert, caKey := newCA(t)
	caFile := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caCert.Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	leaf := newLeaf(t, caCert, caKey, InternetHosts)
	pytestWheel := wheel(t, "pytest", "8.4.1", sitePackages, []string{"pytest", "_pytest", "py.py", "pluggy", "iniconfig", "packaging"}, nil, "")
	ctrfWheel := wheel(t, "pytest_json_ctrf", "0.3.5", "", nil, map[string]string{"pytest_json_ctrf.py": ctrfPlugin}, "[pytest11]\nctrf = pytest_json_ctrf\n")
	uvTar := uvRelease(t)
	files := map[string][]byte{
		"astral.sh/uv/0.9.5/install.sh": []byte(installSh),
		"github.com/astral-sh/uv/releases/download/0.9.5/uv-x86_64-unknown-linux-gnu.tar.gz": uvTar,
		"files.pythonhosted.org/packages/pytest-8.4.1-py3-none-any.whl":                      pytestWheel,
		"files.pythonhosted.org/packages/pytest_json_ctrf-0.3.5-py3-none-any.whl":            ctrfWheel,
	}
	index := map[string]string{"pytest": "pytest-8.4.1-py3-none-any.whl", "pytest-json-ctrf": "pytest_json_ctrf-0.3.5-py3-none-any.whl"}
	n := &Internet{CAFile: caFile}
	mux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := strings.Cut(r.Host, ":")
		n.mu.Lock()
		n.got = append(n.got, "https://"+host+r.URL.Path)
		n.mu.Unlock()
		if host == "pypi.org" && strings.HasPrefix(r.URL.Path, "/simple/") {
			name := strings.Trim(strings.TrimPrefix(r.URL.Path, "/simple/"), "/")
			f, ok := index[name]
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"https://files.pythonhosted.org/packages/%s\">%s</a></body></html>\n", f, f)
			return
		}
		b, ok := files[host+r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.Addr = l.Addr().String()
	for _, h := range InternetHosts {
		n.HostMap = append(n.HostMap, h+"="+n.Addr)
	}
	n.srv = &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf}}, ReadHeaderTimeout: 10 * time.Second}
	go n.srv.ServeTLS(l, "", "")
	t.Cleanup(func() { n.srv.Close() })
	return n
}

// Stop stops the server: what a replay must do without.
func (n *Internet) Stop() { n.srv.Close() }

func newCA(t testing.TB) (*x509.Certificate, *ecdsa.PrivateKey) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "proctor test internet CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func newLeaf(t testing.TB, ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string) tls.Certificate {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: key}
}

// wheel makes a wheel of the named entries of dir (directories whole),
// and of extra files, with entry points when given.
func wheel(t testing.TB, name, version, dir string, entries []string, extra map[string]string, entryPoints string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, b []byte) {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(b)
	}
	for _, e := range entries {
		root := filepath.Join(dir, e)
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "__pycache__" {
				return filepath.SkipDir
			}
			if !d.Type().IsRegular() {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			add(filepath.ToSlash(rel), b)
			return nil
		})
		if err != nil {
			t.Fatalf("making the %s wheel from %s: %v", name, dir, err)
		}
	}
	for f, b := range extra {
		add(f, []byte(b))
	}
	info := fmt.Sprintf("%s-%s.dist-info/", name, version)
	add(info+"METADATA", []byte(fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", strings.ReplaceAll(name, "_", "-"), version)))
	add(info+"WHEEL", []byte("Wheel-Version: 1.0\nGenerator: proctor-testcorpus\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
	if entryPoints != "" {
		add(info+"entry_points.txt", []byte(entryPoints))
	}
	add(info+"RECORD", nil)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// uvRelease is the stand-in uv release: a directory holding uv and uvx.
func uvRelease(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{{"uvx", uvxPy}, {"uv", "#!/bin/sh\necho 'uv 0.9.5 (proctor stand-in)'\n"}} {
		name := "uv-x86_64-unknown-linux-gnu/" + f.name
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(f.body)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// installSh installs uv as astral's installer does: into ~/.local/bin,
// with an env file to source.
const installSh = `#!/bin/sh
set -eu
bin="$HOME/.local/bin"
mkdir -p "$bin"
curl -LsSf https://github.com/astral-sh/uv/releases/download/0.9.5/uv-x86_64-unknown-linux-gnu.tar.gz | tar -xzf - -C "$bin" --strip-components=1
cat > "$bin/env" <<'EOF'
case ":${PATH}:" in *":$HOME/.local/bin:"*) ;; *) export PATH="$HOME/.local/bin:$PATH" ;; esac
EOF
echo "installing to $bin"
echo "everything's installed!"
`

// uvxPy is the stand-in uvx: uvx [-p VERSION] [-w REQ]... TOOL [ARGS...]
// resolves each REQ (NAME==VERSION) and TOOL on the simple index, unpacks
// the wheels into a cache and runs TOOL as a module with them on its
// path, under pythonVERSION.
const uvxPy = `#!/usr/bin/env python3
import hashlib, html.parser, io, os, sys, urllib.request, zipfile

args = sys.argv[1:]
python, reqs = "python3", []
while args and args[0].startswith("-"):
    a = args.pop(0)
    if a in ("-p", "--python"):
        python = "python" + args.pop(0)
    elif a in ("-w", "--with"):
        reqs.append(args.pop(0))
    else:
        sys.exit("uvx: unsupported option " + a)
if not args:
    sys.exit("uvx: no tool given")
tool = args.pop(0)
reqs.append(tool)

class Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links = []
    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.links += [v for k, v in attrs if k == "href"]

target = os.path.expanduser("~/.cache/uvx/" + hashlib.sha256(" ".join(sorted(reqs)).encode()).hexdigest()[:16])
os.makedirs(target, exist_ok=True)
for req in reqs:
    name, _, version = req.partition("==")
    page = urllib.request.urlopen("https://pypi.org/simple/%s/" % name.lower().replace("_", "-"), timeout=30).read().decode()
    p = Links()
    p.feed(page)
    want = [l for l in p.links if not version or ("-%s-" % version) in l]
    if not want:
        sys.exit("uvx: no distribution of %s" % req)
    data = urllib.request.urlopen(want[0], timeout=60).read()
    zipfile.ZipFile(io.BytesIO(data)).extractall(target)
env = dict(os.environ)
env["PYTHONPATH"] = target + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
os.execvpe(python, [python, "-m", tool.split("==")[0].replace("-", "_")] + args, env)
`

// ctrfPlugin writes a CTRF report as pytest-json-ctrf 0.3.5 does:
// pytest --ctrf FILE.
const ctrfPlugin = `import json, time

def pytest_addoption(parser):
    parser.addoption("--ctrf", action="store", default=None, help="write a CTRF report to this file")

def pytest_configure(config):
    path = config.getoption("--ctrf")
    if path:
        config.pluginmanager.register(_Report(path), "ctrf-report")

class _Report:
    def __init__(self, path):
        self.path, self.tests, self.start = path, [], int(time.time() * 1000)

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            status = report.outcome if report.outcome in ("passed", "failed", "skipped") else "other"
            self.tests.append({"name": report.nodeid, "status": status, "duration": int(report.duration * 1000)})

    def pytest_sessionfinish(self, session):
        stop = int(time.time() * 1000)
        count = lambda s: sum(1 for t in self.tests if t["status"] == s)
        summary = {"tests": len(self.tests), "passed": count("passed"), "failed": count("failed"),
                   "skipped": count("skipped"), "pending": 0, "other": count("other"), "start": self.start, "stop": stop}
        with open(self.path, "w") as f:
            json.dump({"results": {"tool": {"name": "pytest"}, "summary": summary, "tests": self.tests}}, f, indent=2)
`

package standin

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
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Hosts are the names the stand-in serves.
var Hosts = []string{"astral.sh", "github.com", "pypi.org", "files.pythonhosted.org"}

// Options say how to start the stand-in.
type Options struct {
	// SitePackages holds the Python packages the pytest wheel is made of:
	// pytest, _pytest, py.py, pluggy, iniconfig and packaging (a Debian
	// root's /usr/lib/python3/dist-packages with python3-pytest).
	SitePackages string
	// Dir keeps the CA (ca.pem, and its key ca-key.pem, mode 0600): a CA
	// found there is used again, so that a harness that keys its
	// recordings by the CA's certificate finds them again. Required.
	Dir string
	// Addr is where to listen (default 127.0.0.1:0, a free port).
	Addr string
	// Log, if set, gets a line for every request served.
	Log io.Writer
}

// Internet is a running stand-in. Its fields are set by Start and not
// changed after; its methods are safe for concurrent use.
type Internet struct {
	// CAFile is the PEM certificate of the CA that signed the server's.
	CAFile string
	// Addr is the server's address; HostMap maps every name to it,
	// NAME=ADDR as proctor's --host-map takes it.
	Addr    string
	HostMap []string

	srv *http.Server
	log io.Writer

	mu  sync.Mutex
	got []string // request URLs served, in order
}

// Start starts the stand-in; Close stops it.
func Start(o Options) (*Internet, error) {
	if o.Dir == "" {
		return nil, errors.New("standin: no directory for the CA")
	}
	caCert, caKey, err := loadOrMakeCA(o.Dir)
	if err != nil {
		return nil, err
	}
	leaf, err := newLeaf(caCert, caKey, Hosts)
	if err != nil {
		return nil, err
	}
	pytestWheel, err := wheel("pytest", "8.4.1", o.SitePackages, []string{"pytest", "_pytest", "py.py", "pluggy", "iniconfig", "packaging"}, nil, "")
	if err != nil {
		return nil, err
	}
	ctrfWheel, err := wheel("pytest_json_ctrf", "0.3.5", "", nil, map[string]string{"pytest_json_ctrf.py": ctrfPlugin}, "[pytest11]\nctrf = pytest_json_ctrf\n")
	if err != nil {
		return nil, err
	}
	uvTar, err := uvRelease()
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		"astral.sh/uv/0.9.5/install.sh": []byte(installSh),
		"github.com/astral-sh/uv/releases/download/0.9.5/uv-x86_64-unknown-linux-gnu.tar.gz": uvTar,
		"files.pythonhosted.org/packages/pytest-8.4.1-py3-none-any.whl":                      pytestWheel,
		"files.pythonhosted.org/packages/pytest_json_ctrf-0.3.5-py3-none-any.whl":            ctrfWheel,
	}
	index := map[string]string{"pytest": "pytest-8.4.1-py3-none-any.whl", "pytest-json-ctrf": "pytest_json_ctrf-0.3.5-py3-none-any.whl"}
	n := &Internet{CAFile: filepath.Join(o.Dir, "ca.pem"), log: o.Log}
	addr := o.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	n.Addr = l.Addr().String()
	for _, h := range Hosts {
		n.HostMap = append(n.HostMap, h+"="+n.Addr)
	}
	n.srv = &http.Server{Handler: n.handler(files, index), TLSConfig: &tls.Config{Certificates: []tls.Certificate{leaf}},
		ReadHeaderTimeout: 10 * time.Second}
	go n.srv.ServeTLS(l, "", "")
	return n, nil
}

// handler serves files by host and path, and pypi.org's simple index.
func (n *Internet) handler(files map[string][]byte, index map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := strings.Cut(r.Host, ":")
		url := "https://" + host + r.URL.Path
		n.mu.Lock()
		n.got = append(n.got, url)
		n.mu.Unlock()
		status := http.StatusOK
		defer func() {
			if n.log != nil {
				fmt.Fprintf(n.log, "standin: %s %s %d\n", r.Method, url, status)
			}
		}()
		if host == "pypi.org" && strings.HasPrefix(r.URL.Path, "/simple/") {
			name := strings.Trim(strings.TrimPrefix(r.URL.Path, "/simple/"), "/")
			f, ok := index[name]
			if !ok {
				status = http.StatusNotFound
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(w, "<!DOCTYPE html><html><body><a href=\"https://files.pythonhosted.org/packages/%s\">%s</a></body></html>\n", f, f)
			return
		}
		b, ok := files[host+r.URL.Path]
		if !ok {
			status = http.StatusNotFound
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(b)
	})
}

// Served returns the URLs fetched so far.
func (n *Internet) Served() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.got)
}

// Close stops the server: what a replay must do without. Closing again
// does nothing.
func (n *Internet) Close() error {
	err := n.srv.Close()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// loadOrMakeCA reads the CA kept in dir, or makes one there (valid for a
// year; one that has less than a day left is made again).
func loadOrMakeCA(dir string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certFile, keyFile := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if pair, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil {
		cert, err := x509.ParseCertificate(pair.Certificate[0])
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if err == nil && ok && cert.IsCA && time.Until(cert.NotAfter) > 24*time.Hour {
			return cert, key, nil
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "proctor stand-in internet CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return nil, nil, err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func newLeaf(ca *x509.Certificate, caKey *ecdsa.PrivateKey, names []string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: ca.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der, ca.Raw}, PrivateKey: key}, nil
}

// wheel makes a wheel of the named entries of dir (directories whole),
// and of extra files, with entry points when given.
func wheel(name, version, dir string, entries []string, extra map[string]string, entryPoints string) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	add := func(name string, b []byte) error {
		w, err := zw.Create(name)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
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
			return add(filepath.ToSlash(rel), b)
		})
		if err != nil {
			return nil, fmt.Errorf("making the %s wheel from %s: %w", name, dir, err)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(extra)) {
		if err := add(f, []byte(extra[f])); err != nil {
			return nil, err
		}
	}
	info := fmt.Sprintf("%s-%s.dist-info/", name, version)
	meta := map[string]string{
		"METADATA": fmt.Sprintf("Metadata-Version: 2.1\nName: %s\nVersion: %s\n", strings.ReplaceAll(name, "_", "-"), version),
		"WHEEL":    "Wheel-Version: 1.0\nGenerator: proctor-standin\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	}
	if entryPoints != "" {
		meta["entry_points.txt"] = entryPoints
	}
	meta["RECORD"] = ""
	for _, f := range []string{"METADATA", "WHEEL", "entry_points.txt", "RECORD"} {
		if b, ok := meta[f]; ok {
			if err := add(info+f, []byte(b)); err != nil {
				return nil, err
			}
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// uvRelease is the stand-in uv release: a directory holding uv and uvx.
func uvRelease() ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct{ name, body string }{{"uvx", uvxPy}, {"uv", "#!/bin/sh\necho 'uv 0.9.5 (proctor stand-in)'\n"}} {
		name := "uv-x86_64-unknown-linux-gnu/" + f.name
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(f.body)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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

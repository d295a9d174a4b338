package hermetic

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCAMadeOnceAndPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	// Several stores on one directory, at once: one CA.
	var wg sync.WaitGroup
	certs := make([][]byte, 4)
	for i := range certs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := OpenStore(dir)
			if err != nil {
				t.Error(err)
				return
			}
			ca, err := st.CA()
			if err != nil {
				t.Error(err)
				return
			}
			certs[i] = ca.CertPEM()
		}()
	}
	wg.Wait()
	for _, c := range certs[1:] {
		if !bytes.Equal(c, certs[0]) {
			t.Fatal("two CAs for one store")
		}
	}
	for name, want := range map[string]os.FileMode{filepath.Join(dir, caDir): 0o700 | fs.ModeDir, filepath.Join(dir, caDir, caFile): 0o600} {
		fi, err := os.Lstat(name)
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", name, fi.Mode(), err, want)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(dir, caDir))
	if len(ents) != 1 {
		t.Errorf("the CA directory holds %d entries, want only %s", len(ents), caFile)
	}
	ca, _ := (&Store{dir: dir}).CA()
	c := ca.Certificate()
	if !c.IsCA || !c.MaxPathLenZero || c.MaxPathLen != 0 || c.NotAfter.Before(time.Now().AddDate(10, 0, 0)) {
		t.Errorf("CA certificate: IsCA %v, MaxPathLen %d/%v, NotAfter %v", c.IsCA, c.MaxPathLen, c.MaxPathLenZero, c.NotAfter)
	}
}

// TestCAKeyFileMustBePrivate: a CA file or directory others may read, a
// link, or another user's file is refused, never used.
func TestCAKeyFileMustBePrivate(t *testing.T) {
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"file readable by the group", func(t *testing.T, d string) { os.Chmod(filepath.Join(d, caDir, caFile), 0o640) }},
		{"file readable by all", func(t *testing.T, d string) { os.Chmod(filepath.Join(d, caDir, caFile), 0o644) }},
		{"directory open to others", func(t *testing.T, d string) { os.Chmod(filepath.Join(d, caDir), 0o755) }},
		{"file is a link", func(t *testing.T, d string) {
			f := filepath.Join(d, caDir, caFile)
			os.Rename(f, f+".real")
			os.Symlink(caFile+".real", f)
		}},
		{"file of another user", func(t *testing.T, d string) {
			if os.Geteuid() != 0 {
				skipOrFail(t, "needs root to give a file away")
			}
			if err := os.Chown(filepath.Join(d, caDir, caFile), 4242, 4242); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			st, _ := OpenStore(dir)
			if _, err := st.CA(); err != nil {
				t.Fatal(err)
			}
			tt.damage(t, dir)
			st2, _ := OpenStore(dir)
			if _, err := st2.CA(); !errors.Is(err, ErrCAKeyExposed) {
				t.Errorf("CA: %v, want ErrCAKeyExposed", err)
			}
			if _, err := NewRecorder(st2, RecordOptions{Record: func(Decision) {}}); !errors.Is(err, ErrCAKeyExposed) {
				t.Errorf("NewRecorder: %v, want ErrCAKeyExposed", err)
			}
		})
	}
}

func TestTrust(t *testing.T) {
	st := openStore(t)
	ca, _ := st.CA()
	system := []byte("-----BEGIN CERTIFICATE-----\nsystem roots as the image has them\n-----END CERTIFICATE-----")
	tests := []struct {
		name   string
		system []byte
	}{{"absent", nil}, {"empty", []byte{}}, {"no final newline", system}, {"final newline", append(bytes.Clone(system), '\n')}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := ca.Trust(tt.system)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(tr.Bundle, tt.system) || !bytes.HasSuffix(tr.Bundle, ca.CertPEM()) {
				t.Errorf("bundle is not the system's then the CA's:\n%s", tr.Bundle)
			}
			if rest := bytes.TrimPrefix(tr.Bundle, tt.system); len(tt.system) > 0 && rest[0] != '\n' && tt.system[len(tt.system)-1] != '\n' {
				t.Error("the CA's certificate is glued to the system bundle's last line")
			}
			if tr.Paths[0] != "/etc/ssl/certs/ca-certificates.crt" || len(tr.Paths) != len(BundlePaths) {
				t.Errorf("paths %v", tr.Paths)
			}
			env := strings.Join(tr.Env, "\n")
			for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PIP_CERT"} {
				if !strings.Contains(env, k+"="+BundlePaths[0]+"\n") && !strings.HasSuffix(env, k+"="+BundlePaths[0]) {
					t.Errorf("env lacks %s: %v", k, tr.Env)
				}
			}
		})
	}
	if _, err := ca.Trust(make([]byte, maxSystemBundle+1)); err == nil {
		t.Error("an oversized system bundle was taken")
	}
}

// TestLeafCertificates: a host's certificate verifies with the combined
// bundle, for its name only, and not without the CA.
func TestLeafCertificates(t *testing.T) {
	st := openStore(t)
	ca, _ := st.CA()
	tr, _ := ca.Trust(nil)
	with := x509.NewCertPool()
	with.AppendCertsFromPEM(tr.Bundle)
	without, err := x509.SystemCertPool()
	if err != nil {
		without = x509.NewCertPool()
	}
	other := openStore(t) // another store's CA
	oca, _ := other.CA()
	otr, _ := oca.Trust(nil)
	another := x509.NewCertPool()
	another.AppendCertsFromPEM(otr.Bundle)
	tests := []struct {
		host, verifyAs string
		roots          *x509.CertPool
		ok             bool
	}{
		{"astral.sh", "astral.sh", with, true},
		{"astral.sh", "index.example.org", with, false},
		{"astral.sh", "astral.sh", without, false},
		{"astral.sh", "astral.sh", another, false},
		{"10.1.2.3", "10.1.2.3", with, true},
		{"[2001:db8::1]", "2001:db8::1", with, true},
		{"10.1.2.3", "10.1.2.4", with, false},
	}
	for _, tt := range tests {
		leaf, err := ca.leaf(tt.host)
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Leaf.Verify(x509.VerifyOptions{DNSName: tt.verifyAs, Roots: tt.roots})
		if (err == nil) != tt.ok {
			t.Errorf("certificate for %s verified as %s: %v, want ok %v", tt.host, tt.verifyAs, err, tt.ok)
		}
		if leaf.Leaf.IsCA || leaf.Leaf.NotAfter.After(time.Now().Add(leafLifetime+time.Minute)) {
			t.Errorf("certificate for %s: IsCA %v, NotAfter %v", tt.host, leaf.Leaf.IsCA, leaf.Leaf.NotAfter)
		}
	}
}

// caKeyForms are the forms the store's CA key could leak in: its PEM
// block, its DER, and its private scalar in hex and base64.
func caKeyForms(t *testing.T, st *Store) map[string][]byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(st.Dir(), caDir, caFile))
	if err != nil {
		t.Fatal(err)
	}
	forms := map[string][]byte{}
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if blk.Type != "PRIVATE KEY" {
			continue
		}
		forms["pem"] = pem.EncodeToMemory(blk)
		forms["der"] = blk.Bytes
		k, _ := x509.ParsePKCS8PrivateKey(blk.Bytes)
		d := k.(*ecdsa.PrivateKey).D.Bytes()
		forms["scalar"] = d
		forms["scalar hex"] = []byte(hex.EncodeToString(d))
		forms["scalar base64"] = []byte(base64.StdEncoding.EncodeToString(d))
		forms["der base64"] = []byte(base64.StdEncoding.EncodeToString(blk.Bytes)[:40])
	}
	if len(forms) == 0 {
		t.Fatal("no key in the CA file")
	}
	return forms
}

// TestCAKeyNeverLeaves: after recording, saving, exporting and replaying,
// the CA key is in no file of the store but the CA's own, in no exported
// file, in no Trust, and in no Decision.
func TestCAKeyNeverLeaves(t *testing.T) {
	s := record(t, nil)
	st, tr := s.st, s.tr
	for _, cl := range worldCalls {
		do(t, s.c, cl.method, cl.url, cl.body, cl.hdr...)
	}
	r := s.finish()
	if err := st.Save("k", r); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := r.Export(out); err != nil {
		t.Fatal(err)
	}
	rp := s.replay(r)
	do(t, rp.c, "GET", "https://astral.sh/uv/0.9.5/install.sh", "")
	do(t, rp.c, "GET", "https://astral.sh/not-recorded", "")
	rp.Close()

	forms := caKeyForms(t, st)
	look := func(where string, b []byte) {
		for name, f := range forms {
			if bytes.Contains(b, f) {
				t.Errorf("the CA key (%s) is in %s", name, where)
			}
		}
	}
	scanned := 0
	for _, root := range []string{st.Dir(), out} {
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			if p == filepath.Join(st.Dir(), caDir) {
				return filepath.SkipDir // the CA's own directory, 0700
			}
			if d.Type().IsRegular() {
				b, _ := os.ReadFile(p)
				look(p, b)
				scanned++
			}
			return nil
		})
	}
	if scanned < 4 {
		t.Fatalf("scanned only %d files", scanned)
	}
	look("the trust bundle", tr.Bundle)
	look("the trust env", []byte(strings.Join(tr.Env, "\n")))
	look("the index", r.Index())
	for _, d := range append(s.rd.list(), rp.pd.list()...) {
		look("a decision", []byte(d.Reason+d.URL+d.SNI))
	}
}

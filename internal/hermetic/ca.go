package hermetic

import (
	"bytes"
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
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// caFile is the store's CA: its certificate and its private key, in one
// file only its owner may read, in a directory only its owner may enter.
const (
	caDir  = "ca"
	caFile = "ca.pem"
)

// Validity of what the CA signs.
const (
	caLifetime   = 20 * 365 * 24 * time.Hour
	leafLifetime = 7 * 24 * time.Hour
	backdate     = time.Hour // clocks inside and outside may differ a little
)

// CA is the store's certificate authority for grading: it signs, in the
// host process, the certificate of every host a grader sandbox reaches
// through a Recorder or a Replayer. Its private key is read from (or
// created in) the store's ca directory and never leaves the process: not
// in an error, a log, a Trust or a Recording. Only its certificate goes
// out, through Trust, into the grader sandbox's trust.
//
// A CA is safe for concurrent use. Leaf certificates are made on demand,
// one per host, with a key made in memory when the CA is loaded.
type CA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	leafKey *ecdsa.PrivateKey

	mu     sync.Mutex
	leaves map[string]*tls.Certificate // by canonical host
}

// loadCA reads the CA in dir/ca, or makes one there if there is none.
// Two processes making one at once end with the same CA: the file is
// linked into place only if absent.
func loadCA(dir string) (*CA, error) {
	d := filepath.Join(dir, caDir)
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("hermetic: creating the CA directory: %w", err)
	}
	if err := checkPrivate(d, true); err != nil {
		return nil, err
	}
	name := filepath.Join(d, caFile)
	ca, err := readCA(name)
	if !errors.Is(err, fs.ErrNotExist) {
		return ca, err
	}
	b, err := newCAFile()
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(d, ".ca-*") // mode 0600
	if err != nil {
		return nil, fmt.Errorf("hermetic: writing the CA: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(b)
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return nil, fmt.Errorf("hermetic: writing the CA: %w", err)
	}
	if err := os.Link(tmp.Name(), name); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("hermetic: writing the CA: %w", err)
	}
	return readCA(name)
}

// checkPrivate refuses a CA file or directory that is not the caller's
// own, or that others may read, write or (a directory) enter, or that is
// a symbolic link.
func checkPrivate(name string, dir bool) error {
	fi, err := os.Lstat(name)
	if err != nil {
		return err
	}
	return checkPrivateInfo(name, fi, dir)
}

func checkPrivateInfo(name string, fi fs.FileInfo, dir bool) error {
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case dir && !fi.IsDir(), !dir && !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is not a plain %s", ErrCAKeyExposed, name, map[bool]string{true: "directory", false: "file"}[dir])
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%w: %s has mode %v (want no access for group and others)", ErrCAKeyExposed, name, fi.Mode().Perm())
	case st != nil && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%w: %s belongs to uid %d, not %d", ErrCAKeyExposed, name, st.Uid, os.Geteuid())
	}
	return nil
}

// newCAFile makes a CA: an ECDSA P-256 key and a self-signed certificate
// that may sign only end-entity certificates, PEM-encoded together.
func newCAFile() ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("hermetic: making the CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{Organization: []string{"Proctor"}, CommonName: "Proctor hermetic grading CA"},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("hermetic: making the CA certificate: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("hermetic: encoding the CA key: %w", err)
	}
	var b bytes.Buffer
	pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: der})
	pem.Encode(&b, &pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	return b.Bytes(), nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("hermetic: no randomness: " + err.Error()) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

// readCA reads and checks a CA file. Its errors never quote the file.
func readCA(name string) (*CA, error) {
	if err := checkPrivate(name, false); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat() // the file opened, not one put in its place since
	if err != nil {
		return nil, err
	}
	if err := checkPrivateInfo(name, fi, false); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("hermetic: reading the CA: %w", err)
	}
	bad := func(why string) error { return fmt.Errorf("%w: %s: %s", ErrBadCA, name, why) }
	var cert *x509.Certificate
	var key *ecdsa.PrivateKey
	for rest := b; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		switch blk.Type {
		case "CERTIFICATE":
			if cert, err = x509.ParseCertificate(blk.Bytes); err != nil {
				return nil, bad("certificate does not parse")
			}
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
			if err != nil {
				return nil, bad("key does not parse")
			}
			if key, _ = k.(*ecdsa.PrivateKey); key == nil {
				return nil, bad("key is not ECDSA")
			}
		}
	}
	switch {
	case cert == nil || key == nil:
		return nil, bad("want one certificate and one key")
	case !cert.IsCA:
		return nil, bad("the certificate is not a CA's")
	case !key.PublicKey.Equal(cert.PublicKey):
		return nil, bad("the key is not the certificate's")
	case time.Now().After(cert.NotAfter.Add(-leafLifetime)):
		return nil, bad("the certificate has expired (remove the file to make another)")
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("hermetic: making the leaf key: %w", err)
	}
	return &CA{cert: cert, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		key: key, leafKey: leafKey, leaves: map[string]*tls.Certificate{}}, nil
}

// CertPEM returns the CA's certificate, PEM-encoded.
func (ca *CA) CertPEM() []byte { return bytes.Clone(ca.certPEM) }

// Certificate returns the CA's certificate.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// leaf returns a certificate for host (canonical: a name, a dotted quad or
// a bracketed IPv6 address), signed by the CA, valid for leafLifetime.
func (ca *CA) leaf(host string) (*tls.Certificate, error) {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if c, ok := ca.leaves[host]; ok && time.Now().Add(time.Hour).Before(c.Leaf.NotAfter) {
		return c, nil
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{Organization: []string{"Proctor hermetic grading"}, CommonName: host},
		NotBefore:    now.Add(-backdate),
		NotAfter:     now.Add(leafLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	if a, err := netip.ParseAddr(trimBrackets(host)); err == nil {
		tmpl.IPAddresses = []net.IP{a.AsSlice()}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &ca.leafKey.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("hermetic: signing a certificate for %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("hermetic: signing a certificate for %s: %w", host, err)
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: ca.leafKey, Leaf: leaf}
	ca.leaves[host] = c
	return c, nil
}

func trimBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}

// BundlePaths are where Linux distributions and their TLS libraries look
// for the system's CA bundle (Go's crypto/x509 list: Debian and Ubuntu,
// Fedora and RHEL 6, openSUSE, OpenELEC, CentOS and RHEL 7, Alpine). The
// first is where Trust.Env points.
var BundlePaths = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem",
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// BundleEnv are the variables Trust.Env sets to BundlePaths[0]: OpenSSL,
// Go, Python's ssl, uv and rustls-native-certs (SSL_CERT_FILE); requests
// (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE); curl built with a bundle path
// (CURL_CA_BUNDLE); pip (PIP_CERT); Node, in addition to its own roots
// (NODE_EXTRA_CA_CERTS); git (GIT_SSL_CAINFO); npm (NPM_CONFIG_CAFILE);
// cargo (CARGO_HTTP_CAINFO); the AWS SDKs (AWS_CA_BUNDLE); Deno
// (DENO_CERT).
var BundleEnv = []string{
	"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "NODE_EXTRA_CA_CERTS",
	"GIT_SSL_CAINFO", "NPM_CONFIG_CAFILE", "CARGO_HTTP_CAINFO", "AWS_CA_BUNDLE", "DENO_CERT",
}

// maxSystemBundle bounds the system bundle Trust accepts.
const maxSystemBundle = 16 << 20

// Trust is what a grader sandbox needs to trust the CA: Bundle, to bind
// read-only at BundlePaths[0] and at every other of Paths that the
// environment has, and Env, to add to the sandbox's environment.
type Trust struct {
	Bundle []byte   // the system bundle, then the CA's certificate (PEM)
	Paths  []string // BundlePaths
	Env    []string // each of BundleEnv set to BundlePaths[0]
}

// Trust returns the trust of a grader sandbox whose environment's own
// bundle (its /etc/ssl/certs/ca-certificates.crt, or another of
// BundlePaths) holds system; nil or empty when it has none. The bytes of
// system are kept as they are; the CA's certificate follows them, after
// a comment line. It holds no key.
func (ca *CA) Trust(system []byte) (Trust, error) {
	if len(system) > maxSystemBundle {
		return Trust{}, fmt.Errorf("hermetic: the environment's CA bundle is over %d bytes", maxSystemBundle)
	}
	var b bytes.Buffer
	b.Write(system)
	if len(system) > 0 && system[len(system)-1] != '\n' {
		b.WriteByte('\n')
	}
	b.WriteString("# Proctor hermetic grading CA: trusted inside this grader sandbox only\n")
	b.Write(ca.certPEM)
	env := make([]string, len(BundleEnv))
	for i, k := range BundleEnv {
		env[i] = k + "=" + BundlePaths[0]
	}
	return Trust{Bundle: b.Bytes(), Paths: append([]string(nil), BundlePaths...), Env: env}, nil
}

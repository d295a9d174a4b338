package cluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// pki is a test CA with a server certificate for 127.0.0.1 and a client
// certificate, all as PEM files in one directory.
type pki struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey string
	// OtherCA signed nothing here: a bundle that must not verify the server.
	OtherCA string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	p := pki{
		CA: filepath.Join(dir, "ca.pem"), OtherCA: filepath.Join(dir, "other-ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		ClientCert: filepath.Join(dir, "client.pem"), ClientKey: filepath.Join(dir, "client-key.pem"),
	}
	caKey, caCert := newCA(t, "proctor test CA", p.CA)
	newCA(t, "some other CA", p.OtherCA)
	leaf(t, caKey, caCert, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "proctor test server"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, p.ServerCert, p.ServerKey)
	leaf(t, caKey, caCert, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "proctor test worker"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, p.ClientCert, p.ClientKey)
	return p
}

var serial int64

func template(t *testing.T, tmpl *x509.Certificate) *x509.Certificate {
	t.Helper()
	serial++
	tmpl.SerialNumber = big.NewInt(serial)
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(time.Hour)
	return tmpl
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newCA(t *testing.T, name, certFile string) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key := newKey(t)
	tmpl := template(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: name},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certFile, "CERTIFICATE", der)
	return key, cert
}

func leaf(t *testing.T, caKey *ecdsa.PrivateKey, ca *x509.Certificate, tmpl *x509.Certificate, certFile, keyFile string) {
	t.Helper()
	key := newKey(t)
	tmpl = template(t, tmpl)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, certFile, "CERTIFICATE", der)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writePEM(t, keyFile, "PRIVATE KEY", kder)
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// withUserinfo returns the server's client URL with userinfo added.
func withUserinfo(t *testing.T, s *Server, userinfo string) string {
	t.Helper()
	scheme, host, ok := strings.Cut(s.ClientURL(), "://")
	if !ok {
		t.Fatalf("ClientURL %q: no scheme", s.ClientURL())
	}
	return scheme + "://" + userinfo + "@" + host
}

// dial connects to url with the files of a, returning Connect's error.
func dial(t *testing.T, url string, a ClientAuth) (*Conn, error) {
	t.Helper()
	nopts, err := a.Options()
	if err != nil {
		t.Fatalf("Options: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, url, WithNATS(append(nopts, nats.Timeout(5*time.Second))...))
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, err
}

func TestServeTLSToken(t *testing.T) {
	p := newPKI(t)
	const token = "t0ken-for-the-test"
	s, err := Serve(ServeOptions{StoreDir: t.TempDir(), Port: -1, TLSCert: p.ServerCert, TLSKey: p.ServerKey, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !strings.HasPrefix(s.ClientURL(), "tls://127.0.0.1:") {
		t.Fatalf("ClientURL %s: want tls://127.0.0.1:PORT", s.ClientURL())
	}
	good := withUserinfo(t, s, token)

	t.Run("ca and token", func(t *testing.T) {
		c, err := dial(t, good, ClientAuth{CA: p.CA})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Status(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("nats scheme upgrades to tls", func(t *testing.T) {
		if _, err := dial(t, strings.Replace(good, "tls://", "nats://", 1), ClientAuth{CA: p.CA}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("in process", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		c, err := s.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	})
	for _, tc := range []struct {
		name string
		url  string
		auth ClientAuth
		want string // in the error
	}{
		{"no ca", good, ClientAuth{}, "certificate signed by unknown authority"},
		{"another ca", good, ClientAuth{CA: p.OtherCA}, "certificate signed by unknown authority"},
		{"wrong token", withUserinfo(t, s, "not-the-token"), ClientAuth{CA: p.CA}, "Authorization Violation"},
		{"no token", s.ClientURL(), ClientAuth{CA: p.CA}, "Authorization Violation"},
		{"user and password", withUserinfo(t, s, "alice:pa55word"), ClientAuth{CA: p.CA}, "Authorization Violation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dial(t, tc.url, tc.auth)
			if err == nil {
				t.Fatal("connected")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q: want %q in it", msg, tc.want)
			}
			for _, secret := range []string{"not-the-token", "pa55word", token} {
				if strings.Contains(msg, secret) {
					t.Fatalf("error %q shows the secret %q", msg, secret)
				}
			}
		})
	}
}

func TestServeMutualTLS(t *testing.T) {
	p := newPKI(t)
	s, err := Serve(ServeOptions{StoreDir: t.TempDir(), Port: -1, TLSCert: p.ServerCert, TLSKey: p.ServerKey, TLSClientCA: p.CA})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })

	if _, err := dial(t, s.ClientURL(), ClientAuth{CA: p.CA}); err == nil {
		t.Fatal("a client without a certificate connected")
	}
	// A certificate the client CA did not sign: the server's own is one.
	if _, err := dial(t, s.ClientURL(), ClientAuth{CA: p.CA, Cert: p.ServerCert, Key: p.ServerKey}); err == nil {
		t.Fatal("a client with a server-only certificate connected")
	}
	c, err := dial(t, s.ClientURL(), ClientAuth{CA: p.CA, Cert: p.ClientCert, Key: p.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	ic, err := s.Connect(ctx)
	if err != nil {
		t.Fatalf("in process: %v", err)
	}
	ic.Close()
}

func TestServeTLSOptionErrors(t *testing.T) {
	p := newPKI(t)
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pem")
	if err := os.WriteFile(junk, []byte("not pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, tc := range []struct {
		name string
		opts ServeOptions
		want string
	}{
		{"cert without key", ServeOptions{TLSCert: p.ServerCert}, "TLSCert: needs TLSKey"},
		{"key without cert", ServeOptions{TLSKey: p.ServerKey}, "TLSKey: needs TLSCert"},
		{"client ca without cert", ServeOptions{TLSClientCA: p.CA}, "TLSClientCA: needs TLSCert and TLSKey"},
		{"missing cert", ServeOptions{TLSCert: missing, TLSKey: p.ServerKey}, "TLSCert " + missing + ": no such file or directory"},
		{"cert is a directory", ServeOptions{TLSCert: dir, TLSKey: p.ServerKey}, "TLSCert " + dir + ": is a directory"},
		{"junk cert", ServeOptions{TLSCert: junk, TLSKey: p.ServerKey}, "TLSCert " + junk + ", TLSKey " + p.ServerKey + ": "},
		{"key of another cert", ServeOptions{TLSCert: p.ServerCert, TLSKey: p.ClientKey}, "TLSCert " + p.ServerCert + ", TLSKey " + p.ClientKey + ": "},
		{"junk client ca", ServeOptions{TLSCert: p.ServerCert, TLSKey: p.ServerKey, TLSClientCA: junk}, "TLSClientCA " + junk + ": no PEM certificate"},
		{"token with a space", ServeOptions{Token: "a b"}, "Token: contains white space"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.StoreDir, tc.opts.Port = t.TempDir(), -1
			s, err := Serve(tc.opts)
			if err == nil {
				s.Close()
				t.Fatal("served")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line with %q", msg, tc.want)
			}
		})
	}
}

func TestClientAuthNKey(t *testing.T) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	other, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	otherSeed, err := other.Seed()
	if err != nil {
		t.Fatal(err)
	}
	otherFile := filepath.Join(t.TempDir(), "other.nk")
	if err := os.WriteFile(otherFile, otherSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	url := rawServer(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})

	if _, err := dial(t, url, ClientAuth{NKey: seedFile}); err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]ClientAuth{"no nkey": {}, "another nkey": {NKey: otherFile}} {
		t.Run(name, func(t *testing.T) {
			_, err := dial(t, url, a)
			if err == nil || !strings.Contains(err.Error(), "Authorization Violation") {
				t.Fatalf("error %v: want an authorization violation", err)
			}
		})
	}
	if _, err := (ClientAuth{NKey: otherFile + ".missing"}).Options(); err == nil {
		t.Fatal("a missing seed file gave options")
	}
}

func TestClientAuthCreds(t *testing.T) {
	must := func(kp nkeys.KeyPair, err error) nkeys.KeyPair {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	pubOf := func(kp nkeys.KeyPair) string {
		t.Helper()
		p, err := kp.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	encode := func(c interface {
		Encode(nkeys.KeyPair) (string, error)
	}, kp nkeys.KeyPair) string {
		t.Helper()
		s, err := c.Encode(kp)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	op := must(nkeys.CreateOperator())
	sys := must(nkeys.CreateAccount())
	acc := must(nkeys.CreateAccount())
	user := must(nkeys.CreateUser())

	oc := jwt.NewOperatorClaims(pubOf(op))
	oc.SystemAccount = pubOf(sys)
	opClaims, err := jwt.DecodeOperatorClaims(encode(oc, op))
	if err != nil {
		t.Fatal(err)
	}
	resolver := &server.MemAccResolver{}
	sc := jwt.NewAccountClaims(pubOf(sys))
	if err := resolver.Store(pubOf(sys), encode(sc, op)); err != nil {
		t.Fatal(err)
	}
	ac := jwt.NewAccountClaims(pubOf(acc))
	ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	if err := resolver.Store(pubOf(acc), encode(ac, op)); err != nil {
		t.Fatal(err)
	}
	uc := jwt.NewUserClaims(pubOf(user))
	seed, err := user.Seed()
	if err != nil {
		t.Fatal(err)
	}
	creds, err := jwt.FormatUserConfig(encode(uc, acc), seed)
	if err != nil {
		t.Fatal(err)
	}
	credsFile := filepath.Join(t.TempDir(), "user.creds")
	if err := os.WriteFile(credsFile, creds, 0o600); err != nil {
		t.Fatal(err)
	}
	url := rawServer(t, &server.Options{
		TrustedOperators: []*jwt.OperatorClaims{opClaims},
		AccountResolver:  resolver,
		SystemAccount:    pubOf(sys),
	})

	if _, err := dial(t, url, ClientAuth{Creds: credsFile}); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, url, ClientAuth{}); err == nil {
		t.Fatal("connected without credentials")
	}
}

// rawServer starts a NATS server with JetStream from opts on a random
// loopback port and returns its client URL.
func rawServer(t *testing.T, opts *server.Options) string {
	t.Helper()
	opts.Host, opts.Port = "127.0.0.1", -1
	opts.JetStream, opts.StoreDir = true, t.TempDir()
	opts.NoSigs, opts.NoLog = true, true
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	return ns.ClientURL()
}

func TestClientAuthCheck(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name  string
		auth  ClientAuth
		field string // of the *AuthFileError, "" for another error
		want  string
	}{
		{"creds and nkey", ClientAuth{Creds: file, NKey: file}, "", "exclusive"},
		{"cert without key", ClientAuth{Cert: file}, "", "needs its key"},
		{"key without cert", ClientAuth{Key: file}, "", "needs its key"},
		{"missing creds", ClientAuth{Creds: missing}, "Creds", "Creds file " + missing + ": no such file or directory"},
		{"missing nkey", ClientAuth{NKey: missing}, "NKey", "no such file"},
		{"missing ca", ClientAuth{CA: missing}, "CA", "no such file"},
		{"missing key", ClientAuth{Cert: file, Key: missing}, "Key", "no such file"},
		{"ca is a directory", ClientAuth{CA: dir}, "CA", "is a directory"},
		{"nkey file without a seed", ClientAuth{NKey: file}, "NKey", "NKey file " + file},
		{"ca without a certificate", ClientAuth{CA: file}, "CA", "CA file " + file + ": no PEM certificate in it"},
		{"cert and key not pem", ClientAuth{Cert: file, Key: file}, "Cert", "Cert file " + file + ": with key " + file + ": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.auth.Options()
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want %q in it", err, tc.want)
			}
			var fe *AuthFileError
			if errors.As(err, &fe) != (tc.field != "") || tc.field != "" && fe.Field != tc.field {
				t.Fatalf("error %q (%T): want an *AuthFileError for field %q", err, err, tc.field)
			}
		})
	}
	if opts, err := (ClientAuth{}).Options(); err != nil || len(opts) != 0 {
		t.Fatalf("zero ClientAuth: %d options, %v; want none", len(opts), err)
	}
}

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://alice:s3cret@host:4222", "nats://alice:xxxxx@host:4222"},
		{"nats://t0ken@host:4222", "nats://xxxxx@host:4222"},
		{"tls://alice:p@ss@host", "tls://alice:xxxxx@host"},
		{"alice:s3cret@host:4222", "alice:xxxxx@host:4222"},
		{"nats://a:b@h1,nats://t@h2", "nats://a:xxxxx@h1,nats://xxxxx@h2"},
	} {
		if got := redactURL(tc.in); got != tc.want {
			t.Errorf("redactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestConnectErrorHidesPassword(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, url := range []string{
		"nats://alice:s3cret-pw@127.0.0.1:1",
		"nats://s3cret-pw@127.0.0.1:1",
		"nats://alice:s3cret-pw@bad host:4222", // a url.Error quotes the URL
	} {
		_, err := Connect(ctx, url, WithNATS(nats.Timeout(time.Second)))
		if err == nil {
			t.Fatalf("%s: connected", url)
		}
		if strings.Contains(err.Error(), "s3cret-pw") {
			t.Errorf("error %q shows the password", err)
		}
	}
}

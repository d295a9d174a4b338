package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// runCluster runs `proctor cluster ARGS...` and returns its exit code and
// what it wrote to stdout and stderr.
func runCluster(ctx context.Context, args ...string) (int, string, string) {
	var stdout, stderr syncBuffer
	c := newClusterCmd(&stdout, &stderr)
	c.SilenceErrors, c.SilenceUsage = true, true
	c.SetArgs(args)
	err := c.ExecuteContext(ctx)
	var msg bytes.Buffer
	code := reportError(err, &msg)
	stderr.Write(msg.Bytes())
	return code, stdout.String(), stderr.String()
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

func TestClusterClientFlags(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, filepath.Join(dir, "f"), "x", 0o600)
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // the error line
	}{
		{"creds and nkey", []string{"--nats-creds", file, "--nats-nkey", file}, exitUsage, "--nats-creds and --nats-nkey: give one or the other"},
		{"cert without key", []string{"--nats-cert", file}, exitUsage, "--nats-cert: needs --nats-key"},
		{"key without cert", []string{"--nats-key", file}, exitUsage, "--nats-key: needs --nats-cert"},
		{"missing creds", []string{"--nats-creds", missing}, exitSetup, "--nats-creds " + missing + ": no such file or directory"},
		{"missing nkey", []string{"--nats-nkey", missing}, exitSetup, "--nats-nkey " + missing + ": no such file or directory"},
		{"missing ca", []string{"--nats-ca", missing}, exitSetup, "--nats-ca " + missing + ": no such file or directory"},
		{"missing key", []string{"--nats-cert", file, "--nats-key", missing}, exitSetup, "--nats-key " + missing + ": no such file or directory"},
		{"ca is a directory", []string{"--nats-ca", dir}, exitSetup, "--nats-ca " + dir + ": is a directory"},
		{"nkey without a seed", []string{"--nats-nkey", file}, exitSetup, "--nats-nkey " + file + ": "},
		{"ca without a certificate", []string{"--nats-ca", file}, exitSetup, "--nats-ca " + file + ": no PEM certificate in it"},
		{"cert and key not pem", []string{"--nats-cert", file, "--nats-key", file}, exitSetup, "--nats-cert " + file + ": with key " + file + ": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"status", "--cluster", "nats://127.0.0.1:1"}, tc.args...)
			code, _, stderr := runCluster(t.Context(), args...)
			if code != tc.code || !strings.HasPrefix(stderr, "proctor: error: "+tc.want) || strings.Count(stderr, "\n") != 1 {
				t.Fatalf("exit %d, stderr %q; want %d and one line starting %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}

func TestClusterServeFlags(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	secret := "0123456789abcdef"
	token := writeFile(t, filepath.Join(dir, "token"), secret+"\n", 0o600)
	open := writeFile(t, filepath.Join(dir, "token-open"), secret+"\n", 0o644)
	empty := writeFile(t, filepath.Join(dir, "token-empty"), "\nsecond line\n", 0o600)
	slash := writeFile(t, filepath.Join(dir, "token-slash"), "a/b\n", 0o600)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // the error line
		hint string
	}{
		{"cert without key", []string{"--tls-cert", cert}, exitUsage, "--tls-cert: needs --tls-key", ""},
		{"key without cert", []string{"--tls-key", key}, exitUsage, "--tls-key: needs --tls-cert", ""},
		{"client ca without cert", []string{"--tls-client-ca", cert}, exitUsage, "--tls-client-ca: needs --tls-cert and --tls-key", ""},
		{"open beyond loopback", []string{"--listen", "0.0.0.0:4222"}, exitUsage,
			"--listen 0.0.0.0:4222: not a loopback address; add --tls-cert and --tls-key, and --auth-token-file or --tls-client-ca", "beyond loopback"},
		{"token without tls beyond loopback", []string{"--listen", "[::]:4222", "--auth-token-file", token}, exitUsage,
			"--listen [::]:4222: not a loopback address; add --tls-cert and --tls-key", ""},
		{"tls without auth beyond loopback", []string{"--listen", "192.0.2.1:4222", "--tls-cert", cert, "--tls-key", key}, exitUsage,
			"--listen 192.0.2.1:4222: not a loopback address; add --auth-token-file or --tls-client-ca", ""},
		{"missing cert", []string{"--tls-cert", filepath.Join(dir, "nope"), "--tls-key", key}, exitSetup,
			"--tls-cert " + filepath.Join(dir, "nope") + ": no such file or directory", ""},
		{"token file readable by others", []string{"--auth-token-file", open}, exitSetup,
			"--auth-token-file " + open + ": readable by group or others (mode 0644)", "chmod 600 " + open},
		{"empty token", []string{"--auth-token-file", empty}, exitSetup, "--auth-token-file " + empty + ": the first line is empty", ""},
		{"token not for a url", []string{"--auth-token-file", slash}, exitSetup, "--auth-token-file " + slash + ": the token has a character", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--store", t.TempDir()}, tc.args...)
			code, _, stderr := runCluster(t.Context(), args...)
			if code != tc.code || !strings.HasPrefix(stderr, "proctor: error: "+tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.want)
			}
			if tc.hint != "" && !strings.Contains(stderr, "\nproctor: hint: "+tc.hint) {
				t.Fatalf("stderr %q: want the hint %q", stderr, tc.hint)
			}
			if strings.Contains(stderr, secret) {
				t.Fatalf("stderr %q shows the token", stderr)
			}
		})
	}
}

// Beyond loopback is allowed once TLS and a token or a client CA are
// given (checked without listening there).
func TestListenAddrSecured(t *testing.T) {
	for _, tc := range []struct {
		tls, auth bool
		ok        bool
	}{{false, false, false}, {true, false, false}, {false, true, false}, {true, true, true}} {
		host, port, err := listenAddr("0.0.0.0:4222", tc.tls, tc.auth)
		if (err == nil) != tc.ok || tc.ok && (host != "0.0.0.0" || port != 4222) {
			t.Errorf("tls %v auth %v: %s:%d, %v; want ok %v", tc.tls, tc.auth, host, port, err, tc.ok)
		}
	}
	if _, _, err := listenAddr("127.0.0.1:4222", false, false); err != nil {
		t.Errorf("loopback without TLS: %v", err)
	}
}

// A server with TLS and a token, and status reaching it with --nats-ca and
// the token in the URL, all on loopback.
func TestClusterServeTLSToken(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	secret := "s3cret-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	token := writeFile(t, filepath.Join(dir, "token"), secret+"\n", 0o600)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan string)
	go func() {
		code, stdout, stderr := runCluster(ctx, "serve", "--store", filepath.Join(dir, "store"), "--listen", addr,
			"--tls-cert", cert, "--tls-key", key, "--auth-token-file", token)
		done <- strconv.Itoa(code) + "\n" + stdout + stderr
	}()
	defer func() {
		cancel()
		if out := <-done; !strings.HasPrefix(out, "0\n") || !strings.Contains(out, "proctor: cluster serving tls://"+addr+" ") {
			t.Errorf("serve: %q", out)
		}
	}()

	url := "tls://" + secret + "@" + addr
	var code int
	var stdout, stderr string
	for range 100 {
		if code, stdout, stderr = runCluster(t.Context(), "status", "--cluster", url, "--nats-ca", cert); code == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code != 0 || !strings.Contains(stdout, "queue: 0 trial(s)") {
		t.Fatalf("status: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for name, args := range map[string][]string{
		"no ca":       {"--cluster", url},
		"wrong token": {"--cluster", "tls://not-" + secret + "@" + addr, "--nats-ca", cert},
		"no token":    {"--cluster", "tls://" + addr, "--nats-ca", cert},
	} {
		code, _, stderr := runCluster(t.Context(), append([]string{"status"}, args...)...)
		if code != exitSetup || strings.Contains(stderr, secret) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want %d, one line, no token", name, code, stderr, exitSetup)
		}
	}
}

// selfSigned writes a self-signed ECDSA P-256 certificate for 127.0.0.1,
// its own CA, and its key into dir.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "proctor test server"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeFile(t, cert, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), 0o644)
	writeFile(t, key, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})), 0o600)
	return cert, key
}

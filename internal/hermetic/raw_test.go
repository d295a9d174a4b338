package hermetic

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// rawPlain sends req (a whole request, in absolute form) to the proxy at
// addr and returns every byte of the answer, until the connection closes.
func rawPlain(t testing.TB, addr, req string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	return string(b)
}

// connect opens a tunnel to target through the proxy at addr; it returns
// the connection on a 200, or nil and the proxy's whole answer.
func connect(t testing.TB, addr, target string) (net.Conn, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		c.Close()
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		c.Close()
		return nil, resp.Status + "\n" + string(b)
	}
	if br.Buffered() > 0 {
		t.Fatalf("CONNECT %s: bytes after the 200", target)
	}
	return c, ""
}

// rawTLS opens a tunnel to host:443, speaks TLS with serverName trusting
// bundle, sends req and returns every byte of the answer; or the error of
// the handshake.
func rawTLS(t testing.TB, addr, host, serverName string, bundle []byte, req string) (string, error) {
	t.Helper()
	c, refused := connect(t, addr, host+":443")
	if c == nil {
		t.Fatalf("CONNECT %s refused: %s", host, refused)
	}
	defer c.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	tc := tls.Client(c, &tls.Config{ServerName: serverName, RootCAs: pool})
	if err := tc.Handshake(); err != nil {
		return "", err
	}
	if _, err := io.WriteString(tc, req); err != nil {
		return "", err
	}
	b, err := io.ReadAll(tc)
	if err != nil && !strings.Contains(err.Error(), "close_notify") && len(b) == 0 {
		return string(b), err
	}
	return string(b), nil
}

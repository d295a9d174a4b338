package hermetic

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"github.com/proctor-sandbox/proctor/internal/netpolicy"
)

// droppedRequestHeaders are not sent upstream: hop-by-hop and proxy
// headers, framing (the recorder frames the body itself), and the headers
// that would make the answer depend on what the client already holds or
// can decode: ranges and conditions (the recording keeps whole
// representations, which are always a valid answer to them) and
// Accept-Encoding (the upstream is asked for identity).
var droppedRequestHeaders = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true,
	"Proxy-Authorization": true, "Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Content-Length": true, "Expect": true, "Accept-Encoding": true,
	"Range": true, "If-Range": true, "If-Modified-Since": true, "If-None-Match": true, "If-Match": true,
	"If-Unmodified-Since": true,
}

// fetch sends q to the first of addrs that answers and reads the response
// into an exchange, its body into the store. An error is a reason to
// refuse the request with: it never quotes the body.
func (r *Recorder) fetch(q *request, addrs []netip.AddrPort) (Exchange, string, error) {
	ctx, cancel := context.WithTimeout(r.ctx, r.o.Limits.UpstreamTime)
	defer cancel()
	conn, addr, err := r.dial(ctx, addrs)
	if err != nil {
		return Exchange{}, "", fmt.Errorf("dial: %v", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if q.scheme == "https" {
		tc := tls.Client(conn, &tls.Config{ServerName: trimBrackets(q.host), RootCAs: r.trust,
			NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12})
		hctx, hcancel := context.WithTimeout(ctx, r.o.Limits.DialTimeout)
		err := tc.HandshakeContext(hctx)
		hcancel()
		if err != nil {
			return Exchange{}, addr, fmt.Errorf("upstream TLS: %v", err)
		}
		conn = tc
	}
	bw := bufio.NewWriter(conn)
	writeRequest(bw, q)
	if err := bw.Flush(); err != nil {
		return Exchange{}, addr, fmt.Errorf("upstream: writing the request: %v", err)
	}
	resp, err := readResponse(bufio.NewReader(conn), q.method)
	if err != nil {
		return Exchange{}, addr, fmt.Errorf("upstream: %v", err)
	}
	defer resp.Body.Close()
	e := Exchange{Method: q.method, URL: q.url, Accept: q.accept, RequestSHA256: q.bodySHA,
		RequestBytes: int64(len(q.body)), Status: resp.StatusCode, Header: keptHeader(resp.Header, q.method)}
	if q.method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified {
		return e, addr, nil
	}
	w, err := newBlobWriter(r.store.BlobDir())
	if err != nil {
		return Exchange{}, addr, &storeError{err}
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, r.o.Limits.MaxBody+1))
	switch {
	case n > r.o.Limits.MaxBody:
		w.abort()
		return Exchange{}, addr, fmt.Errorf("response body over %d bytes", r.o.Limits.MaxBody)
	case err != nil:
		w.abort()
		return Exchange{}, addr, fmt.Errorf("upstream: reading the body: %v", err)
	case n == 0:
		w.abort()
		return e, addr, nil
	}
	sum, err := w.commit()
	if err != nil {
		return Exchange{}, addr, &storeError{err}
	}
	e.BodySHA256, e.BodyBytes = sum, n
	return e, addr, nil
}

// dial connects to the first of addrs that answers; only these checked
// addresses are dialled, as ip:port.
func (r *Recorder) dial(ctx context.Context, addrs []netip.AddrPort) (net.Conn, string, error) {
	var last error
	for _, a := range addrs {
		dctx, cancel := context.WithTimeout(ctx, r.o.Limits.DialTimeout)
		c, err := r.o.Dial(dctx, "tcp", a.String())
		cancel()
		if err == nil {
			return c, a.String(), nil
		}
		last = err
	}
	if last == nil {
		last = errors.New("no address")
	}
	return nil, "", last
}

// writeRequest writes q upstream in origin form: the target as the client
// sent it, Host from the URL, the client's headers but the dropped ones
// (sorted by name), Accept-Encoding: identity, the body with its length,
// and Connection: close.
func writeRequest(w *bufio.Writer, q *request) {
	def := map[string]int{"http": 80, "https": 443}[q.scheme]
	fmt.Fprintf(w, "%s %s HTTP/1.1\r\nHost: %s\r\n", q.method, q.target, authorityOf(q.host, q.port, def))
	drop := map[string]bool{}
	for _, v := range q.header["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			drop[textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(f))] = true
		}
	}
	names := make([]string, 0, len(q.header))
	for k := range q.header {
		if !droppedRequestHeaders[k] && !drop[k] {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range q.header[k] {
			fmt.Fprintf(w, "%s: %s\r\n", k, v)
		}
	}
	w.WriteString("Accept-Encoding: identity\r\n")
	if len(q.body) > 0 || q.method == http.MethodPost || q.method == http.MethodPut || q.method == http.MethodPatch {
		w.WriteString("Content-Length: " + strconv.Itoa(len(q.body)) + "\r\n")
	}
	w.WriteString("Connection: close\r\n\r\n")
	w.Write(q.body)
}

// readResponse reads the upstream's response as netpolicy's proxy does
// (no 1xx, no 101), and refuses a status over 599.
func readResponse(br *bufio.Reader, method string) (*http.Response, error) {
	resp, err := netpolicy.ReadResponse(br, &http.Request{Method: method})
	if err == nil && resp.StatusCode > 599 {
		resp.Body.Close()
		return nil, fmt.Errorf("status %d", resp.StatusCode)
	}
	return resp, err
}

// keptHeader is the response header a recording keeps (keptHeaders),
// sorted by name, values in order. A value that is not printable ASCII, or
// over 8 KiB, is left out.
func keptHeader(h http.Header, method string) [][2]string {
	out := [][2]string{}
	names := make([]string, 0, len(h))
	for k := range h {
		if keptHeaders[k] && (k != "Content-Length" || method == http.MethodHead) {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range h[k] {
			if len(v) <= maxHeaderVal && printable(v) && len(out) < maxHeaders {
				out = append(out, [2]string{k, v})
			}
		}
	}
	return out
}

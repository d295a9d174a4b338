package imagebuild

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/netpolicy"
)

// ProxyAddr is where a networked RUN step finds the build's egress proxy,
// on its own loopback (the same address as an agent's).
const ProxyAddr = "127.0.0.1:3128"

// maxDownload bounds an ADD URL download.
const maxDownload = 8 << 30

// buildNet is a build's network: none, or an allow-list egress proxy that
// every RUN step and every ADD URL goes through, each decision written
// to the build log.
type buildNet struct {
	allow []string
	proxy *netpolicy.Proxy
	log   func(format string, args ...any)

	mu      sync.Mutex
	last    map[string]netpolicy.Decision // the last decision per host:port, for ADD's messages
	allowed int
	denied  int
}

func newBuildNet(allow []string, resolve func(context.Context, string) ([]netip.Addr, error), logf func(string, ...any)) (*buildNet, error) {
	n := &buildNet{allow: allow, log: logf, last: map[string]netpolicy.Decision{}}
	if len(allow) == 0 {
		return n, nil
	}
	list, err := netpolicy.ParseAllowList(allow)
	if err != nil {
		return nil, fmt.Errorf("the build allow-list: %w", err)
	}
	if len(list.Loopback()) > 0 {
		return nil, fmt.Errorf("the build allow-list: %w", unsupported("loopback hosts (%s) for a build", strings.Join(allow, ", ")))
	}
	n.proxy, err = netpolicy.New(netpolicy.Options{Allow: list, Record: n.record, Resolve: resolve})
	if err != nil {
		return nil, fmt.Errorf("starting the build's egress proxy: %w", err)
	}
	return n, nil
}

func (n *buildNet) on() bool { return n.proxy != nil }

func (n *buildNet) close() {
	if n.proxy != nil {
		_ = n.proxy.Close()
	}
}

// record writes one proxy decision to the build log.
func (n *buildNet) record(d netpolicy.Decision) {
	verdict := "deny"
	if d.Allowed {
		verdict = "allow"
	}
	n.log("proxy %s %s %s:%d rule=%q addr=%q sni=%q reason=%q up=%d down=%d ms=%d",
		verdict, d.Method, d.Host, d.Port, d.Rule, d.Addr, d.SNI, d.Reason, d.BytesUp, d.BytesDown, d.Duration.Milliseconds())
	n.mu.Lock()
	defer n.mu.Unlock()
	if d.Allowed {
		n.allowed++
	} else {
		n.denied++
	}
	n.last[fmt.Sprintf("%s:%d", d.Host, d.Port)] = d
}

// env is what points a RUN step at the proxy.
func (n *buildNet) env() []string {
	if !n.on() {
		return nil
	}
	u := "http://" + ProxyAddr
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+u, strings.ToLower(k)+"="+u)
	}
	return append(env, "NO_PROXY=localhost,127.0.0.1,::1", "no_proxy=localhost,127.0.0.1,::1")
}

// fetch downloads an ADD URL through the proxy, over an in-process socket
// pair: no listener is opened anywhere. It writes the body to f and
// returns the Last-Modified time (zero when absent).
func (n *buildNet) fetch(ctx context.Context, raw string, f *os.File) (time.Time, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return time.Time{}, fmt.Errorf("ADD %s: not an http or https URL", raw)
	}
	if !n.on() {
		return time.Time{}, fmt.Errorf("ADD %s: %w: the build has no network (hint: --allow-host %s)", raw, ErrNetwork, u.Hostname())
	}
	l := newPipeListener()
	done := make(chan struct{})
	go func() { defer close(done); _ = n.proxy.Serve(l) }()
	defer func() { l.Close(); <-done }()
	tr := &http.Transport{
		Proxy:       http.ProxyURL(&url.URL{Scheme: "http", Host: ProxyAddr}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return l.dial() },
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirect is the server's answer: not followed
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return time.Time{}, err
	}
	start := time.Now()
	resp, err := client.Do(req)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		// The proxy records a request when it ends: a refusal closes the
		// connection, so its decision follows the answer closely.
		if resp != nil {
			resp.Body.Close()
		}
		tr.CloseIdleConnections()
		if d, ok := n.waitDecision(strings.ToLower(u.Hostname())+":"+port, start); ok && !d.Allowed {
			return time.Time{}, fmt.Errorf("ADD %s: %w: %s (hint: --allow-host %s)", raw, ErrNetwork, d.Reason, u.Hostname())
		}
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("ADD %s: %w", raw, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return time.Time{}, fmt.Errorf("ADD %s: the server answered %s", raw, resp.Status)
	}
	k, err := io.Copy(f, io.LimitReader(resp.Body, maxDownload+1))
	if err != nil {
		return time.Time{}, fmt.Errorf("ADD %s: %w", raw, err)
	}
	if k > maxDownload {
		return time.Time{}, fmt.Errorf("ADD %s: larger than %d bytes", raw, int64(maxDownload))
	}
	mt, _ := http.ParseTime(resp.Header.Get("Last-Modified"))
	return mt, nil
}

// waitDecision waits (a few seconds at most) for the proxy's decision on
// a request to hostport made at or after start.
func (n *buildNet) waitDecision(hostport string, start time.Time) (netpolicy.Decision, bool) {
	for range 200 {
		n.mu.Lock()
		d, ok := n.last[hostport]
		n.mu.Unlock()
		if ok && !d.Time.Before(start) {
			return d, true
		}
		time.Sleep(10 * time.Millisecond)
	}
	return netpolicy.Decision{}, false
}

// urlName is the file name an ADD URL gets in a destination directory.
func urlName(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		if b := path.Base(u.Path); b != "." && b != "/" && b != "" {
			return b
		}
	}
	return "__unnamed__"
}

func isURL(s string) bool { return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") }

// isGit reports a source BuildKit would fetch with git.
func isGit(s string) bool {
	return strings.HasPrefix(s, "git@") || strings.HasPrefix(s, "git://") || strings.HasSuffix(strings.SplitN(s, "#", 2)[0], ".git") && strings.Contains(s, "://")
}

// pipeListener hands the proxy connections made in this process: each
// dial is one end of a unix socket pair.
type pipeListener struct {
	ch     chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{ch: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) dial() (net.Conn, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	conn := func(fd int) (net.Conn, error) {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		return net.FileConn(f)
	}
	a, err := conn(fds[0])
	if err != nil {
		unix.Close(fds[1])
		return nil, err
	}
	b, err := conn(fds[1])
	if err != nil {
		a.Close()
		return nil, err
	}
	select {
	case l.ch <- b:
		return a, nil
	case <-l.closed:
		a.Close()
		b.Close()
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "in-process" }

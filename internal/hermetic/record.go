package hermetic

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"

	"github.com/proctor-sandbox/proctor/internal/netpolicy"
)

// RecordOptions configure a Recorder. Record is required.
type RecordOptions struct {
	// Allow is the grader's allow-list (the operator's, plus the hosts the
	// task names). A request or tunnel to a host not on it is refused,
	// and the refusal recorded.
	Allow netpolicy.AllowList
	// HostMap sends a name's connections to another address (--host-map).
	HostMap HostMap
	// Open lets through, besides Allow, any name or IP literal on any port
	// as a wildcard rule would (netpolicy.OpenRule: public addresses only):
	// the operator's open egress, for the pristine verifier's run only.
	Open bool
	// Roots are trusted upstream besides the system's roots (--ca-file).
	Roots []*x509.Certificate
	// Record receives one Decision per request and tunnel, when answered.
	// It is called from many goroutines at once and must not block long;
	// Close waits for every call to return.
	Record func(Decision)
	// Resolve looks a name up (default: net.DefaultResolver, "ip"); Dial
	// connects to an "ip:port" (default: a net.Dialer). Tests replace them.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	Dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	// HostAddrs are the host's own addresses, refused to wildcard rules;
	// nil: the host's interfaces (as netpolicy.Options.HostAddrs).
	HostAddrs []netip.Addr
	Limits    Limits
}

// Recorder is the grader's proxy while the verifier is learned: it
// fetches what the allow-list lets through, from the upstream, and
// records each request and what answered it; bodies go straight into the
// store's blob directory. The client gets exactly what a Replayer of the
// recording will give it: a request asked again gets the answer recorded
// first, unless that was a refusal or a 5xx, which it fetches again.
//
// Serve it on listeners inside the grader's sandbox, Close it when the
// verifier is done, then take the Recording. Its methods are safe for
// concurrent use.
type Recorder struct {
	*front
	o     RecordOptions
	store *Store
	root  *os.Root // the store's blob directory
	trust *x509.CertPool
	pol   netpolicy.AddrPolicy

	mu    sync.Mutex
	ex    map[key]*Exchange
	blobs map[string]bool // bodies counted in total
	total int64
	err   error // the recording went over its limits: for good
}

// NewRecorder returns a Recorder that stores bodies in s and ends TLS
// with s's CA.
func NewRecorder(s *Store, o RecordOptions) (*Recorder, error) {
	ca, err := s.CA()
	if err != nil {
		return nil, err
	}
	pol, err := netpolicy.NewAddrPolicy(o.HostAddrs)
	if err != nil {
		return nil, err
	}
	trust, err := x509.SystemCertPool()
	if err != nil || trust == nil {
		trust = x509.NewCertPool()
	}
	for _, c := range o.Roots {
		trust.AddCert(c)
	}
	if o.Resolve == nil {
		o.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if o.Dial == nil {
		o.Dial = (&net.Dialer{}).DialContext
	}
	o.Allow = append(netpolicy.AllowList(nil), o.Allow...)
	root, err := os.OpenRoot(s.BlobDir())
	if err != nil {
		return nil, fmt.Errorf("hermetic: opening the store's bodies: %w", err)
	}
	r := &Recorder{o: o, store: s, root: root, trust: trust, pol: pol, ex: map[key]*Exchange{}, blobs: map[string]bool{}}
	if r.front, err = newFront(ModeRecord, ca, o.Limits, o.Record, r); err != nil {
		root.Close()
		return nil, err
	}
	r.o.Limits = r.front.lim
	return r, nil
}

// Close stops serving (see Serve) and waits for the last Record call.
func (r *Recorder) Close() error {
	err := r.front.Close()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.root != nil {
		r.root.Close()
		r.root = nil
	}
	return err
}

// Recording returns what was recorded. Call it after Close. A recording
// that went over its limits is an error wrapping ErrRecordingFull.
func (r *Recorder) Recording() (*Recording, error) {
	if !r.isClosed() {
		return nil, errors.New("hermetic: Recording called before Close")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	ex := make([]Exchange, 0, len(r.ex))
	for _, e := range r.ex {
		ex = append(ex, *e)
	}
	return newRecording(ex, r.store.BlobDir())
}

// match finds the rule that lets host:port through: the allow-list's, or
// with Open the open rule.
func (r *Recorder) match(host string, port int) (netpolicy.Rule, bool) {
	if rule, ok := r.o.Allow.Match(host, port); ok {
		return rule, true
	}
	if r.o.Open {
		if _, _, err := netpolicy.ParseHost(host); err == nil {
			return netpolicy.OpenRule(), true
		}
	}
	return netpolicy.Rule{}, false
}

// tunnel opens a tunnel to a host on the allow-list; a refusal is
// recorded as a CONNECT exchange.
func (r *Recorder) tunnel(host string, port int) *answer {
	if _, ok := r.match(host, port); ok {
		return nil
	}
	e, err := r.put(Exchange{Method: http.MethodConnect, URL: tunnelKey(host, port), Status: http.StatusForbidden,
		Refused: "not on the allow-list", Count: 1})
	if err != nil {
		return &answer{status: http.StatusServiceUnavailable, reason: err.Error()}
	}
	return &answer{status: e.Status, reason: e.Refused, recorded: true}
}

// exchange answers a request: from the recording if it holds a final
// answer to it, else from the upstream (or a refusal), recorded.
func (r *Recorder) exchange(w http.ResponseWriter, q *request, d *Decision) {
	e, ok := r.again(q.key())
	if !ok {
		var err error
		if e, err = r.fetchOrRefuse(q, d); err == nil {
			e, err = r.put(e)
		}
		if err != nil {
			d.Status, d.Reason = http.StatusServiceUnavailable, err.Error()
			writeRefusal(w, d.Status, d.Reason)
			return
		}
	}
	d.Recorded = true
	r.serve(w, q, e, d)
}

// serve writes e and fills d in.
func (r *Recorder) serve(w http.ResponseWriter, q *request, e Exchange, d *Decision) {
	d.Status, d.Served = e.Status, e.Refused == ""
	if e.Refused != "" {
		d.Reason = e.Refused
	}
	r.mu.Lock()
	root := r.root
	r.mu.Unlock()
	n, err := writeExchange(w, q.method, &e, root)
	if e.Refused == "" && q.method != http.MethodHead {
		d.BodySHA256, d.BodyBytes = e.BodySHA256, n
	}
	if err != nil {
		r.fail(fmt.Errorf("hermetic: serving a recorded body: %w", err))
		d.Served, d.Reason = false, err.Error()
		r.front.report(d)
		panic(http.ErrAbortHandler) // cut: the client must not take a short body for the whole
	}
}

// again returns the recorded answer to k if it is final, counting the
// request.
func (r *Recorder) again(k key) (Exchange, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.ex[k]
	if e == nil || !e.good() {
		return Exchange{}, false
	}
	e.Count++
	return *e, true
}

// put records e, unless a final answer with its key came first (that one
// is returned, counted). A refusal or 5xx recorded before is replaced.
func (r *Recorder) put(e Exchange) (Exchange, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return Exchange{}, r.err
	}
	k := e.key()
	old := r.ex[k]
	if old != nil && old.good() {
		old.Count++
		return *old, nil
	}
	if old == nil && len(r.ex) >= r.o.Limits.MaxExchanges {
		r.err = fmt.Errorf("%w: over %d distinct requests", ErrRecordingFull, r.o.Limits.MaxExchanges)
		return Exchange{}, r.err
	}
	if e.BodySHA256 != "" && !r.blobs[e.BodySHA256] {
		if r.total+e.BodyBytes > r.o.Limits.MaxTotal {
			r.err = fmt.Errorf("%w: bodies over %d bytes", ErrRecordingFull, r.o.Limits.MaxTotal)
			return Exchange{}, r.err
		}
		r.total += e.BodyBytes
		r.blobs[e.BodySHA256] = true
	}
	if old != nil {
		e.Count = old.Count + 1
	}
	r.ex[k] = &e
	return e, nil
}

// fetchOrRefuse decides on q and, if allowed, fetches it. What comes
// back is the exchange to record: a response, or a refusal. An error is
// the recording's failure (the store could not keep a body).
func (r *Recorder) fetchOrRefuse(q *request, d *Decision) (Exchange, error) {
	e := Exchange{Method: q.method, URL: q.url, Accept: q.accept, RequestSHA256: q.bodySHA,
		RequestBytes: int64(len(q.body)), Header: [][2]string{}, Count: 1}
	refuse := func(status int, reason string) (Exchange, error) {
		e.Status, e.Refused = status, clean(reason)
		return e, nil
	}
	rule, ok := r.match(q.host, q.port)
	if !ok {
		return refuse(http.StatusForbidden, "not on the allow-list")
	}
	d.Rule = rule.String()
	addrs, status, reason := r.addrs(q, rule)
	if reason != "" {
		return refuse(status, reason)
	}
	got, addr, err := r.fetch(q, addrs)
	d.Addr = addr
	var se *storeError
	if errors.As(err, &se) {
		return Exchange{}, r.fail(se.err)
	}
	if err != nil {
		return refuse(http.StatusBadGateway, err.Error())
	}
	got.Count = 1
	return got, nil
}

// fail ends the recording with err, unless it already failed; it returns
// the first failure.
func (r *Recorder) fail(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
	return r.err
}

// Err returns why the recording failed (over its limits, or a body the
// store could not keep), or nil. Once set it stays.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// storeError is a failure of the store, not of the upstream.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }

// addrs are the addresses q may be dialled to: an IP literal's own, a
// mapped name's mapping, or what the name resolves to; each checked as
// netpolicy checks them. A mapped address is the operator's word for the
// name, checked as for an exact rule.
func (r *Recorder) addrs(q *request, rule netpolicy.Rule) ([]netip.AddrPort, int, string) {
	if q.ip.IsValid() {
		if s := r.pol.Refusal(q.ip, rule.Wildcard()); s != "" {
			return nil, http.StatusForbidden, s
		}
		return []netip.AddrPort{netip.AddrPortFrom(q.ip, uint16(q.port))}, 0, ""
	}
	if m, ok := r.o.HostMap[q.host]; ok {
		if s := r.pol.Refusal(m.Addr(), false); s != "" {
			return nil, http.StatusForbidden, "mapped to " + s
		}
		port := q.port
		if m.Port() != 0 {
			port = int(m.Port())
		}
		return []netip.AddrPort{netip.AddrPortFrom(m.Addr(), uint16(port))}, 0, ""
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.o.Limits.DialTimeout)
	defer cancel()
	ips, err := r.o.Resolve(ctx, q.host)
	if err == nil && len(ips) == 0 {
		err = errors.New("no addresses")
	}
	if err != nil {
		return nil, http.StatusBadGateway, "dns: " + err.Error()
	}
	var out []netip.AddrPort
	first := ""
	for _, a := range ips {
		a = a.Unmap()
		if s := r.pol.Refusal(a, rule.Wildcard()); s != "" {
			if first == "" {
				first = s
			}
			continue
		}
		out = append(out, netip.AddrPortFrom(a, uint16(q.port)))
	}
	if len(out) == 0 {
		return nil, http.StatusForbidden, "resolves only to refused addresses: " + first
	}
	return out, 0, ""
}

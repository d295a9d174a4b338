package hermetic

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
)

// ReplayOptions configure a Replayer. Record is required.
type ReplayOptions struct {
	// Record receives one Decision per request and tunnel, when answered;
	// Violation is set on each that the recording does not hold. It is
	// called from many goroutines at once and must not block long; Close
	// waits for every call to return.
	Record func(Decision)
	Limits Limits // the timeouts, MaxConns and MaxRequestBody apply
}

// Replayer is the grader's proxy while it grades: it answers only from a
// Recording and never connects anywhere. A request the recording holds
// gets the recorded answer, byte for byte, however often it is asked; a
// tunnel opens only to a host:port the recording has exchanges with; any
// other request, tunnel, a TLS server name or Host that is not the host
// asked for, is refused (403, 421, or a TLS alert) and reported as a
// violation. A refusal the recording holds is refused again in its words,
// and is not a violation: the pristine run met it too.
//
// Its methods are safe for concurrent use.
type Replayer struct {
	*front
	rec        *Recording
	root       *os.Root
	violations atomic.Int64

	mu  sync.Mutex
	err error // a recorded body that could not be served
}

// Err returns the first recorded body that could not be served (a
// *BlobError: missing, or changed since it was loaded), or nil. A replay
// with an error did not answer as recorded: the grade is not to be
// trusted.
func (p *Replayer) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// NewReplayer returns a Replayer of rec, which must have been read with
// its bodies (Load, LoadDir, Store.Load, Recorder.Recording), ending TLS
// with ca (the store's).
func NewReplayer(rec *Recording, ca *CA, o ReplayOptions) (*Replayer, error) {
	if rec == nil {
		return nil, errors.New("hermetic: no recording to replay")
	}
	if rec.blobDir == "" && len(rec.Blobs()) > 0 {
		return nil, errors.New("hermetic: the recording was read without its bodies (ParseIndex): use Load")
	}
	p := &Replayer{rec: rec}
	if rec.blobDir != "" {
		root, err := os.OpenRoot(rec.blobDir)
		if err != nil {
			return nil, fmt.Errorf("hermetic: opening the recorded bodies: %w", err)
		}
		p.root = root
	}
	record := o.Record
	if record != nil {
		record = func(d Decision) {
			if d.Violation {
				p.violations.Add(1)
			}
			o.Record(d)
		}
	}
	var err error
	if p.front, err = newFront(ModeReplay, ca, o.Limits, record, p); err != nil {
		if p.root != nil {
			p.root.Close()
		}
		return nil, err
	}
	return p, nil
}

// Violations counts the Decisions so far with Violation set.
func (p *Replayer) Violations() int { return int(p.violations.Load()) }

// Close stops serving and waits for the last Record call.
func (p *Replayer) Close() error {
	err := p.front.Close()
	if p.root != nil {
		p.root.Close()
	}
	return err
}

func (p *Replayer) tunnel(host string, port int) *answer {
	k := tunnelKey(host, port)
	if e, ok := p.rec.lookup(key{method: http.MethodConnect, url: k}); ok {
		return &answer{status: e.Status, reason: e.Refused, recorded: true}
	}
	if p.rec.tunnels[k] {
		return nil
	}
	return &answer{status: http.StatusForbidden, reason: "not in the recording: no exchange with " + k}
}

func (p *Replayer) exchange(w http.ResponseWriter, q *request, d *Decision) {
	e, ok := p.rec.lookup(q.key())
	if !ok {
		d.Status, d.Reason = http.StatusForbidden, "not in the recording: "+q.method+" "+q.url
		writeRefusal(w, d.Status, d.Reason)
		return
	}
	d.Recorded, d.Status, d.Served = true, e.Status, e.Refused == ""
	if e.Refused != "" {
		d.Reason = e.Refused
	}
	n, err := writeExchange(w, q.method, e, p.root)
	if e.Refused == "" && q.method != http.MethodHead {
		d.BodySHA256, d.BodyBytes = e.BodySHA256, n
	}
	if err != nil {
		p.mu.Lock()
		if p.err == nil {
			p.err = fmt.Errorf("hermetic: serving a recorded body: %w", err)
		}
		p.mu.Unlock()
		d.Served, d.Reason = false, err.Error()
		p.front.report(d)
		panic(http.ErrAbortHandler) // cut: the client must not take a short body for the whole
	}
}

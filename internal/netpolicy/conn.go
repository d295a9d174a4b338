package netpolicy

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"
)

// activity is the time bytes last moved on any of the connections that
// share it. Safe for concurrent use.
type activity struct {
	base time.Time    // monotonic origin
	last atomic.Int64 // nanoseconds since base
}

func newActivity() *activity {
	return &activity{base: time.Now()}
}

func (a *activity) touch() { a.last.Store(int64(time.Since(a.base))) }

func (a *activity) lastTime() time.Time { return a.base.Add(time.Duration(a.last.Load())) }

// meteredConn counts the bytes written through it and, when idle is set,
// treats a read or write deadline as an idle timeout: a deadline that
// expires while bytes moved on another connection sharing act within the
// last idle is pushed back instead of failing. So a tunnel that moves
// bytes in one direction only stays open, and one that moves none for
// idle is closed.
//
// Read and Write may be called from different goroutines; idle and act
// are set before either is called and not changed while both may run.
// written is updated by the writing goroutine only.
type meteredConn struct {
	net.Conn
	act     *activity
	idle    time.Duration // 0: deadlines are plain deadlines
	written int64
}

// startIdle switches to idle mode with the given timeout.
func (c *meteredConn) startIdle(act *activity, idle time.Duration) {
	c.act, c.idle = act, idle
	act.touch()
	if idle > 0 {
		_ = c.Conn.SetDeadline(time.Now().Add(idle))
	} else {
		_ = c.Conn.SetDeadline(time.Time{})
	}
}

// stopIdle goes back to plain deadlines.
func (c *meteredConn) stopIdle() { c.idle = 0 }

func (c *meteredConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if n > 0 && c.act != nil {
			c.act.touch()
		}
		if n == 0 && err != nil && c.extend(err, c.Conn.SetReadDeadline) {
			continue
		}
		return n, err
	}
}

func (c *meteredConn) Write(p []byte) (int, error) {
	total := 0
	for {
		n, err := c.Conn.Write(p[total:])
		total += n
		c.written += int64(n)
		if n > 0 && c.act != nil {
			c.act.touch()
		}
		if err != nil && total < len(p) && c.extend(err, c.Conn.SetWriteDeadline) {
			continue
		}
		return total, err
	}
}

// extend reports whether err is an idle deadline that should be pushed
// back because of recent activity, and pushes it back.
func (c *meteredConn) extend(err error, set func(time.Time) error) bool {
	if c.idle <= 0 || c.act == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	until := c.act.lastTime().Add(c.idle)
	if !time.Now().Before(until) {
		return false
	}
	return set(until) == nil
}

// headerLimit is the reader under a connection's bufio.Reader. It counts
// the bytes read and, while limit is positive, refuses to read more than
// limit bytes (net/http's connReader does the same for MaxHeaderBytes).
type headerLimit struct {
	r     io.Reader
	n     int64 // bytes read in total
	limit int64 // bytes left while limiting; <0: not limiting
	hit   bool  // the limit stopped a read
}

var errHeaderTooLarge = errors.New("request header too large")

func (l *headerLimit) Read(p []byte) (int, error) {
	if l.limit >= 0 {
		if l.limit == 0 {
			l.hit = true
			return 0, errHeaderTooLarge
		}
		if int64(len(p)) > l.limit {
			p = p[:l.limit]
		}
	}
	n, err := l.r.Read(p)
	l.n += int64(n)
	if l.limit >= 0 {
		l.limit -= int64(n)
	}
	return n, err
}

// readerOnly and writerOnly hide io.WriterTo and io.ReaderFrom so that
// io.CopyBuffer uses the given buffer and our meteredConn methods.
type (
	readerOnly struct{ io.Reader }
	writerOnly struct{ io.Writer }
)

// isTimeout reports whether err is a deadline that expired.
func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

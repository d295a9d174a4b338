package hermetic

import (
	"errors"
	"time"
)

// Limits bound what a Recorder or Replayer holds and waits for. A zero
// field means its default.
type Limits struct {
	MaxBody        int64 // one response body, recorded; default 1 GiB
	MaxTotal       int64 // the distinct bodies of one recording together; default 8 GiB
	MaxRequestBody int64 // one request body, read to match or forward it; default 16 MiB (the most)
	MaxExchanges   int   // distinct requests in one recording; default 10,000 (the most: 100,000)

	HeaderTimeout time.Duration // to read a client's request header; default 30s
	IdleTimeout   time.Duration // a client connection between requests; default 5m
	HelloTimeout  time.Duration // a tunnel's TLS handshake; default 10s
	DialTimeout   time.Duration // recording: to resolve and connect upstream, TLS included; default 10s
	UpstreamTime  time.Duration // recording: for the upstream's whole response; default 10m
	MaxConns      int           // client connections served at once; default 256
}

// Hard ceilings, whatever Limits say: an index holding more is refused.
const (
	maxRequestBody = 16 << 20
	maxBlobBytes   = 64 << 30
	maxReason      = 512 // a recorded refusal's words (netpolicy.Clean gives at most 259)
)

func (l *Limits) fill() error {
	if l.MaxBody < 0 || l.MaxTotal < 0 || l.MaxRequestBody < 0 || l.MaxExchanges < 0 || l.HeaderTimeout < 0 ||
		l.IdleTimeout < 0 || l.HelloTimeout < 0 || l.DialTimeout < 0 || l.UpstreamTime < 0 || l.MaxConns < 0 {
		return errors.New("hermetic: negative limit")
	}
	def(&l.MaxBody, 1<<30)
	def(&l.MaxTotal, 8<<30)
	def(&l.MaxRequestBody, maxRequestBody)
	def(&l.MaxExchanges, 10_000)
	def(&l.HeaderTimeout, 30*time.Second)
	def(&l.IdleTimeout, 5*time.Minute)
	def(&l.HelloTimeout, 10*time.Second)
	def(&l.DialTimeout, 10*time.Second)
	def(&l.UpstreamTime, 10*time.Minute)
	def(&l.MaxConns, 256)
	l.MaxBody = min(l.MaxBody, maxBlobBytes)
	l.MaxRequestBody = min(l.MaxRequestBody, maxRequestBody)
	l.MaxExchanges = min(l.MaxExchanges, maxExchanges)
	return nil
}

func def[T comparable](v *T, d T) {
	var zero T
	if *v == zero {
		*v = d
	}
}

// Mode says which side made a Decision.
type Mode string

// The modes.
const (
	ModeRecord Mode = "record"
	ModeReplay Mode = "replay"
)

// Decision is the record of one request, one tunnel, or one refusal,
// reported through the Record callback of a Recorder or Replayer when the
// answer has been sent. Strings in it may come from the sandbox: treat
// them as data.
type Decision struct {
	Time   time.Time // when the request header had been read
	Mode   Mode
	Method string // "CONNECT" for a tunnel
	URL    string // the absolute URL (see Exchange.URL); "host:port" for a tunnel; "" when unparsable
	Status int    // the status answered; 0 for a tunnel opened or refused by a TLS alert
	// Served: the answer is a response, not a refusal. Recording: fetched
	// upstream or, asked again, given the one fetched before; for a
	// tunnel, its TLS handshake completed. Replaying: answered from the
	// recording (a refusal recorded is replayed as one, Served false).
	Served bool
	// Violation: replaying, a request or tunnel that is not in the
	// recording, or a tunnel whose TLS server name or a request whose Host
	// is not the host asked for. Refused. Never set when recording.
	Violation bool
	// Recorded: replaying, the request matched an exchange of the
	// recording; recording, the answer is in the recording (a response or
	// a refusal).
	Recorded   bool
	Reason     string // why it was refused, or what went wrong; "" otherwise
	Rule       string // recording: the allow-list rule that matched
	Addr       string // recording: the upstream ip:port dialled
	SNI        string // a tunnel's TLS server name
	BodySHA256 string // of the response body sent; "" for none
	BodyBytes  int64
	Duration   time.Duration
}

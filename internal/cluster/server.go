package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// DefaultHost and DefaultPort are where [Serve] listens unless told
// otherwise: loopback only.
const (
	DefaultHost = "127.0.0.1"
	DefaultPort = 4222
)

// ServeOptions configures [Serve].
type ServeOptions struct {
	// StoreDir holds JetStream's files (streams and object stores); it
	// survives a restart. Required.
	StoreDir string
	// Host to listen on; DefaultHost if empty. Serve itself does not refuse
	// other addresses: listening beyond loopback without TLS and a Token or
	// TLSClientCA exposes the queue and the stores to anyone who can reach
	// it (see the package documentation).
	Host string
	// Port to listen on; DefaultPort if 0, a random free port if -1.
	Port int
	// ReadyTimeout bounds the wait for the server to accept clients; 10 s if 0.
	ReadyTimeout time.Duration
	// TLSCert and TLSKey are the PEM server certificate and its private
	// key: with them, clients must use TLS. Both or neither.
	TLSCert, TLSKey string
	// TLSClientCA, if set, is a PEM bundle of the authorities client
	// certificates must be signed by: mutual TLS. It needs TLSCert.
	TLSClientCA string
	// Token, if set, is the token clients must present
	// ("nats://TOKEN@host:port", or nats.Token).
	Token string
	// Logf, if set, receives the server's notices, warnings and errors.
	Logf func(format string, args ...any)
}

// Server is an embedded NATS server with JetStream. Its methods are safe
// for concurrent use.
type Server struct {
	ns    *server.Server
	token string
}

// Serve starts an embedded NATS server with JetStream, file storage in
// opts.StoreDir, and returns once it accepts clients.
func Serve(opts ServeOptions) (*Server, error) {
	if opts.StoreDir == "" {
		return nil, errors.New("starting nats server: no store directory")
	}
	sopts := &server.Options{
		ServerName: "proctor",
		Host:       opts.Host,
		Port:       opts.Port,
		JetStream:  true,
		StoreDir:   opts.StoreDir,
		NoSigs:     true,
		NoLog:      opts.Logf == nil,
		// No HTTP monitoring, cluster, gateway or leaf-node listeners.
	}
	if err := serveTLS(opts, sopts); err != nil {
		return nil, err
	}
	if strings.ContainsAny(opts.Token, " \t\r\n") {
		return nil, errors.New("starting nats server: Token: contains white space")
	}
	sopts.Authorization = opts.Token
	if sopts.Host == "" {
		sopts.Host = DefaultHost
	}
	if sopts.Port == 0 {
		sopts.Port = DefaultPort
	}
	ns, err := server.NewServer(sopts)
	if err != nil {
		return nil, fmt.Errorf("starting nats server: %w", err)
	}
	if opts.Logf != nil {
		ns.SetLoggerV2(logger(opts.Logf), false, false, false)
	}
	go ns.Start()
	wait := opts.ReadyTimeout
	if wait <= 0 {
		wait = 10 * time.Second
	}
	if !ns.ReadyForConnections(wait) {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, fmt.Errorf("starting nats server on %s:%d: not ready after %v", sopts.Host, sopts.Port, wait)
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		return nil, errors.New("starting nats server: jetstream is not enabled")
	}
	return &Server{ns: ns, token: opts.Token}, nil
}

// serveTLS checks the TLS fields of opts and sets sopts's TLS
// configuration from them.
func serveTLS(opts ServeOptions, sopts *server.Options) error {
	switch {
	case opts.TLSCert == "" && opts.TLSKey == "":
		if opts.TLSClientCA != "" {
			return errors.New("starting nats server: TLSClientCA: needs TLSCert and TLSKey")
		}
		return nil
	case opts.TLSCert == "":
		return errors.New("starting nats server: TLSKey: needs TLSCert")
	case opts.TLSKey == "":
		return errors.New("starting nats server: TLSCert: needs TLSKey")
	}
	for _, f := range []struct{ field, path string }{
		{"TLSCert", opts.TLSCert}, {"TLSKey", opts.TLSKey}, {"TLSClientCA", opts.TLSClientCA},
	} {
		if f.path == "" {
			continue
		}
		if err := checkFile(f.path); err != nil {
			return fmt.Errorf("starting nats server: %s %s: %v", f.field, f.path, err)
		}
	}
	tc := &server.TLSConfigOpts{CertFile: opts.TLSCert, KeyFile: opts.TLSKey}
	if opts.TLSClientCA != "" {
		// GenTLSConfig's own message for a bad bundle does not say which.
		pem, err := os.ReadFile(opts.TLSClientCA)
		if err != nil {
			return fmt.Errorf("starting nats server: TLSClientCA: %w", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			return fmt.Errorf("starting nats server: TLSClientCA %s: no PEM certificate in it", opts.TLSClientCA)
		}
		tc.CaFile, tc.Verify = opts.TLSClientCA, true
	}
	cfg, err := server.GenTLSConfig(tc)
	if err != nil {
		return fmt.Errorf("starting nats server: TLSCert %s, TLSKey %s: %v", opts.TLSCert, opts.TLSKey, err)
	}
	sopts.TLSVerify = tc.Verify
	sopts.TLS = true
	sopts.TLSConfig = cfg
	sopts.TLSCert, sopts.TLSKey, sopts.TLSCaCert = opts.TLSCert, opts.TLSKey, opts.TLSClientCA
	return nil
}

// Connect connects to s in process, past TLS and the network, with s's
// token if it has one: how the process that serves reaches its own queue.
// See [Connect] for what it creates.
func (s *Server) Connect(ctx context.Context, opts ...Option) (*Conn, error) {
	nopts := []nats.Option{nats.InProcessServer(s.ns)}
	if s.token != "" {
		nopts = append(nopts, nats.Token(s.token))
	}
	return Connect(ctx, "nats://in-process", append(opts, WithNATS(nopts...))...)
}

// ClientURL returns the URL clients connect to, "nats://host:port", or
// "tls://host:port" when the server has TLS. It never holds the token.
func (s *Server) ClientURL() string { return s.ns.ClientURL() }

// Close shuts the server down and waits until it has; JetStream's files
// are flushed and stay in StoreDir.
func (s *Server) Close() error {
	s.ns.Shutdown()
	s.ns.WaitForShutdown()
	return nil
}

// logger adapts a printf function to the server's logger.
type logger func(format string, args ...any)

func (l logger) Noticef(format string, v ...any) { l("nats: "+format, v...) }
func (l logger) Warnf(format string, v ...any)   { l("nats: warning: "+format, v...) }
func (l logger) Fatalf(format string, v ...any)  { l("nats: fatal: "+format, v...) }
func (l logger) Errorf(format string, v ...any)  { l("nats: error: "+format, v...) }
func (l logger) Debugf(format string, v ...any)  {}
func (l logger) Tracef(format string, v ...any)  {}

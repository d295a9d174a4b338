package cluster

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
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
	// Host to listen on; DefaultHost if empty. Anything but loopback exposes
	// an unauthenticated server (see the package documentation).
	Host string
	// Port to listen on; DefaultPort if 0, a random free port if -1.
	Port int
	// ReadyTimeout bounds the wait for the server to accept clients; 10 s if 0.
	ReadyTimeout time.Duration
	// Logf, if set, receives the server's notices, warnings and errors.
	Logf func(format string, args ...any)
}

// Server is an embedded NATS server with JetStream. Its methods are safe
// for concurrent use.
type Server struct {
	ns *server.Server
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
	return &Server{ns: ns}, nil
}

// ClientURL returns the URL clients connect to, "nats://host:port".
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

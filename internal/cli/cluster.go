package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/cluster"
)

func newClusterCmd(stdout, stderr io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "cluster",
		Short: "A JetStream work queue for trials on many machines (in progress: serve and status)",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	var store, listen, tlsCert, tlsKey, tlsClientCA, tokenFile string
	serve := &cobra.Command{
		Use:   "serve [--store DIR] [--listen HOST:PORT] [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]] [--auth-token-file FILE]",
		Short: "Run an embedded NATS JetStream server holding the trial queue, task archives and results",
		Long: `Run an embedded NATS server with JetStream, its streams and object stores
kept in --store (default the cache dir's cluster/), listening on --listen
(default 127.0.0.1:4222), until interrupted.

With --tls-cert and --tls-key clients must use TLS; with --tls-client-ca too
they must present a certificate signed by it (mutual TLS). With
--auth-token-file (the token on its first line, the file mode 0600) they
must present the token, as in --cluster nats://TOKEN@host:4222. Anyone who
reaches the server could otherwise read the archives and results and queue
trials, so an address other than loopback needs TLS and a token or a client
CA.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			switch {
			case tlsCert != "" && tlsKey == "":
				return usageErr("--tls-cert: needs --tls-key")
			case tlsKey != "" && tlsCert == "":
				return usageErr("--tls-key: needs --tls-cert")
			case tlsClientCA != "" && tlsCert == "":
				return usageErr("--tls-client-ca: needs --tls-cert and --tls-key")
			}
			host, port, err := listenAddr(listen, tlsCert != "", tokenFile != "" || tlsClientCA != "")
			if err != nil {
				return err
			}
			for _, f := range []struct{ flag, path string }{
				{"--tls-cert", tlsCert}, {"--tls-key", tlsKey}, {"--tls-client-ca", tlsClientCA},
			} {
				if err := readableFile(f.flag, f.path); err != nil {
					return err
				}
			}
			var token string
			if tokenFile != "" {
				if token, err = readTokenFile(tokenFile); err != nil {
					return err
				}
			}
			if store == "" {
				o, err := (&trialFlags{quiet: true}).baseOptions(io.Discard)
				if err != nil {
					return err
				}
				store = filepath.Join(o.CacheDir, "cluster")
			}
			if err := os.MkdirAll(store, 0o700); err != nil {
				return fmt.Errorf("--store: %w", err)
			}
			srv, err := cluster.Serve(cluster.ServeOptions{
				StoreDir: store, Host: host, Port: port,
				TLSCert: tlsCert, TLSKey: tlsKey, TLSClientCA: tlsClientCA, Token: token,
			})
			if err != nil {
				return err
			}
			defer srv.Close()
			// The queue and the stores exist before anyone asks.
			ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
			conn, err := srv.Connect(ctx)
			cancel()
			if err != nil && c.Context().Err() != nil {
				// Stopped (Ctrl-C) before it was ready: a stop, not a failure.
				fmt.Fprintf(stdout, "proctor: cluster stopped\n")
				return nil
			}
			if err != nil {
				return err
			}
			conn.Close()
			fmt.Fprintf(stdout, "proctor: cluster serving %s (store %s); Ctrl-C stops it\n", srv.ClientURL(), store)
			<-c.Context().Done()
			fmt.Fprintf(stdout, "proctor: cluster stopped\n")
			return nil
		},
	}
	serve.Flags().StringVar(&store, "store", "", "where JetStream keeps the queue, archives and results")
	serve.Flags().StringVar(&listen, "listen", net.JoinHostPort(cluster.DefaultHost, strconv.Itoa(cluster.DefaultPort)), "HOST:PORT to listen on (beyond loopback only with TLS and a token or client CA)")
	serve.Flags().StringVar(&tlsCert, "tls-cert", "", "PEM server certificate `FILE`: clients must use TLS (with --tls-key)")
	serve.Flags().StringVar(&tlsKey, "tls-key", "", "PEM private key `FILE` of --tls-cert")
	serve.Flags().StringVar(&tlsClientCA, "tls-client-ca", "", "PEM CA bundle `FILE`: clients must present a certificate it signed (mutual TLS)")
	serve.Flags().StringVar(&tokenFile, "auth-token-file", "", "`FILE` whose first line is the token clients must present (nats://TOKEN@host:port); mode 0600")

	c.AddCommand(serve, newClusterStatusCmd(stdout))
	return c
}

// listenAddr parses --listen. An address other than loopback needs tls
// and auth (a token or client certificates): anyone who reached an open
// server could read the archives and results and queue trials.
func listenAddr(s string, tls, auth bool) (string, int, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return "", 0, usageErr("--listen %q: want IP:PORT: %v", s, err)
	}
	if !ap.Addr().IsLoopback() && (!tls || !auth) {
		var add string
		switch {
		case !tls && !auth:
			add = "--tls-cert and --tls-key, and --auth-token-file or --tls-client-ca"
		case !tls:
			add = "--tls-cert and --tls-key"
		default:
			add = "--auth-token-file or --tls-client-ca"
		}
		return "", 0, &exitError{code: exitUsage, err: fmt.Errorf("--listen %s: not a loopback address; add %s", s, add),
			hint: "beyond loopback the server needs TLS and a token or client certificates; or serve on 127.0.0.1 and reach it through a tunnel you trust"}
	}
	port := int(ap.Port())
	if port == 0 {
		port = -1 // a free port, chosen by the server
	}
	return ap.Addr().String(), port, nil
}

// readableFile checks that path, given as flag, is a regular file this
// process can read; "" is fine (the flag is not set).
func readableFile(flag, path string) error {
	if path == "" {
		return nil
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
	case fi.IsDir():
		err = errors.New("is a directory")
	case !fi.Mode().IsRegular():
		err = errors.New("not a regular file")
	}
	if err == nil {
		var f *os.File
		if f, err = os.Open(path); err == nil {
			f.Close()
		}
	}
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return &exitError{code: exitSetup, err: fmt.Errorf("%s %s: %w", flag, path, err)}
	}
	return nil
}

// readTokenFile returns the token on the first line of path: not empty,
// made of characters that go into a URL as they are, in a file only its
// owner can read.
func readTokenFile(path string) (string, error) {
	if err := readableFile("--auth-token-file", path); err != nil {
		return "", err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", &exitError{code: exitSetup, err: fmt.Errorf("--auth-token-file %s: %w", path, err)}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", &exitError{code: exitSetup, err: fmt.Errorf("--auth-token-file %s: readable by group or others (mode %04o)", path, perm),
			hint: "chmod 600 " + path}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", &exitError{code: exitSetup, err: fmt.Errorf("--auth-token-file %s: %w", path, err)}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	token := strings.TrimSpace(line)
	if token == "" {
		return "", &exitError{code: exitSetup, err: fmt.Errorf("--auth-token-file %s: the first line is empty", path),
			hint: "write a token there, e.g. openssl rand -hex 32 > " + path}
	}
	if i := strings.IndexFunc(token, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("-._~+=", r))
	}); i >= 0 {
		return "", &exitError{code: exitSetup, err: fmt.Errorf("--auth-token-file %s: the token has a character other than letters, digits and -._~+=", path),
			hint: "a token goes into URLs as nats://TOKEN@host; e.g. openssl rand -hex 32 > " + path}
	}
	return token, nil
}

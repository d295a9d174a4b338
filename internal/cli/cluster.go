package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
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
	var store, listen string
	serve := &cobra.Command{
		Use:   "serve [--store DIR] [--listen HOST:PORT]",
		Short: "Run an embedded NATS JetStream server holding the trial queue, task archives and results",
		Long: `Run an embedded NATS server with JetStream, its streams and object stores
kept in --store (default the cache dir's cluster/), listening on --listen
(default 127.0.0.1:4222), until interrupted. It has no authentication or TLS
yet, so it listens on loopback addresses only.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			host, port, err := loopbackListen(listen)
			if err != nil {
				return err
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
			srv, err := cluster.Serve(cluster.ServeOptions{StoreDir: store, Host: host, Port: port})
			if err != nil {
				return err
			}
			defer srv.Close()
			// The queue and the stores exist before anyone asks.
			ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
			conn, err := cluster.Connect(ctx, srv.ClientURL())
			cancel()
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
	serve.Flags().StringVar(&listen, "listen", net.JoinHostPort(cluster.DefaultHost, strconv.Itoa(cluster.DefaultPort)), "HOST:PORT to listen on (loopback only, for now)")

	c.AddCommand(serve, newClusterStatusCmd(stdout))
	return c
}

// loopbackListen parses --listen, which must be a loopback address: the
// server has no authentication yet, and anyone who reached it could read
// the archives and results and queue trials.
func loopbackListen(s string) (string, int, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return "", 0, usageErr("--listen %q: want IP:PORT: %v", s, err)
	}
	if !ap.Addr().IsLoopback() {
		return "", 0, &exitError{code: exitUsage, err: fmt.Errorf("--listen %s: not a loopback address; the cluster has no authentication or TLS yet", s),
			hint: "serve on 127.0.0.1 and reach it through a tunnel you trust, until NATS auth and TLS are supported"}
	}
	port := int(ap.Port())
	if port == 0 {
		port = -1 // a free port, chosen by the server
	}
	return ap.Addr().String(), port, nil
}

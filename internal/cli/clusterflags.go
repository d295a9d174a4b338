package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/cluster"
)

// clusterFlags are how a command reaches a cluster: its NATS URL and the
// credentials or TLS files NATS users expect.
type clusterFlags struct {
	url string
}

func (f *clusterFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.url, "cluster", "", "the cluster's NATS URL, e.g. nats://127.0.0.1:4222 (user:password@ or a token in the URL as NATS takes them)")
}

// set reports whether --cluster was given.
func (f *clusterFlags) set() bool { return f.url != "" }

// connect connects to the cluster, --cluster being required.
func (f *clusterFlags) connect(ctx context.Context, opts ...cluster.Option) (*cluster.Conn, error) {
	if f.url == "" {
		return nil, usageErr("--cluster: not set (e.g. nats://127.0.0.1:4222)")
	}
	return cluster.Connect(ctx, f.url, opts...)
}

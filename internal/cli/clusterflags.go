package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/cluster"
)

// clusterFlags are how a command reaches a cluster: its NATS URL and the
// credentials or TLS files NATS users expect.
type clusterFlags struct {
	url  string
	auth cluster.ClientAuth
}

func (f *clusterFlags) register(c *cobra.Command) {
	c.Flags().StringVar(&f.url, "cluster", "", "the cluster's NATS URL, e.g. nats://127.0.0.1:4222 (user:password@ or a token in the URL as NATS takes them; tls:// requires TLS)")
	c.Flags().StringVar(&f.auth.Creds, "nats-creds", "", "a NATS credentials `FILE` (user JWT and NKey seed)")
	c.Flags().StringVar(&f.auth.NKey, "nats-nkey", "", "a `FILE` holding a NATS user NKey seed")
	c.Flags().StringVar(&f.auth.CA, "nats-ca", "", "PEM CA bundle `FILE` to verify the server's certificate by (implies TLS)")
	c.Flags().StringVar(&f.auth.Cert, "nats-cert", "", "PEM client certificate `FILE` for mutual TLS (with --nats-key)")
	c.Flags().StringVar(&f.auth.Key, "nats-key", "", "PEM private key `FILE` of --nats-cert")
}

// set reports whether --cluster was given.
func (f *clusterFlags) set() bool { return f.url != "" }

// authFlags names the flag of each cluster.ClientAuth field.
var authFlags = map[string]string{
	"Creds": "--nats-creds", "NKey": "--nats-nkey", "CA": "--nats-ca", "Cert": "--nats-cert", "Key": "--nats-key",
}

// natsOptions checks the credential and TLS flags and returns the NATS
// options they stand for: a usage error for flags that do not go
// together, a setup error naming the flag for a file that cannot be read.
func (f *clusterFlags) natsOptions() ([]cluster.Option, error) {
	a := f.auth
	switch {
	case a.Creds != "" && a.NKey != "":
		return nil, usageErr("--nats-creds and --nats-nkey: give one or the other")
	case a.Cert != "" && a.Key == "":
		return nil, usageErr("--nats-cert: needs --nats-key")
	case a.Key != "" && a.Cert == "":
		return nil, usageErr("--nats-key: needs --nats-cert")
	}
	opts, err := a.Options()
	if err != nil {
		var fe *cluster.AuthFileError
		if errors.As(err, &fe) {
			return nil, &exitError{code: exitSetup, err: fmt.Errorf("%s %s: %w", authFlags[fe.Field], fe.Path, fe.Err)}
		}
		return nil, err
	}
	if len(opts) == 0 {
		return nil, nil
	}
	return []cluster.Option{cluster.WithNATS(opts...)}, nil
}

// connect connects to the cluster, --cluster being required.
func (f *clusterFlags) connect(ctx context.Context, opts ...cluster.Option) (*cluster.Conn, error) {
	if f.url == "" {
		return nil, usageErr("--cluster: not set (e.g. nats://127.0.0.1:4222)")
	}
	auth, err := f.natsOptions()
	if err != nil {
		return nil, err
	}
	return cluster.Connect(ctx, f.url, append(auth, opts...)...)
}

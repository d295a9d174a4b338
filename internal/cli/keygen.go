package cli

import (
	"crypto/ed25519"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/bundle"
)

func newKeygenCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "keygen KEYFILE",
		Short: "Make an ed25519 key pair for signing bundles",
		Long: `Write a new private key to KEYFILE (mode 0600) and its public key to
KEYFILE.pub. Neither is overwritten. Give KEYFILE to proctor run --key (or
PROCTOR_KEY_FILE) and KEYFILE.pub to whoever verifies your bundles.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &exitError{code: exitUsage, err: fmt.Errorf("keygen: want one key file, got %d arguments", len(args)), hint: "proctor keygen KEYFILE"}
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			key, err := bundle.GenerateKey()
			if err != nil {
				return err
			}
			if err := bundle.WriteKeyFiles(args[0], key); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "wrote %s and %s.pub: %s\n", args[0], args[0], bundle.Fingerprint(key.Public().(ed25519.PublicKey)))
			return nil
		},
	}
}

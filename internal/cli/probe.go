package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

func newProbeCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "probe",
		Short: "Show what this host supports; exit 0 only if exec can run",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "FEATURE\tSTATUS\tNEEDED BY EXEC\tDETAIL")
			missing := 0
			for _, f := range sandbox.Probe(c.Context()) {
				st, need := "yes", "no"
				if !f.OK {
					st = "no"
				}
				if f.Required {
					need = "yes"
					if !f.OK {
						missing++
					}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Name, st, need, f.Detail)
			}
			tw.Flush()
			if missing > 0 {
				return fmt.Errorf("probe: %d feature(s) that exec needs are missing", missing)
			}
			return nil
		},
	}
}

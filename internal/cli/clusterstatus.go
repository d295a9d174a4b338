package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
)

func newClusterStatusCmd(stdout io.Writer) *cobra.Command {
	var cf clusterFlags
	status := &cobra.Command{
		Use:   "status --cluster URL",
		Short: "Show the trial queue: waiting, in flight, delivered, and the stores' sizes",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !cf.set() {
				return usageErr("--cluster: not set (e.g. nats://127.0.0.1:4222)")
			}
			ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
			defer cancel()
			conn, err := cf.connect(ctx)
			if err != nil {
				return err
			}
			defer conn.Close()
			st, err := conn.Status(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "queue: %d trial(s) not yet acked: %d waiting, %d in flight (%d redelivered); %d delivery(ies) so far\n",
				st.Stored, st.Pending, st.InFlight, st.Redelivered, st.Delivered)
			fmt.Fprintf(stdout, "workers: %d waiting for a trial\n", st.Waiting)
			fmt.Fprintf(stdout, "stores: task archives %d bytes, results %d bytes\n", st.Tasks, st.Results)
			return nil
		},
	}
	cf.register(status)
	return status
}

package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/cluster"
)

func newClusterStatusCmd(stdout io.Writer) *cobra.Command {
	var cf clusterFlags
	status := &cobra.Command{
		Use:   "status --cluster URL",
		Short: "Show the workers (liveness, load), the trial queue (waiting, in flight, done) and the stores' sizes",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if !cf.set() {
				return usageErr("--cluster: not set (e.g. nats://127.0.0.1:4222)")
			}
			ctx, cancel := context.WithTimeout(c.Context(), 30*time.Second)
			defer cancel()
			conn, err := cf.connect(ctx, cluster.WithBind())
			if err != nil {
				return err
			}
			defer conn.Close()
			st, err := conn.Status(ctx)
			if err != nil {
				return err
			}
			ws, err := conn.Workers(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "queue: %d trial(s) not yet acked: %d waiting, %d in flight (%d redelivered); %d done; %d delivery(ies) so far\n",
				st.Stored, st.Pending, st.InFlight, st.Redelivered, st.Finished, st.Delivered)
			jobs, running := 0, 0
			for _, w := range ws {
				jobs += w.Jobs
				running += len(w.Running)
			}
			fmt.Fprintf(stdout, "workers: %d live, running %d of %d job slot(s); %d pull request(s) waiting\n", len(ws), running, jobs, st.Waiting)
			now := time.Now()
			for _, w := range ws {
				fmt.Fprintf(stdout, "  %s  %s pid %d  running %d/%d  done %d  up %s  seen %s ago  key %s\n", w.Name, w.Host, w.PID,
					len(w.Running), w.Jobs, w.Done, now.Sub(w.Started).Round(time.Second), now.Sub(w.Seen).Round(100*time.Millisecond), w.Key)
			}
			fmt.Fprintf(stdout, "stores: task archives %d bytes, results %d bytes\n", st.Tasks, st.Results)
			return nil
		},
	}
	cf.register(status)
	return status
}

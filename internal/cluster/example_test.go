package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/proctor-sandbox/proctor/internal/cluster"
)

// A coordinator stores a task archive and queues a trial; a worker fetches
// it, reads the archive, stores its result and only then acks.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "proctor-cluster-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	srv, err := cluster.Serve(cluster.ServeOptions{StoreDir: dir, Port: -1})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	c, err := cluster.Connect(ctx, srv.ClientURL())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	archive := []byte("a task archive")
	digest, _ := cluster.ArchiveDigest(bytes.NewReader(archive))
	if err := c.PutTask(ctx, digest, bytes.NewReader(archive)); err != nil {
		log.Fatal(err)
	}
	err = c.Publish(ctx, cluster.TrialMsg{ID: "suite-1.agent.task.0", Suite: "suite-1", Agent: "agent", Task: "task", TaskDigest: digest})
	if err != nil {
		log.Fatal(err)
	}

	job, err := c.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	stop := cluster.KeepAlive(ctx, job, cluster.DefaultAckWait/3)
	var task bytes.Buffer
	if err := c.GetTask(ctx, job.Msg.TaskDigest, &task); err != nil {
		log.Fatal(err)
	}
	if err := c.PutResult(ctx, job.Msg.ID, "bundle.json", strings.NewReader("{}")); err != nil {
		log.Fatal(err)
	}
	stop()
	if err := job.Ack(ctx); err != nil {
		log.Fatal(err)
	}
	st, err := c.Status(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ran %s (delivery %d) on %q\n", job.Msg.ID, job.Delivered(), task.String())
	fmt.Printf("queued %d, in flight %d, delivered %d\n", st.Stored, st.InFlight, st.Delivered)
	// Output:
	// ran suite-1.agent.task.0 (delivery 1) on "a task archive"
	// queued 0, in flight 0, delivered 1
}

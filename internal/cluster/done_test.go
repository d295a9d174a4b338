package cluster

import (
	"context"
	"errors"
	"testing"
	"time"
)

// A Done reaches its own suite's coordinator only, survives the
// coordinator's restart until acked, and a retried publish is dropped.
func TestCompletions(t *testing.T) {
	s := serve(t, t.TempDir())
	c := connect(t, s)
	ctx := t.Context()
	d := Done{Suite: "s1", Trial: "s1-1", Worker: "w", Delivery: 1, Result: "out-1", ResultDigest: digestOf(t, []byte("r"))}
	for range 2 {
		if err := c.PublishDone(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	other := Done{Suite: "s2", Trial: "s2-1", Worker: "w", Delivery: 1, Error: "no task"}
	if err := c.PublishDone(ctx, other); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Finished(ctx, "s1", "s1-1"); err != nil || !ok {
		t.Fatalf("Finished(s1-1) = %v, %v", ok, err)
	}
	cs, err := c.Completions(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	m, err := cs.Next(ctx)
	if err != nil || m.Done != d {
		t.Fatalf("first done: %+v, %v", m, err)
	}
	m.Nak(0) // the coordinator stopped before recording it
	cs2, err := c.Completions(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	m, err = cs2.Next(ctx)
	if err != nil || m.Done != d {
		t.Fatalf("done again: %+v, %v", m, err)
	}
	if err := m.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 700*time.Millisecond)
	defer cancel()
	if m, err := cs2.Next(short); err == nil {
		t.Fatalf("a second done for s1 (the retried publish, or s2's): %+v", m.Done)
	}
	if ok, _ := c.Finished(ctx, "s1", "s1-1"); ok {
		t.Fatal("an acked done is still there")
	}
	for _, bad := range []Done{
		{Suite: "s.1", Trial: "t", Error: "x"},
		{Suite: "s", Trial: "a/b", Error: "x"},
		{Suite: "s", Trial: "t"},
		{Suite: "s", Trial: "t", Result: "r", ResultDigest: "sha256:00"},
	} {
		if err := c.PublishDone(ctx, bad); !errors.Is(err, ErrBadTrial) {
			t.Errorf("PublishDone(%+v) = %v, want ErrBadTrial", bad, err)
		}
	}
}

// Queued says whether a trial is still in the queue, by its own subject.
func TestQueued(t *testing.T) {
	s := serve(t, t.TempDir())
	c := connect(t, s)
	ctx := t.Context()
	m := trial(7, digestOf(t, []byte("a")))
	if ok, err := c.Queued(ctx, m.ID); err != nil || ok {
		t.Fatalf("before publish: %v, %v", ok, err)
	}
	if err := c.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.Queued(ctx, m.ID); err != nil || !ok {
		t.Fatalf("after publish: %v, %v", ok, err)
	}
	job, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := c.Queued(ctx, m.ID); !ok {
		t.Fatal("in flight, not queued")
	}
	job.Ack(ctx)
	if ok, _ := c.Queued(ctx, m.ID); ok {
		t.Fatal("acked, still queued")
	}
}

// A client that binds leaves the coordinator's consumer settings alone.
func TestBindKeepsAckWait(t *testing.T) {
	s := serve(t, t.TempDir())
	ctx := t.Context()
	coord := connect(t, s, WithAckWait(3*time.Second))
	if _, err := Connect(ctx, s.ClientURL(), WithBind()); err != nil {
		t.Fatal(err)
	}
	ci, err := coord.consumer.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ci.Config.AckWait != 3*time.Second {
		t.Fatalf("AckWait after a bound client: %v, want 3s", ci.Config.AckWait)
	}
	if _, err := Connect(ctx, s.ClientURL()); err != nil {
		t.Fatal(err)
	}
	ci, _ = coord.consumer.Info(ctx)
	if ci.Config.AckWait != DefaultAckWait {
		t.Fatalf("AckWait after a configuring client: %v, want the default", ci.Config.AckWait)
	}
}

// Heartbeats list the live workers; one that leaves is gone at once.
func TestHeartbeat(t *testing.T) {
	s := serve(t, t.TempDir())
	c := connect(t, s)
	ctx := t.Context()
	for _, n := range []string{"w2", "w1"} {
		if err := c.Heartbeat(ctx, WorkerInfo{Name: n, Jobs: 2, Running: []string{"t1"}}); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := c.Workers(ctx)
	if err != nil || len(ws) != 2 || ws[0].Name != "w1" || ws[1].Jobs != 2 || ws[0].Seen.IsZero() {
		t.Fatalf("workers: %+v, %v", ws, err)
	}
	if err := c.Leave(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if ws, _ := c.Workers(ctx); len(ws) != 1 || ws[0].Name != "w2" {
		t.Fatalf("after w1 left: %+v", ws)
	}
	if err := c.Heartbeat(ctx, WorkerInfo{Name: "a.b"}); err == nil {
		t.Fatal("a name with a dot was accepted")
	}
}

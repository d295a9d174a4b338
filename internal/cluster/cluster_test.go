package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// serve starts an embedded server on a random loopback port with its store
// in dir, closed when the test ends.
func serve(t *testing.T, dir string) *Server {
	t.Helper()
	s, err := Serve(ServeOptions{StoreDir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// connect connects to s with a short AckWait and poll, closed when the test ends.
func connect(t *testing.T, s *Server, opts ...Option) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	opts = append([]Option{WithAckWait(time.Second), WithPollWait(500 * time.Millisecond)}, opts...)
	c, err := Connect(ctx, s.ClientURL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func digestOf(t *testing.T, b []byte) string {
	t.Helper()
	d, err := ArchiveDigest(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func trial(i int, digest string) TrialMsg {
	return TrialMsg{
		ID: fmt.Sprintf("trial-%03d", i), Suite: "s", Agent: "a", AgentCommand: "run-agent",
		Task: "t", TaskDigest: digest, Index: i,
	}
}

func status(t *testing.T, c *Conn) Status {
	t.Helper()
	st, err := c.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestServeListensOnLoopbackByDefault(t *testing.T) {
	s := serve(t, t.TempDir())
	u, err := url.Parse(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	if u.Hostname() != "127.0.0.1" {
		t.Fatalf("ClientURL %s: want host 127.0.0.1", s.ClientURL())
	}
}

func TestTaskArchive(t *testing.T) {
	c := connect(t, serve(t, t.TempDir()))
	ctx := t.Context()
	archive := bytes.Repeat([]byte("task archive bytes\n"), 20000) // several chunks
	digest := digestOf(t, archive)
	other := []byte("some other archive")

	if err := c.PutTask(ctx, digest, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	t.Run("round trip", func(t *testing.T) {
		var got bytes.Buffer
		if err := c.GetTask(ctx, digest, &got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), archive) {
			t.Fatalf("got %d bytes, want the %d put", got.Len(), len(archive))
		}
	})
	t.Run("put twice", func(t *testing.T) {
		if err := c.PutTask(ctx, digest, bytes.NewReader(archive)); err != nil {
			t.Fatalf("second put of the same archive: %v", err)
		}
	})
	t.Run("other content under an existing digest", func(t *testing.T) {
		err := c.PutTask(ctx, digest, bytes.NewReader(other))
		if !errors.Is(err, ErrTampered) {
			t.Fatalf("got %v, want ErrTampered", err)
		}
		var got bytes.Buffer
		if err := c.GetTask(ctx, digest, &got); err != nil || !bytes.Equal(got.Bytes(), archive) {
			t.Fatalf("after a refused put: %v, %d bytes; want the original archive", err, got.Len())
		}
	})
	t.Run("content not matching a new digest", func(t *testing.T) {
		wrong := digestOf(t, []byte("what the caller claims"))
		err := c.PutTask(ctx, wrong, bytes.NewReader(other))
		var te *TamperedError
		if !errors.As(err, &te) || te.Want != wrong || te.Got != digestOf(t, other) {
			t.Fatalf("got %v, want *TamperedError{Want: %s, Got: %s}", err, wrong, digestOf(t, other))
		}
		if err := c.GetTask(ctx, wrong, io.Discard); !errors.Is(err, ErrNotFound) {
			t.Fatalf("refused archive: GetTask: got %v, want ErrNotFound (nothing stored)", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if err := c.GetTask(ctx, digestOf(t, nil), io.Discard); !errors.Is(err, ErrNotFound) {
			t.Fatalf("got %v, want ErrNotFound", err)
		}
	})
	t.Run("bad digest", func(t *testing.T) {
		for _, d := range []string{"", "sha256:", "md5:" + strings.Repeat("0", 32), strings.ToUpper(digest), digest + "0", digest[:len(digest)-1] + "g"} {
			if err := c.PutTask(ctx, d, bytes.NewReader(archive)); !errors.Is(err, ErrBadDigest) {
				t.Errorf("PutTask(%q): got %v, want ErrBadDigest", d, err)
			}
			if err := c.GetTask(ctx, d, io.Discard); !errors.Is(err, ErrBadDigest) {
				t.Errorf("GetTask(%q): got %v, want ErrBadDigest", d, err)
			}
		}
	})
}

// rawStore opens the task bucket with a connection of its own, bypassing
// the package, as someone with access to the server could.
func rawStore(t *testing.T, s *Server) (jetstream.JetStream, jetstream.ObjectStore) {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := js.ObjectStore(t.Context(), TaskBucket)
	if err != nil {
		t.Fatal(err)
	}
	return js, obs
}

func TestGetTaskRefusesReplacedObject(t *testing.T) {
	s := serve(t, t.TempDir())
	c := connect(t, s)
	ctx := t.Context()
	archive := []byte("the real archive")
	evil := []byte("a replaced archive")
	digest := digestOf(t, archive)
	if err := c.PutTask(ctx, digest, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	_, obs := rawStore(t, s)
	if _, err := obs.PutBytes(ctx, digest, evil); err != nil {
		t.Fatal(err)
	}

	err := c.GetTask(ctx, digest, io.Discard)
	var te *TamperedError
	if !errors.As(err, &te) || !errors.Is(err, ErrTampered) {
		t.Fatalf("GetTask of a replaced object: got %v, want *TamperedError", err)
	}
	if te.Name != digest || te.Want != digest || te.Got != digestOf(t, evil) {
		t.Fatalf("got %+v, want Name=Want=%s Got=%s", te, digest, digestOf(t, evil))
	}
	if err := c.PutTask(ctx, digest, bytes.NewReader(archive)); !errors.Is(err, ErrConflict) {
		t.Fatalf("PutTask over a replaced object: got %v, want ErrConflict", err)
	}
}

// TestGetTaskRefusesForgedMetadata stores other bytes under the digest
// with metadata that claims the right digest, so that only hashing the
// bytes as they are read can tell.
func TestGetTaskRefusesForgedMetadata(t *testing.T) {
	s := serve(t, t.TempDir())
	c := connect(t, s)
	ctx := t.Context()
	archive := []byte("the real archive, 32 bytes long.")
	evil := []byte("an evil archive, 32 bytes long!!")
	digest := digestOf(t, archive)
	js, obs := rawStore(t, s)
	info, err := obs.PutBytes(ctx, "evil", evil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := checkDigest(digest)
	if err != nil {
		t.Fatal(err)
	}
	info.Name = digest
	info.Digest = natsDigest(want)
	meta, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(fmt.Sprintf("$O.%s.M.%s", TaskBucket, base64.URLEncoding.EncodeToString([]byte(digest))))
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Data = meta
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got, err := obs.GetInfo(ctx, digest); err != nil || got.Digest != natsDigest(want) {
		t.Fatalf("forged metadata not in place: %v, %v", got, err)
	}

	var out bytes.Buffer
	if err := c.GetTask(ctx, digest, &out); !errors.Is(err, ErrTampered) {
		t.Fatalf("GetTask with forged metadata: got %v (%q), want ErrTampered", err, out.Bytes())
	}
}

// TestVerifier runs valid, tampered and truncated bytes through the
// hashing reader GetTask and PutTask read with.
func TestVerifier(t *testing.T) {
	archive := bytes.Repeat([]byte{0, 1, 2, 3, 4, 5, 6, 7}, 1<<14)
	digest := digestOf(t, archive)
	want, _ := checkDigest(digest)
	tampered := bytes.Clone(archive)
	tampered[len(tampered)/2] ^= 1
	for _, tc := range []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"valid", archive, true},
		{"tampered", tampered, false},
		{"truncated", archive[:len(archive)-1], false},
		{"extended", append(bytes.Clone(archive), 0), false},
		{"empty", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			_, err := io.Copy(&out, newVerifier(bytes.NewReader(tc.in), digest, want))
			if tc.ok {
				if err != nil || !bytes.Equal(out.Bytes(), archive) {
					t.Fatalf("got %v", err)
				}
				return
			}
			var te *TamperedError
			if !errors.As(err, &te) || te.Got != digestOf(t, tc.in) || te.Want != digest {
				t.Fatalf("got %v, want *TamperedError with Got %s", err, digestOf(t, tc.in))
			}
		})
	}
}

func TestResults(t *testing.T) {
	c := connect(t, serve(t, t.TempDir()))
	ctx := t.Context()
	if err := c.PutResult(ctx, "trial-1", "bundle.json", strings.NewReader(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := c.PutResult(ctx, "trial-1", "bundle.json", strings.NewReader(`{"a":2}`)); err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	if err := c.GetResult(ctx, "trial-1", "bundle.json", &got); err != nil || got.String() != `{"a":2}` {
		t.Fatalf("got %q, %v; want the second result", got.String(), err)
	}
	if err := c.GetResult(ctx, "trial-2", "bundle.json", io.Discard); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing result: got %v, want ErrNotFound", err)
	}
	if err := c.PutResult(ctx, "a/b", "x", strings.NewReader("")); err == nil {
		t.Fatal("trial ID with '/': no error")
	}
}

func TestTwoWorkersEachTrialOnce(t *testing.T) {
	s := serve(t, t.TempDir())
	pub := connect(t, s)
	ctx := t.Context()
	digest := digestOf(t, []byte("archive"))
	const n = 30
	for i := range n {
		if err := pub.Publish(ctx, trial(i, digest)); err != nil {
			t.Fatal(err)
		}
	}
	// Republishing is deduplicated by trial ID.
	for i := range n {
		dup, err := pub.publish(ctx, trial(i, digest))
		if err != nil || !dup {
			t.Fatalf("republish %d: duplicate=%v err=%v; want a duplicate", i, dup, err)
		}
	}
	// The consumer's pending count catches up with the stream a moment
	// after the last publish (seen under load: 1 pending of 30, stored 30).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := status(t, pub)
		if st.Stored == n && st.Pending == n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after republishing: %+v; want %d stored and pending", st, n)
		}
	}

	var (
		mu    sync.Mutex
		count = map[string]int{}
		total int
	)
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		w := connect(t, s)
		wg.Go(func() {
			for {
				job, err := w.Next(wctx)
				if err != nil {
					if wctx.Err() == nil {
						errs <- err
					}
					return
				}
				if job.Delivered() != 1 {
					errs <- fmt.Errorf("trial %s delivered %d times", job.Msg.ID, job.Delivered())
				}
				if err := job.Ack(wctx); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				count[job.Msg.ID]++
				total++
				if total == n {
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range n {
		if id := trial(i, digest).ID; count[id] != 1 {
			t.Errorf("trial %s run %d times, want 1", id, count[id])
		}
	}
	if len(count) != n {
		t.Errorf("%d distinct trials run, want %d", len(count), n)
	}
	st := status(t, pub)
	if st.Stored != 0 || st.Pending != 0 || st.InFlight != 0 || st.Delivered != n || st.Acked != n {
		t.Fatalf("after all acked: %+v; want none stored, pending or in flight, %d delivered and acked", st, n)
	}
	// A finished trial published again within the window is not rerun.
	if dup, err := pub.publish(ctx, trial(0, digest)); err != nil || !dup {
		t.Fatalf("republish after ack: duplicate=%v err=%v; want a duplicate", dup, err)
	}
	if st := status(t, pub); st.Stored != 0 {
		t.Fatalf("republish after ack stored it: %+v", st)
	}
}

func TestRedeliveryAfterDroppedJob(t *testing.T) {
	s := serve(t, t.TempDir())
	w1, w2 := connect(t, s), connect(t, s)
	ctx := t.Context()
	m := trial(1, digestOf(t, []byte("archive")))
	if err := w1.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	job, err := w1.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(job.Msg, m) || job.Delivered() != 1 {
		t.Fatalf("first delivery: %+v, delivered %d", job.Msg, job.Delivered())
	}
	// w1 dies: no ack, no keep-alive.
	start := time.Now()
	nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	again, err := w2.Next(nctx)
	if err != nil {
		t.Fatalf("no redelivery: %v", err)
	}
	if again.Msg.ID != m.ID || again.Delivered() != 2 {
		t.Fatalf("redelivered %s, delivered %d; want %s, 2", again.Msg.ID, again.Delivered(), m.ID)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Fatalf("redelivered after %v, before AckWait", d)
	}
	if st := status(t, w2); st.InFlight != 1 || st.Redelivered != 1 {
		t.Fatalf("during redelivery: %+v", st)
	}
	if err := again.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := job.Ack(ctx); err == nil {
		t.Log("late ack of the first delivery accepted by the server (harmless: the trial is gone)")
	}
	if st := status(t, w2); st.Stored != 0 || st.InFlight != 0 {
		t.Fatalf("after ack: %+v", st)
	}
}

func TestNak(t *testing.T) {
	s := serve(t, t.TempDir())
	c := connect(t, s)
	ctx := t.Context()
	m := trial(1, digestOf(t, []byte("archive")))
	if err := c.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	job, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Nak(0); err != nil {
		t.Fatal(err)
	}
	nctx, cancel := context.WithTimeout(ctx, 900*time.Millisecond) // under AckWait
	defer cancel()
	again, err := c.Next(nctx)
	if err != nil {
		t.Fatalf("nak'd job not redelivered at once: %v", err)
	}
	if again.Msg.ID != m.ID || again.Delivered() != 2 {
		t.Fatalf("got %s delivered %d", again.Msg.ID, again.Delivered())
	}
	if err := again.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestKeepAliveHoldsJob(t *testing.T) {
	s := serve(t, t.TempDir())
	w1, w2 := connect(t, s), connect(t, s)
	ctx := t.Context()
	m := trial(1, digestOf(t, []byte("archive")))
	if err := w1.Publish(ctx, m); err != nil {
		t.Fatal(err)
	}
	job, err := w1.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stop := KeepAlive(ctx, job, 200*time.Millisecond)
	nctx, cancel := context.WithTimeout(ctx, 2500*time.Millisecond) // 2.5 × AckWait
	defer cancel()
	if other, err := w2.Next(nctx); err == nil {
		t.Fatalf("job kept alive was redelivered: %s, delivered %d", other.Msg.ID, other.Delivered())
	} else if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	stop()
	if err := job.Ack(ctx); err != nil {
		t.Fatalf("ack after keep-alive: %v", err)
	}
	if st := status(t, w1); st.Stored != 0 || st.InFlight != 0 || st.Delivered != 1 {
		t.Fatalf("after ack: %+v; want nothing left, 1 delivery", st)
	}
}

func TestStatus(t *testing.T) {
	c := connect(t, serve(t, t.TempDir()))
	ctx := t.Context()
	if st := status(t, c); st != (Status{}) {
		t.Fatalf("empty queue: %+v", st)
	}
	digest := digestOf(t, []byte("archive"))
	if err := c.PutTask(ctx, digest, strings.NewReader("archive")); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := c.Publish(ctx, trial(i, digest)); err != nil {
			t.Fatal(err)
		}
	}
	waitStatus(t, c, "3 published", func(st Status) bool {
		return st.Stored == 3 && st.Pending == 3 && st.InFlight == 0 && st.Delivered == 0 && st.Tasks != 0
	})
	job, err := c.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, "1 fetched", func(st Status) bool {
		return st.Stored == 3 && st.Pending == 2 && st.InFlight == 1 && st.Delivered == 1 && st.Acked == 0
	})
	if err := job.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, "1 acked", func(st Status) bool {
		return st.Stored == 2 && st.Pending == 2 && st.InFlight == 0 && st.Delivered == 1 && st.Acked == 1
	})
}

// waitStatus waits (5 s at most) for the queue's status to be what ok
// wants: the consumer's counts catch up with the stream a moment after a
// publish or an ack (seen under load: 0 pending of 3 stored).
func waitStatus(t *testing.T, c *Conn, what string, ok func(Status) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		st := status(t, c)
		if ok(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %+v", what, st)
		}
	}
}

func TestBadMessageTerminated(t *testing.T) {
	s := serve(t, t.TempDir())
	c := connect(t, s)
	ctx := t.Context()
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, TrialSubjectPrefix+"x", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	good := trial(1, digestOf(t, []byte("archive")))
	if err := c.Publish(ctx, good); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(ctx); !errors.Is(err, ErrBadTrial) {
		t.Fatalf("garbage message: got %v, want ErrBadTrial", err)
	}
	job, err := c.Next(ctx)
	if err != nil || !reflect.DeepEqual(job.Msg, good) {
		t.Fatalf("after garbage: %v, %v; want the good trial", job, err)
	}
	for _, bad := range []TrialMsg{
		{ID: "x"},
		{},
		func() TrialMsg { m := good; m.ID = "a/b"; return m }(),
		func() TrialMsg { m := good; m.ID = "a b"; return m }(),
		func() TrialMsg { m := good; m.TaskDigest = "sha256:00"; return m }(),
		func() TrialMsg { m := good; m.Index = -1; return m }(),
	} {
		if err := c.Publish(ctx, bad); !errors.Is(err, ErrBadTrial) {
			t.Errorf("publishing %+v: got %v, want ErrBadTrial", bad, err)
		}
	}
}

func TestRestartKeepsQueue(t *testing.T) {
	dir := t.TempDir()
	ctx := t.Context()
	archive := []byte("archive")
	digest := digestOf(t, archive)

	s1, err := Serve(ServeOptions{StoreDir: dir, Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	c1, err := Connect(ctx, s1.ClientURL())
	if err != nil {
		s1.Close()
		t.Fatal(err)
	}
	if err := c1.PutTask(ctx, digest, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := c1.Publish(ctx, trial(i, digest)); err != nil {
			t.Fatal(err)
		}
	}
	c1.Close()
	s1.Close()

	s2 := serve(t, dir)
	c2 := connect(t, s2)
	if st := status(t, c2); st.Stored != 3 || st.Pending != 3 {
		t.Fatalf("after restart: %+v; want 3 trials queued", st)
	}
	job, err := c2.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(job.Msg, trial(0, digest)) {
		t.Fatalf("first trial after restart: %+v", job.Msg)
	}
	var got bytes.Buffer
	if err := c2.GetTask(ctx, digest, &got); err != nil || !bytes.Equal(got.Bytes(), archive) {
		t.Fatalf("task archive after restart: %v", err)
	}
	// Still deduplicated across the restart.
	if dup, err := c2.publish(ctx, trial(1, digest)); err != nil || !dup {
		t.Fatalf("republish after restart: duplicate=%v err=%v", dup, err)
	}
}

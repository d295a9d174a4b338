package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// HeartbeatTTL is how long a worker's heartbeat stays in WorkerBucket: a
// worker beats every HeartbeatEvery, and one not heard from for
// HeartbeatTTL is gone from the list.
const (
	HeartbeatTTL   = 15 * time.Second
	HeartbeatEvery = 5 * time.Second
)

// WorkerInfo is a worker's heartbeat: who it is and how loaded.
type WorkerInfo struct {
	Name    string    `json:"name"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Key     string    `json:"key"` // fingerprint of the key it signs bundles with
	Version string    `json:"version"`
	Jobs    int       `json:"jobs"`    // trials it runs at once at most
	Running []string  `json:"running"` // IDs of the trials it runs now
	Done    int       `json:"done"`    // trials it finished since it started
	Started time.Time `json:"started"`
	Seen    time.Time `json:"seen"` // when it wrote this
}

// Heartbeat records w (w.Seen is set to now).
func (c *Conn) Heartbeat(ctx context.Context, w WorkerInfo) error {
	if !validToken(w.Name) {
		return fmt.Errorf("heartbeat: worker name %q: want 1-200 of letters, digits, '_' and '-'", w.Name)
	}
	w.Seen = time.Now().UTC()
	data, err := json.Marshal(w)
	if err != nil {
		return err
	}
	if _, err := c.workers.Put(ctx, w.Name, data); err != nil {
		return fmt.Errorf("heartbeat of worker %s: %w", w.Name, err)
	}
	return nil
}

// Leave removes worker name's heartbeat: it stops.
func (c *Conn) Leave(ctx context.Context, name string) error {
	if err := c.workers.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("worker %s leaving: %w", name, err)
	}
	return nil
}

// Workers returns the workers heard from within HeartbeatTTL, by name.
func (c *Conn) Workers(ctx context.Context) ([]WorkerInfo, error) {
	keys, err := c.workers.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing workers: %w", err)
	}
	var out []WorkerInfo
	for _, k := range keys {
		e, err := c.workers.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // expired meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("reading worker %s: %w", k, err)
		}
		var w WorkerInfo
		if err := json.Unmarshal(e.Value(), &w); err != nil {
			continue // not a heartbeat of ours
		}
		out = append(out, w)
	}
	slices.SortFunc(out, func(a, b WorkerInfo) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out, nil
}

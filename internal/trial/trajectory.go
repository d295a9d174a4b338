package trial

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/proctor-sandbox/proctor/internal/trajectory"
)

// TrajectoryFile holds the agent's trajectory in Harbor's ATIF
// (internal/trajectory), read from what its model gateways relayed: an
// artifact of the bundle.
const TrajectoryFile = "trajectory.json"

// saveTrajectory writes OUT/trajectory.json from the model calls of the
// agent phase, whose gateways are closed: those the gateways recorded
// (every trial with a gateway records them, in memory unless --record
// keeps them), or, in a replay that made them all, the recording
// replayed. A trial whose calls make no trajectory (no model turn) has
// none, and its timeline says why; the trial goes on either way.
func (r *runner) saveTrajectory(n *agentNet) error {
	tape := n.tape
	if tape == nil {
		tape = r.o.Net.Replay // replayDone passed: the agent made every call recorded
	}
	if tape == nil {
		return nil
	}
	name, version := r.o.Agent, cmp.Or(r.v.Agent.DirDigest, "unknown")
	if l := r.o.AgentLayer; l != nil {
		name, version = l.Recipe, cmp.Or(l.Version, l.Digest)
	}
	tr, err := trajectory.FromTape(tape, trajectory.Options{AgentName: name, AgentVersion: version, SessionID: r.o.Nonce})
	if err != nil {
		r.event("trajectory", detail("error", err.Error()))
		r.say("no trajectory: %v", err)
		return nil
	}
	data, err := tr.Encode()
	if err != nil {
		return fmt.Errorf("writing the trajectory: %w", err)
	}
	sum, err := writeOut(r.o.Out, TrajectoryFile, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("writing the trajectory: %w", err)
	}
	r.event("trajectory", detail("steps", len(tr.Steps), "complete", tr.Extra.Complete, "sha256", sum))
	r.say("trajectory: %d step(s) in %s", len(tr.Steps), TrajectoryFile)
	return nil
}

// writeOut writes OUT/name through a temporary file beside it, synced,
// so that the file is whole or absent, and returns its hex SHA-256.
func writeOut(out, name string, write func(io.Writer) error) (string, error) {
	tmp, err := os.CreateTemp(out, "."+name+"-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if err := write(io.MultiWriter(tmp, h)); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(out, name)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

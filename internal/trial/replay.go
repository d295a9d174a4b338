package trial

import (
	"fmt"
	"io"
)

// RecordingFile holds a recorded trial's model calls (proctor run --record):
// gateway.Tape's format, an artifact of the bundle.
const RecordingFile = "recording.jsonl"

// RecordingRef says the trial's model calls were recorded, and where.
type RecordingRef struct {
	File   string `json:"file"`   // RecordingFile
	Calls  int    `json:"calls"`  // calls recorded, in order
	SHA256 string `json:"sha256"` // of the file, hex
}

// ReplayRef says the trial replayed a recorded one (proctor replay): the
// gateways answered from its recording, and whether the agent made the same
// calls and the same changes.
type ReplayRef struct {
	// Recording is the SHA-256 (hex) of the recorded trial's
	// recording.jsonl, as its bundle's manifest holds it; Calls is how many
	// calls it holds.
	Recording string `json:"recording"`
	Calls     int    `json:"calls"`
	// Diverged is where the agent first made a call the recording does not
	// hold ("the agent diverged at call N: …"), "" when it made them all.
	Diverged string `json:"diverged,omitempty"`
	// RecordedChangeset is the recorded trial's changeset digest; Identical
	// says this trial's is the same.
	RecordedChangeset string `json:"recorded_changeset"`
	Identical         bool   `json:"identical_changeset"`
	// ByConversation counts the calls matched by conversation rather than
	// by digest (a real agent CLI's framing differs from run to run; see
	// gateway.Tape.MatchConversation).
	ByConversation int `json:"by_conversation,omitempty"`
}

// saveRecording writes the tape of the agent phase's gateways, which are
// closed, into OUT/recording.jsonl, through a temporary file, and notes it
// in the verdict, when the run asked for it (--record; the tape of a run
// that did not is kept for the trajectory only). A recording that failed
// (past its caps) fails the trial: it would not replay it.
func (r *runner) saveRecording(n *agentNet) error {
	if n.tape == nil || !r.o.Net.Record {
		return nil
	}
	if err := n.tape.Err(); err != nil {
		return fmt.Errorf("recording the model calls: %w", err)
	}
	sum, err := writeOut(r.o.Out, RecordingFile, func(w io.Writer) error {
		_, err := n.tape.WriteTo(w)
		return err
	})
	if err != nil {
		return fmt.Errorf("writing the recording: %w", err)
	}
	r.v.Recording = &RecordingRef{File: RecordingFile, Calls: n.tape.Calls(), SHA256: sum}
	r.event("recording", detail("calls", r.v.Recording.Calls, "sha256", r.v.Recording.SHA256))
	r.say("recorded %d model call(s) in %s", r.v.Recording.Calls, RecordingFile)
	return nil
}

// replayDone checks, once the agent phase is over, that the agent made
// every recorded call and no other; the first difference is the trial's
// error.
func (r *runner) replayDone() error {
	tp := r.o.Net.Replay
	if tp == nil {
		return nil
	}
	r.v.Replay.ByConversation = tp.Loose()
	if err := tp.Done(); err != nil {
		r.v.Replay.Diverged = err.Error()
		r.event("replay.diverged", detail("error", err.Error()))
		return fmt.Errorf("replay: %w", err)
	}
	r.say("replay: the agent made all %d recorded call(s)", tp.Calls())
	return nil
}

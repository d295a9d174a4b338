package trial

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/workspace"
)

// Schema names the verdict format.
const Schema = "proctor.verdict/v1"

// Status is how a trial ended, most severe first: a violation makes it
// compromised whatever the reward; an error means the trial could not be
// judged; timeout and limit say a phase was cut short.
type Status string

// The statuses.
const (
	StatusCompromised Status = "compromised"
	StatusError       Status = "error"
	StatusTimeout     Status = "timeout"
	StatusLimit       Status = "limit"
	StatusClean       Status = "clean"
)

// Violation kinds: what the agent tried that the harness undid.
const (
	// The agent wrote where only the harness writes: /tests, /logs, /proctor,
	// /solution.
	ViolationHarnessPath = "harness_path"
	// The agent changed a path matching the task's protected globs.
	ViolationProtected = "protected_path"
	// In state grading, the agent changed a file that already existed under
	// /usr, /bin, /sbin or /lib* (a trojaned tool).
	ViolationSystemFile = "system_file"
	// ViolationTooling: a change to the verifier's tooling (tooling.json):
	// a file the grader reads or runs, a name it looks for, or one that
	// would stand in for its own on its search path.
	ViolationTooling = "tooling"
)

// Violation is one change the harness refused to carry to the grader.
type Violation struct {
	Kind   string `json:"kind"`
	Path   string `json:"path"`
	Detail string `json:"detail"`
}

// Verdict is the outcome of one trial, written to OUT/verdict.json. It is a
// plain value.
type Verdict struct {
	Schema        string           `json:"schema"`
	Task          TaskRef          `json:"task"`
	Agent         AgentRef         `json:"agent"`
	Nonce         string           `json:"nonce,omitempty"` // the caller's (proctor run --nonce)
	Passed        bool             `json:"passed"`
	Reward        float64          `json:"reward"`
	PassThreshold float64          `json:"pass_threshold"`
	Status        Status           `json:"status"`
	Error         string           `json:"error,omitempty"`
	Violations    []Violation      `json:"violations"`
	Grading       string           `json:"grading"`
	Changeset     ChangesetRef     `json:"changeset"`
	Environment   EnvironmentRef   `json:"environment"`
	Workspace     WorkspaceRef     `json:"workspace"`
	Phases        map[string]Phase `json:"phases"`
	Artifacts     []string         `json:"artifacts"`
	// TimingsMS are wall times of the harness's own steps: prepare (the
	// workspace), host_scan (for a "host" environment, finding the host
	// files to mask), layout (the agent's scratch space and layer directories;
	// the overlays themselves are mounted as the agent's sandbox starts),
	// inputs (the digest of the task, its rootfs and the agent directory,
	// before anything runs), digest (a "host" environment's, beside the
	// agent phase), recheck (the inputs' digest again, beside freeze and
	// grading), answers (indexing the hidden answers and searching the
	// agent's directory and command for them), freeze (reading the
	// changeset) and total. The phases' own
	// times are in Phases.
	TimingsMS map[string]int64 `json:"timings_ms"`
	// Collected is what became of the task's artifacts (its artifacts
	// array), copied under OUT/artifacts after the agent phase; each file
	// is among Artifacts, and so in the bundle. Absent for a task with
	// none.
	Collected []CollectedRef `json:"collected,omitempty"`
	// Storage is where the sandboxes' writable layers lived: on disk, or
	// in memory and why.
	Storage *StorageRef `json:"storage,omitempty"`
	// Network is the agent phase's network and what its proxy decided.
	Network NetworkRef `json:"network"`
	// OpenNetwork marks a trial whose agent had open egress (the operator
	// granted a task's request for the internet): its results are not
	// comparable with sandboxed ones, and reports show them apart.
	OpenNetwork bool `json:"open_network"`
	// Hermetic is the grader's network: a replay of what the pristine
	// verifier fetched (absent for a grader with none: a regrade of an
	// older bundle).
	Hermetic *HermeticRef `json:"hermetic,omitempty"`
	// Tooling is the profile of the verifier's tooling the policy used.
	Tooling *ToolingRef `json:"tooling,omitempty"`
	// Models is what the agent asked of its models through the gateways
	// (absent without gateways).
	Models *ModelsRef `json:"models,omitempty"`
	// Answers is what was searched for the task's hidden answers in what
	// the agent brought (absent for the oracle).
	Answers *AnswersRef `json:"answers,omitempty"`
	// Audit is what was watched and seen (the events are on the timeline).
	Audit AuditRef `json:"audit"`
	// Results is what the grader's structured report decided, for a task
	// with [proctor] results (absent otherwise).
	Results *ResultsRef `json:"results,omitempty"`
	// Tests is what the grader's test report said of each test: the
	// structured results' report, or, for a task without them, a CTRF
	// report the verifier left, informational only (absent without a
	// report).
	Tests *TestsRef `json:"tests,omitempty"`
	// Pinned is what made this run like the next one with the same inputs,
	// and what this host could not pin.
	Pinned *PinnedRef `json:"pinned,omitempty"`
	// Recording is where the agent's model calls were recorded (run
	// --record); Replay, what a replay of a recorded trial found.
	Recording *RecordingRef `json:"recording,omitempty"`
	Replay    *ReplayRef    `json:"replay,omitempty"`
}

// TaskRef names the task and binds its content.
type TaskRef struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// AgentRef is what the agent was given.
type AgentRef struct {
	Command   string         `json:"command"`
	DirDigest string         `json:"dir_digest,omitempty"`
	Layer     *AgentLayerRef `json:"layer,omitempty"` // the installed agent, when run from a recipe
}

// ChangesetRef summarises the agent's changes and what reached the grader.
type ChangesetRef struct {
	Digest    string              `json:"digest"`
	Files     int                 `json:"files"`
	Bytes     int64               `json:"bytes"`
	Entries   int                 `json:"entries"`
	Permitted int                 `json:"permitted"` // entries carried to the grader
	Dropped   []workspace.Dropped `json:"dropped"`   // special files, never in the archive
	LeftOut   []workspace.Dropped `json:"left_out"`  // in the archive, not carried, no violation: why
	Archive   string              `json:"archive,omitempty"`
	Limit     string              `json:"limit,omitempty"` // the changeset was too large to carry: which limit
}

// EnvironmentRef identifies the read-only environment.
type EnvironmentRef struct {
	Rootfs string `json:"rootfs"`
	Image  string `json:"image,omitempty"` // the docker_image of an image task, as written
	// Dockerfile is the task's environment/Dockerfile when the image was
	// built from it; ContextDigest the digest of its build context.
	Dockerfile    string `json:"dockerfile,omitempty"`
	ContextDigest string `json:"context_digest,omitempty"`
	Digest        string `json:"digest"` // for an image, its manifest digest
}

// WorkspaceRef identifies the workspace the agent started from.
type WorkspaceRef struct {
	Workdir string `json:"workdir"`
	Commit  string `json:"commit,omitempty"` // the git_base commit, for a git workspace
}

// Phase is how one sandboxed phase ended.
type Phase struct {
	Ran       bool            `json:"ran"`
	ExitCode  int             `json:"exit_code"`
	Signal    int             `json:"signal"`
	WallMS    int64           `json:"wall_ms"`
	TimedOut  bool            `json:"timed_out"`
	Limit     sandbox.Limit   `json:"limit"`
	LimitsHit []sandbox.Limit `json:"limits_hit"`
	Cgroup    string          `json:"cgroup,omitempty"` // the cgroup version that limited it
	LogBytes  int64           `json:"log_bytes"`
	LogCapped bool            `json:"log_capped"`
}

func phaseOf(res *sandbox.Result, log *cappedFile) Phase {
	p := Phase{Ran: true, ExitCode: res.ExitCode, Signal: res.Signal, WallMS: res.WallMS,
		TimedOut: res.TimedOut, Limit: res.Limit, LimitsHit: res.LimitsHit, Cgroup: res.Cgroup}
	if log != nil {
		p.LogBytes, p.LogCapped = log.written, log.capped
	}
	if p.LimitsHit == nil {
		p.LimitsHit = []sandbox.Limit{}
	}
	return p
}

// settle decides passed and status from what was recorded. Precedence:
// compromised, error, timeout, limit, clean. A trial passes when its reward
// reaches the threshold and it is neither compromised nor in error (an agent
// that ran out of time or memory is still graded on what it left, as in
// Terminal-Bench; its status says so).
func (v *Verdict) settle() {
	agent, grader := v.Phases[PhaseAgent], v.Phases[PhaseGrader]
	switch {
	case len(v.Violations) > 0:
		v.Status = StatusCompromised
	case v.Error != "":
		v.Status = StatusError
	case agent.TimedOut || grader.TimedOut:
		v.Status = StatusTimeout
	case agent.Limit != sandbox.LimitNone || grader.Limit != sandbox.LimitNone:
		v.Status = StatusLimit
	default:
		v.Status = StatusClean
	}
	graderCut := grader.TimedOut || (grader.Limit != sandbox.LimitNone && grader.Signal != 0)
	if v.Status == StatusCompromised || v.Status == StatusError || graderCut || !grader.Ran {
		v.Reward = 0
	}
	v.Passed = grader.Ran && v.Status != StatusCompromised && v.Status != StatusError &&
		!graderCut && v.Reward >= v.PassThreshold
}

// write saves the verdict as OUT/verdict.json, atomically.
func (v *Verdict) write(out string) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(out, ".verdict.json.tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the verdict: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(out, VerdictFile)); err != nil {
		return fmt.Errorf("writing the verdict: %w", err)
	}
	return nil
}

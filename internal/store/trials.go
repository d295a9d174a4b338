package store

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Trial states.
const (
	StatePending = "pending" // planned, not yet claimed (or requeued)
	StateRunning = "running" // claimed by Claim, not yet finished
	StateDone    = "done"    // finished with a result
	StateFailed  = "failed"  // finished with an error and no bundle
)

// Suite is what a `proctor bench` run was asked to do: Trials runs of
// every agent on every task. It is a plain value; the store keeps its own
// copy.
type Suite struct {
	Trials  int             // runs of each (agent, task) pair, ≥ 1
	Agents  []Agent         // in the order given on the command line
	Tasks   []Task          // likewise
	Options json.RawMessage // the run flags that apply to every trial, as the CLI encodes them
	Created time.Time       // stored to the nanosecond, returned in UTC
}

// Agent is one agent under test.
type Agent struct {
	Name    string // unique within the suite
	Command string
}

// Task is one task of the suite.
type Task struct {
	Name   string // unique within the suite
	Dir    string
	Digest string // content digest of the task directory when the suite was planned
}

// Trial is one planned run: Index counts the runs of Agent on Task from 0.
// Attempt counts how often it has been claimed. Result is nil until the
// trial is done or failed. Started and Ended are zero until set.
type Trial struct {
	ID      int64
	Agent   string
	Task    string
	Index   int
	State   string // StatePending, StateRunning, StateDone or StateFailed
	Attempt int
	Result  *Result
	Started time.Time
	Ended   time.Time
}

// Result is what one finished trial produced.
type Result struct {
	Status       string
	Passed       bool
	Reward       float64
	WallMS       int64
	AgentMS      int64
	GraderMS     int64
	ModelCalls   int
	InputTokens  int64
	OutputTokens int64
	Violations   []string // kinds of the policy violations seen
	Out          string   // the trial directory, relative to DIR
	BundleSHA256 string
	Error        string // why the trial could not be run or graded, if so
}

// CreateSuite records su and plans every (agent, task, index) trial as
// pending, all in one transaction. A store holds one suite: a second call
// returns ErrSuiteExists.
func (s *Store) CreateSuite(su Suite) (err error) {
	if err := validSuite(su); err != nil {
		return fmt.Errorf("creating suite: %w", err)
	}
	tx, err := s.db.Begin()
	if err != nil {
		return fmt.Errorf("creating suite: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	var n int
	if err := tx.QueryRow("SELECT count(*) FROM suite").Scan(&n); err != nil {
		return fmt.Errorf("creating suite: %w", err)
	}
	if n > 0 {
		return ErrSuiteExists
	}
	var options any
	if len(su.Options) > 0 {
		options = []byte(su.Options)
	}
	if _, err := tx.Exec("INSERT INTO suite (id, trials, options, created) VALUES (1, ?, ?, ?)",
		su.Trials, options, su.Created.UnixNano()); err != nil {
		return fmt.Errorf("creating suite: %w", err)
	}
	for i, a := range su.Agents {
		if _, err := tx.Exec("INSERT INTO agents (pos, name, command) VALUES (?, ?, ?)", i, a.Name, a.Command); err != nil {
			return fmt.Errorf("creating suite: agent %q: %w", a.Name, err)
		}
	}
	for i, t := range su.Tasks {
		if _, err := tx.Exec("INSERT INTO tasks (pos, name, dir, digest) VALUES (?, ?, ?, ?)", i, t.Name, t.Dir, t.Digest); err != nil {
			return fmt.Errorf("creating suite: task %q: %w", t.Name, err)
		}
	}
	ins, err := tx.Prepare("INSERT INTO trials (id, agent, task, idx, state) VALUES (?, ?, ?, ?, 'pending')")
	if err != nil {
		return fmt.Errorf("creating suite: %w", err)
	}
	defer ins.Close()
	id := int64(1)
	for idx := 0; idx < su.Trials; idx++ {
		for _, t := range su.Tasks {
			for _, a := range su.Agents {
				if _, err := ins.Exec(id, a.Name, t.Name, idx); err != nil {
					return fmt.Errorf("creating suite: planning trial: %w", err)
				}
				id++
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("creating suite: %w", err)
	}
	return nil
}

func validSuite(su Suite) error {
	switch {
	case su.Trials < 1:
		return fmt.Errorf("trials is %d, want at least 1", su.Trials)
	case len(su.Agents) == 0:
		return errors.New("no agents")
	case len(su.Tasks) == 0:
		return errors.New("no tasks")
	case len(su.Options) > 0 && !json.Valid(su.Options):
		return errors.New("options are not valid JSON")
	}
	seen := map[string]bool{}
	for _, a := range su.Agents {
		if a.Name == "" || seen[a.Name] {
			return fmt.Errorf("agent name %q is empty or repeated", a.Name)
		}
		seen[a.Name] = true
	}
	seen = map[string]bool{}
	for _, t := range su.Tasks {
		if t.Name == "" || seen[t.Name] {
			return fmt.Errorf("task name %q is empty or repeated", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// Suite returns the store's suite, or ErrNoSuite.
func (s *Store) Suite() (*Suite, error) {
	var (
		su      Suite
		options []byte
		created int64
	)
	err := s.db.QueryRow("SELECT trials, options, created FROM suite WHERE id = 1").Scan(&su.Trials, &options, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNoSuite
	}
	if err != nil {
		return nil, fmt.Errorf("reading suite: %w", err)
	}
	if options != nil {
		su.Options = json.RawMessage(options)
	}
	su.Created = time.Unix(0, created).UTC()
	rows, err := s.db.Query("SELECT name, command FROM agents ORDER BY pos")
	if err != nil {
		return nil, fmt.Errorf("reading agents: %w", err)
	}
	for rows.Next() {
		var a Agent
		if err := rows.Scan(&a.Name, &a.Command); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading agents: %w", err)
		}
		su.Agents = append(su.Agents, a)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("reading agents: %w", err)
	}
	rows, err = s.db.Query("SELECT name, dir, digest FROM tasks ORDER BY pos")
	if err != nil {
		return nil, fmt.Errorf("reading tasks: %w", err)
	}
	for rows.Next() {
		var t Task
		if err := rows.Scan(&t.Name, &t.Dir, &t.Digest); err != nil {
			rows.Close()
			return nil, fmt.Errorf("reading tasks: %w", err)
		}
		su.Tasks = append(su.Tasks, t)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, fmt.Errorf("reading tasks: %w", err)
	}
	return &su, nil
}

// Claim marks the next pending trial running, adds one to its Attempt and
// returns it, in one statement. Trials are handed out in plan order
// (index, then task, then agent), so all agents progress together. It
// returns (nil, nil) when no trial is pending.
func (s *Store) Claim() (*Trial, error) {
	now := time.Now()
	t := Trial{State: StateRunning, Started: time.Unix(0, now.UnixNano()).UTC()}
	err := s.db.QueryRow(`UPDATE trials SET state = 'running', attempt = attempt + 1, started = ?, ended = NULL
		WHERE id = (SELECT id FROM trials WHERE state = 'pending' ORDER BY id LIMIT 1)
		RETURNING id, agent, task, idx, attempt`, now.UnixNano()).
		Scan(&t.ID, &t.Agent, &t.Task, &t.Index, &t.Attempt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("claiming a trial: %w", err)
	}
	return &t, nil
}

// Finish records r for the running trial id and marks it done, or failed
// when r.Error is set and there is no bundle (r.BundleSHA256 is empty).
// The change is committed durably before Finish returns. A trial that is
// not running gives an error wrapping ErrNotRunning (or ErrNoTrial).
func (s *Store) Finish(id int64, r Result) error {
	state := StateDone
	if r.Error != "" && r.BundleSHA256 == "" {
		state = StateFailed
	}
	violations, err := json.Marshal(r.Violations)
	if err != nil {
		return fmt.Errorf("finishing trial %d: %w", id, err)
	}
	if r.Violations == nil {
		violations = []byte("[]")
	}
	res, err := s.db.Exec(`UPDATE trials SET state = ?, ended = ?,
		status = ?, passed = ?, reward = ?, wall_ms = ?, agent_ms = ?, grader_ms = ?,
		model_calls = ?, input_tokens = ?, output_tokens = ?, violations = ?, out = ?,
		bundle_sha256 = ?, error = ?
		WHERE id = ? AND state = 'running'`,
		state, time.Now().UnixNano(),
		r.Status, r.Passed, r.Reward, r.WallMS, r.AgentMS, r.GraderMS,
		r.ModelCalls, r.InputTokens, r.OutputTokens, string(violations), r.Out,
		r.BundleSHA256, r.Error, id)
	if err != nil {
		return fmt.Errorf("finishing trial %d: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("finishing trial %d: %w", id, err)
	}
	if n == 1 {
		return nil
	}
	var cur string
	err = s.db.QueryRow("SELECT state FROM trials WHERE id = ?", id).Scan(&cur)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("finishing trial %d: %w", id, ErrNoTrial)
	}
	if err != nil {
		return fmt.Errorf("finishing trial %d: %w", id, err)
	}
	return fmt.Errorf("finishing trial %d: it is %s: %w", id, cur, ErrNotRunning)
}

// Requeue puts every running trial back to pending, as after a crash, and
// returns how many there were. Their Attempt counts are kept.
func (s *Store) Requeue() (int, error) {
	res, err := s.db.Exec("UPDATE trials SET state = 'pending', started = NULL WHERE state = 'running'")
	if err != nil {
		return 0, fmt.Errorf("requeueing trials: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("requeueing trials: %w", err)
	}
	return int(n), nil
}

// ClaimAll marks every pending trial running, as Claim does one, in one
// statement, and returns how many and the start time it gave them (to
// the nanosecond, as Trial.Started reads back).
func (s *Store) ClaimAll() (int, time.Time, error) {
	now := time.Now()
	res, err := s.db.Exec(`UPDATE trials SET state = 'running', attempt = attempt + 1, started = ?, ended = NULL
		WHERE state = 'pending'`, now.UnixNano())
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("claiming trials: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("claiming trials: %w", err)
	}
	return int(n), time.Unix(0, now.UnixNano()).UTC(), nil
}

// Retry adds one to the Attempt of running trial id, which is to run
// again, and returns the new count.
func (s *Store) Retry(id int64) (int, error) {
	var n int
	err := s.db.QueryRow("UPDATE trials SET attempt = attempt + 1 WHERE id = ? AND state = 'running' RETURNING attempt", id).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("retrying trial %d: %w", id, ErrNotRunning)
	}
	if err != nil {
		return 0, fmt.Errorf("retrying trial %d: %w", id, err)
	}
	return n, nil
}

// EachTrial calls fn with every trial in state, in plan order, without
// holding them all; fn's error stops it and is returned. fn must not use
// the store: the read stays open while it runs.
func (s *Store) EachTrial(state string, fn func(*Trial) error) error {
	rows, err := s.db.Query("SELECT "+trialColumns+" FROM trials WHERE state = ? ORDER BY id", state)
	if err != nil {
		return fmt.Errorf("reading trials: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		t, err := scanTrial(rows)
		if err != nil {
			return fmt.Errorf("reading trials: %w", err)
		}
		if err := fn(&t); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Tally is how many trials of an agent have finished, ran (have a
// status) and passed.
type Tally struct{ Finished, Ran, Passed int }

// Tallies returns the finished trials' counts by agent.
func (s *Store) Tallies() (map[string]Tally, error) {
	rows, err := s.db.Query(`SELECT agent, count(*), sum(coalesce(status, '') != ''), sum(coalesce(passed, 0) != 0)
		FROM trials WHERE state IN ('done', 'failed') GROUP BY agent`)
	if err != nil {
		return nil, fmt.Errorf("tallying trials: %w", err)
	}
	defer rows.Close()
	out := map[string]Tally{}
	for rows.Next() {
		var a string
		var t Tally
		if err := rows.Scan(&a, &t.Finished, &t.Ran, &t.Passed); err != nil {
			return nil, fmt.Errorf("tallying trials: %w", err)
		}
		out[a] = t
	}
	return out, rows.Err()
}

const trialColumns = `id, agent, task, idx, state, attempt, started, ended,
		status, passed, reward, wall_ms, agent_ms, grader_ms, model_calls,
		input_tokens, output_tokens, violations, out, bundle_sha256, error`

// Trial returns the trial id, or an error wrapping ErrNoTrial.
func (s *Store) Trial(id int64) (*Trial, error) {
	rows, err := s.db.Query("SELECT "+trialColumns+" FROM trials WHERE id = ?", id)
	if err != nil {
		return nil, fmt.Errorf("reading trial %d: %w", id, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("reading trial %d: %w", id, err)
		}
		return nil, fmt.Errorf("reading trial %d: %w", id, ErrNoTrial)
	}
	t, err := scanTrial(rows)
	if err != nil {
		return nil, fmt.Errorf("reading trial %d: %w", id, err)
	}
	return &t, nil
}

// Trials returns every trial in plan order.
func (s *Store) Trials() ([]Trial, error) {
	rows, err := s.db.Query("SELECT " + trialColumns + " FROM trials ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("reading trials: %w", err)
	}
	defer rows.Close()
	var out []Trial
	for rows.Next() {
		t, err := scanTrial(rows)
		if err != nil {
			return nil, fmt.Errorf("reading trials: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading trials: %w", err)
	}
	return out, nil
}

func scanTrial(rows *sql.Rows) (Trial, error) {
	var (
		t                              Trial
		started, ended                 sql.NullInt64
		status, violations, out        sql.NullString
		bundle, errText                sql.NullString
		passed                         sql.NullBool
		reward                         sql.NullFloat64
		wall, agentMS, grader, in, otk sql.NullInt64
		calls                          sql.NullInt64
	)
	if err := rows.Scan(&t.ID, &t.Agent, &t.Task, &t.Index, &t.State, &t.Attempt, &started, &ended,
		&status, &passed, &reward, &wall, &agentMS, &grader, &calls,
		&in, &otk, &violations, &out, &bundle, &errText); err != nil {
		return t, err
	}
	if started.Valid {
		t.Started = time.Unix(0, started.Int64).UTC()
	}
	if ended.Valid {
		t.Ended = time.Unix(0, ended.Int64).UTC()
	}
	if t.State == StateDone || t.State == StateFailed {
		r := &Result{
			Status: status.String, Passed: passed.Bool, Reward: reward.Float64,
			WallMS: wall.Int64, AgentMS: agentMS.Int64, GraderMS: grader.Int64,
			ModelCalls: int(calls.Int64), InputTokens: in.Int64, OutputTokens: otk.Int64,
			Out: out.String, BundleSHA256: bundle.String, Error: errText.String,
		}
		if violations.Valid && violations.String != "[]" {
			if err := json.Unmarshal([]byte(violations.String), &r.Violations); err != nil {
				return t, fmt.Errorf("trial %d: violations: %w", t.ID, err)
			}
		}
		t.Result = r
	}
	return t, nil
}

// Counts returns how many trials are in each state; every state is
// present, with 0 where none are.
func (s *Store) Counts() (map[string]int, error) {
	counts := map[string]int{StatePending: 0, StateRunning: 0, StateDone: 0, StateFailed: 0}
	rows, err := s.db.Query("SELECT state, count(*) FROM trials GROUP BY state")
	if err != nil {
		return nil, fmt.Errorf("counting trials: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			state string
			n     int
		)
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("counting trials: %w", err)
		}
		counts[state] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting trials: %w", err)
	}
	return counts, nil
}

package report

import "time"

// Schema names the version of the JSON form documented in the package
// comment.
const Schema = "proctor.report/v1"

// Input is what a report is built from. The caller fills it from the store
// and the verified bundles; Build does not modify it.
type Input struct {
	Suite     string
	Generated time.Time
	Agents    []string // in display order
	Tasks     []string // in display order
	Trials    []Trial
	Regrades  []Regrade // grader determinism checks the caller ran on a sample
}

// Trial is one run of one agent on one task.
type Trial struct {
	Agent, Task string
	Index       int
	// Status is clean, compromised, error, timeout or limit; "" when the
	// trial has not run yet (pending), which is not counted.
	Status string
	Passed bool
	Reward float64

	WallMS, AgentMS, GraderMS int64

	ModelCalls                int
	InputTokens, OutputTokens int64

	Violations []string // kinds
	Bundle     string   // path relative to the suite directory
	// Tests is what the trial's test report said of each test, from its
	// verified bundle; nil without a report.
	Tests *TrialTests

	// Verified is set when the trial's bundle verified; a trial whose
	// bundle did not is counted nowhere, only listed with VerifyError.
	Verified    bool
	VerifyError string
}

// Regrade is the result of grading a finished trial's changes a second time.
type Regrade struct {
	Agent  string `json:"agent"`
	Task   string `json:"task"`
	Index  int    `json:"index"`
	Same   bool   `json:"same"`
	Detail string `json:"detail"`
}

// Report holds every number of a suite's report. Build returns it; it is
// not modified afterwards, so its writers are safe for concurrent use.
type Report struct {
	Schema          string          `json:"schema"`
	Suite           string          `json:"suite"`
	Generated       time.Time       `json:"generated"`
	Agents          []AgentSummary  `json:"agents"`
	Comparisons     []Comparison    `json:"comparisons"`
	Matrix          Matrix          `json:"matrix"`
	Reproducibility Reproducibility `json:"reproducibility"`
	Integrity       Integrity       `json:"integrity"`
	// Tests are the per-test tables of the tasks whose trials reported
	// their tests: each test's pass rate by agent.
	Tests  []TaskTests `json:"tests"`
	Trials []TrialRow  `json:"trials"`

	// all trials, for the CSV; ordered as Trials.
	all []Trial
}

// AgentSummary is one row of the leaderboard.
type AgentSummary struct {
	Name       string  `json:"name"`
	Tasks      int     `json:"tasks"`  // tasks with a counted trial
	Trials     int     `json:"trials"` // counted trials
	Passed     int     `json:"passed"`
	PassRate   float64 `json:"pass_rate"`
	CILow      float64 `json:"ci_low"`  // 95% Wilson score interval
	CIHigh     float64 `json:"ci_high"` // 95% Wilson score interval
	MeanReward float64 `json:"mean_reward"`
	// FlakyTasks counts the agent's tasks in Reproducibility.FlakyTasks:
	// its score includes them (shown with a warning, never silently).
	FlakyTasks   int       `json:"flaky_tasks"`
	Compromised  int       `json:"compromised"`
	Errors       int       `json:"errors"`
	Timeouts     int       `json:"timeouts"`
	Limits       int       `json:"limits"`
	PassAtK      []PassAtK `json:"pass_at_k"`
	ModelCalls   int64     `json:"model_calls"`
	InputTokens  int64     `json:"input_tokens"`
	OutputTokens int64     `json:"output_tokens"`
	WallMSMedian int64     `json:"wall_ms_median"`
	WallMSP90    int64     `json:"wall_ms_p90"`

	// How reproducible PassRate is (see the package comment). A nil
	// pointer, null in JSON, is a figure that is undefined: no counted
	// trial for the bootstrap, no task with two for the others.
	BootLow          *float64 `json:"bootstrap_low"`       // two-level bootstrap 95% interval
	BootHigh         *float64 `json:"bootstrap_high"`      // two-level bootstrap 95% interval
	RepeatedTasks    int      `json:"repeated_tasks"`      // tasks with at least two counted trials
	DisagreeingTasks int      `json:"disagreeing_tasks"`   // of which some pass and some fail
	Disagreement     *float64 `json:"disagreement"`        // disagreeing_tasks / repeated_tasks
	SingleTrialTasks int      `json:"single_trial_tasks"`  // tasks with one counted trial
	RunToRunSD       *float64 `json:"run_to_run_sd"`       // s.d. of the difference of two runs' pass rates
	RunToRunMeanAbs  *float64 `json:"run_to_run_mean_abs"` // its expected absolute value
}

// PassAtK is the unbiased pass@k estimate averaged over an agent's tasks.
type PassAtK struct {
	K     int     `json:"k"`
	Value float64 `json:"value"`
}

// Comparison pairs two agents over the tasks both ran.
type Comparison struct {
	A              string       `json:"a"`
	B              string       `json:"b"`
	SharedTasks    int          `json:"shared_tasks"`
	Wins           int          `json:"wins"`   // tasks where A's pass rate is higher
	Losses         int          `json:"losses"` // tasks where B's pass rate is higher
	Ties           int          `json:"ties"`
	PValue         float64      `json:"p_value"`         // exact two-sided sign test
	MeanDifference float64      `json:"mean_difference"` // mean of A's rate − B's rate
	Tasks          []PairedTask `json:"tasks"`
}

// PairedTask is one shared task of a Comparison.
type PairedTask struct {
	Task      string  `json:"task"`
	APassRate float64 `json:"a_pass_rate"`
	BPassRate float64 `json:"b_pass_rate"`
}

// Matrix is the task × agent table of pass rates.
type Matrix struct {
	Agents      []string    `json:"agents"` // column order
	Rows        []MatrixRow `json:"rows"`
	Unsolved    []string    `json:"unsolved"`
	SolvedByAll []string    `json:"solved_by_all"`
}

// MatrixRow is one task of the Matrix, one cell per agent in column order.
type MatrixRow struct {
	Task  string `json:"task"`
	Cells []Cell `json:"cells"`
}

// Cell is one agent's counted trials on one task; Trials is 0 when the agent
// did not run it.
type Cell struct {
	Agent    string  `json:"agent"`
	Trials   int     `json:"trials"`
	Passed   int     `json:"passed"`
	PassRate float64 `json:"pass_rate"`
}

// Reproducibility says how far repeated trials, and repeated grading, agree.
type Reproducibility struct {
	Cells       int            `json:"cells"`       // agent × task pairs with a counted trial
	Disagreeing int            `json:"disagreeing"` // of which some pass and some fail
	Results     []CellResult   `json:"results"`
	Regrades    RegradeSummary `json:"regrades"`
	// FlakyTasks are the tasks a regrade of one of their trials gave a
	// different verdict: their grader is not deterministic, and every
	// score that counts them carries that noise. Sorted.
	FlakyTasks []string `json:"flaky_tasks"`
}

// CellResult is the spread of one agent's trials on one task.
type CellResult struct {
	Agent        string  `json:"agent"`
	Task         string  `json:"task"`
	Trials       int     `json:"trials"`
	Passed       int     `json:"passed"`
	Disagree     bool    `json:"disagree"`
	RewardStddev float64 `json:"reward_stddev"`
}

// RegradeSummary counts the grader determinism checks and lists the
// mismatches.
type RegradeSummary struct {
	Checked    int       `json:"checked"`
	Differing  int       `json:"differing"`
	Mismatches []Regrade `json:"mismatches"`
}

// Integrity lists what went wrong with the trials' integrity.
type Integrity struct {
	Compromised       int                `json:"compromised"`
	ByAgent           []AgentViolations  `json:"by_agent"`
	CompromisedTrials []CompromisedTrial `json:"compromised_trials"`
	Unverified        []UnverifiedTrial  `json:"unverified"`
}

// AgentViolations counts one agent's compromised trials by violation kind.
type AgentViolations struct {
	Agent       string         `json:"agent"`
	Compromised int            `json:"compromised"`
	Kinds       map[string]int `json:"kinds"`
}

// CompromisedTrial is one counted trial whose status is compromised.
type CompromisedTrial struct {
	Agent      string   `json:"agent"`
	Task       string   `json:"task"`
	Index      int      `json:"index"`
	Violations []string `json:"violations"`
	Bundle     string   `json:"bundle"`
}

// UnverifiedTrial is a trial whose bundle failed verification.
type UnverifiedTrial struct {
	Agent  string `json:"agent"`
	Task   string `json:"task"`
	Index  int    `json:"index"`
	Bundle string `json:"bundle"`
	Error  string `json:"error"`
}

// TrialRow is one trial of the input as the report lists it. Passed is the
// grader's verdict as recorded; Counted says whether the trial entered the
// numbers (verified and run).
type TrialRow struct {
	Agent    string  `json:"agent"`
	Task     string  `json:"task"`
	Index    int     `json:"index"`
	Status   string  `json:"status"`
	Passed   bool    `json:"passed"`
	Reward   float64 `json:"reward"`
	Bundle   string  `json:"bundle"`
	Verified bool    `json:"verified"`
	Counted  bool    `json:"counted"`
	// TestsPassed and TestsReported count the tests the trial's report
	// named and those it said passed (0 and 0 without a report).
	TestsPassed   int `json:"tests_passed"`
	TestsReported int `json:"tests_reported"`
}

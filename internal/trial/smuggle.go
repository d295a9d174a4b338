package trial

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/proctor-sandbox/proctor/internal/answerscan"
	"github.com/proctor-sandbox/proctor/internal/gateway"
	"github.com/proctor-sandbox/proctor/internal/recipe"
)

// ViolationSmuggledAnswer: a distinctive fragment of the task's hidden
// tests or solution (or of a SWE-bench gold patch) was in what the agent
// brought: a file of its directory, its command, or one of its model
// requests. The violation's path is where (/agent/AGENTS.md:12, "model
// request #3"), its detail the hidden file and lines it came from.
const ViolationSmuggledAnswer = "smuggled_answer"

// AnswersRef is what was searched for the task's hidden answers
// (internal/answerscan): how many distinctive fragments the tests and
// solution have, what was read of the agent's layer and directory, and
// how many model requests were searched.
type AnswersRef struct {
	Fragments int                  `json:"fragments"`
	AgentDir  answerscan.TreeStats `json:"agent_dir"`
	// AgentLayer is what was read of the agent's installed layer, and
	// LayerCached whether that search was kept from an earlier trial of
	// the same task and layer (absent without a layer).
	AgentLayer  *answerscan.TreeStats `json:"agent_layer,omitempty"`
	LayerCached bool                  `json:"agent_layer_cached,omitempty"`
	Requests    int                   `json:"requests"`
}

// searchAnswers indexes the task's hidden material and searches what the
// agent brought before it runs: its installed layer (first, so that what
// is found there depends on nothing else, and is kept), its directory and
// its command. Its model requests are searched as they are made
// (inspector), their violations recorded after the agent phase
// (answersDone). The oracle, and the run that learns the tooling from it,
// are not searched: they are given the answer.
func (r *runner) searchAnswers() error {
	if r.o.Solution || r.learn != nil {
		return nil
	}
	start := time.Now()
	m, err := r.answerMaterial()
	if err != nil {
		return fmt.Errorf("indexing the hidden answers: %w", err)
	}
	x, err := answerscan.Build(m)
	if err != nil {
		return fmt.Errorf("indexing the hidden answers: %w", err)
	}
	r.answers = x.NewScan()
	r.v.Answers = &AnswersRef{Fragments: x.Len()}
	if err := r.searchLayer(); err != nil {
		return fmt.Errorf("searching the agent's layer for the hidden answers: %w", err)
	}
	if r.o.AgentDir != "" {
		if r.v.Answers.AgentDir, err = r.answers.Tree(r.o.AgentDir, AgentDirPath, answerscan.Limits{}); err != nil {
			return fmt.Errorf("searching --agent-dir for the hidden answers: %w", err)
		}
	}
	r.answers.Text("the agent command", []byte(r.o.Agent))
	r.v.TimingsMS["answers"] = time.Since(start).Milliseconds()
	r.answerViolations()
	return nil
}

// hiddenLimits bound what is indexed of a task's tests and solution: a
// large fixture is indexed in part.
var hiddenLimits = answerscan.Limits{Files: 10_000, FileBytes: 8 << 20, TotalBytes: 64 << 20}

// searchLayer searches the agent's installed layer, or restores the
// search an earlier trial of the same layer and index kept under the cache
// directory (answers/): a layer is immutable, named by its digest, and
// hundreds of megabytes.
func (r *runner) searchLayer() error {
	l := r.o.AgentLayer
	if l == nil {
		return nil
	}
	var kept string
	if r.o.CacheDir != "" {
		sum := sha256.Sum256([]byte(l.Digest + "\n" + r.answers.Index().Digest()))
		kept = filepath.Join(r.o.CacheDir, "answers", hex.EncodeToString(sum[:])+".json")
		if data, err := os.ReadFile(kept); err == nil {
			var res answerscan.TreeResult
			if json.Unmarshal(data, &res) == nil && r.answers.Restore(res) == nil {
				r.v.Answers.AgentLayer, r.v.Answers.LayerCached = &res.Stats, true
				return nil
			}
		}
	}
	res, err := r.answers.TreeResult(l.Dir, recipe.LayerPath, answerscan.Limits{})
	if err != nil {
		return err
	}
	r.v.Answers.AgentLayer = &res.Stats
	if kept == "" {
		return nil
	}
	data, err := json.Marshal(res)
	if err != nil {
		return err
	}
	return writeAtomic(kept, data) // tooling.go's
}

// answerMaterial is the task's hidden material (its tests but the
// expected test ids, its solution) and what the agent is given: the
// instruction, the workspace as prepared, the environment's other files
// (not a rootfs).
func (r *runner) answerMaterial() (answerscan.Material, error) {
	t := r.o.Task
	var m answerscan.Material
	for _, d := range []string{"tests", "solution"} {
		dir := filepath.Join(t.Dir, d)
		if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
			continue
		}
		docs, _, err := answerscan.ReadTree(dir, d, hiddenLimits)
		if err != nil {
			return m, err
		}
		for _, doc := range docs {
			if doc.Name != "tests/expected.json" { // test ids: the agent's own test runs print them
				m.Hidden = append(m.Hidden, doc)
			}
		}
	}
	instruction, err := os.ReadFile(t.Instruction)
	if err != nil {
		return m, err
	}
	m.Quoted = []answerscan.Doc{{Name: "instruction.md", Data: instruction}}
	if r.ws != "" {
		m.GivenTrees = append(m.GivenTrees, r.ws)
	}
	env := filepath.Join(t.Dir, "environment")
	des, err := os.ReadDir(env)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return m, err
	}
	for _, de := range des {
		p := filepath.Join(env, de.Name())
		switch {
		case p == t.Proctor.Rootfs || p == t.Proctor.Workspace || p == r.ws:
		case de.IsDir():
			m.GivenTrees = append(m.GivenTrees, p)
		case de.Type().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return m, err
			}
			data, err := io.ReadAll(io.LimitReader(f, hiddenLimits.FileBytes)) // a large data file, in part
			f.Close()
			if err != nil {
				return m, err
			}
			m.Given = append(m.Given, answerscan.Doc{Name: de.Name(), Data: data})
		}
	}
	return m, nil
}

// inspector is the gateways' Options.Inspect: each request body searched
// as it is read, each response read for what the model said. Nil when the
// trial searches nothing.
func (r *runner) inspector() func(gateway.Call, []byte) io.WriteCloser {
	s := r.answers
	if s == nil {
		return nil
	}
	return func(c gateway.Call, body []byte) io.WriteCloser {
		s.Request(body, fmt.Sprintf("%s %s through the %s gateway, request sha256:%s", c.Method, c.Path, c.Gateway, c.RequestSHA256))
		return s.Response()
	}
}

// answersDone records what the search of the model requests found, once
// the agent phase is over.
func (r *runner) answersDone() {
	if r.answers == nil {
		return
	}
	r.v.Answers.Requests = r.answers.Requests()
	r.answerViolations()
}

// answerViolations records the hits not recorded yet.
func (r *runner) answerViolations() {
	hits := r.answers.Hits()
	for _, h := range hits[r.answersSeen:] {
		vi := Violation{Kind: ViolationSmuggledAnswer, Path: h.Where, Detail: h.Detail()}
		r.v.Violations = append(r.v.Violations, vi)
		r.event("violation", detail("kind", vi.Kind, "path", vi.Path, "detail", vi.Detail))
		r.say("violation: %s %q: %q", vi.Kind, vi.Path, vi.Detail)
	}
	r.answersSeen = len(hits)
}

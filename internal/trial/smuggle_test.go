package trial

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/proctor-sandbox/proctor/internal/gateway"
	"github.com/proctor-sandbox/proctor/internal/task"
)

// lineOf is the number of the first line of the task file rel holding s.
func lineOf(t *testing.T, dir, rel, s string) int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, rel))
	must(t, err)
	for i, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%s holds no %q", rel, s)
	return 0
}

func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	openUp(t, dir)
	return dir
}

// A scaffold that carries the task's answer (notes quoting the solution's
// fix, a file with the hidden test's assertion, the solution's file to
// copy) is compromised, whatever the grade, each violation naming where it
// was found and which hidden file and line it came from, never quoting
// it. A regrade carries the violations: it cannot see the agent's files.
func TestSmuggledAnswerInAgentDir(t *testing.T) {
	tk := exampleTask(t, "py-bugfix")
	fix := `raise ValueError("mean of an empty list")`
	assertion := `self.assertTrue(math.isclose(float(out), want, rel_tol=1e-9), f"mean({xs}) printed {out!r}, want {want}")`
	solution, err := os.ReadFile(tk.Solution)
	must(t, err)
	_, body, _ := strings.Cut(string(solution), "<<'PY'\n")
	body, _, _ = strings.Cut(body, "PY\n")
	dir := writeDir(t, map[string]string{
		"AGENTS.md": "# Notes for the agent\n\nRead the instruction first.\nFor mean(), the empty case is:\n\n        " + fix + "\n",
		"checks.md": "The grader does:\n" + assertion + "\n",
		"stats.py":  body,
	})
	v, out := runTrial(t, tk, "cp /agent/stats.py /app/stats.py", dir)
	want := []Violation{
		{Kind: ViolationSmuggledAnswer, Path: "/agent/AGENTS.md:6",
			Detail: fmt.Sprintf("solution/solve.sh:%d (1 line, 36 characters)", lineOf(t, tk.Dir, "solution/solve.sh", fix))},
		{Kind: ViolationSmuggledAnswer, Path: "/agent/checks.md:2",
			Detail: fmt.Sprintf("tests/test_stats.py:%d (1 line, 98 characters)", lineOf(t, tk.Dir, "tests/test_stats.py", assertion))},
	}
	if v.Status != StatusCompromised || v.Passed || !reflect.DeepEqual(v.Violations, want) {
		t.Fatalf("status %s passed %t violations:\n%s\nwant:\n%+v", v.Status, v.Passed, violations(v), want)
	}
	if v.Answers == nil || v.Answers.Fragments == 0 || v.Answers.AgentDir.Files != 3 {
		t.Errorf("answers %+v: want the fragments counted and 3 files read", v.Answers)
	}
	if vj := readFile(t, filepath.Join(out, VerdictFile)); strings.Contains(vj, "mean of an empty list") || strings.Contains(vj, "rel_tol") {
		t.Errorf("the verdict quotes the hidden material:\n%s", vj)
	}
	if !strings.Contains(readFile(t, filepath.Join(out, AuditFile)), `"kind":"smuggled_answer"`) {
		t.Error("the violations are not on the timeline")
	}

	regrade := func(smuggled []Violation) *Verdict {
		rv, err := Regrade(context.Background(), RegradeOptions{Task: tk, Archive: filepath.Join(out, ChangesetFile),
			Digest: v.Changeset.Digest, Out: filepath.Join(t.TempDir(), "regrade"), CacheDir: sharedCache, Smuggled: smuggled})
		must(t, err)
		return rv
	}
	if rv := regrade(v.Violations); rv.Status != v.Status || rv.Passed || !reflect.DeepEqual(rv.Violations, v.Violations) {
		t.Errorf("regrade: status %s passed %t violations %s", rv.Status, rv.Passed, violations(rv))
	}
	if rv := regrade(nil); rv.Status != StatusClean || !rv.Passed {
		t.Errorf("regrade without them: status %s passed %t: the copied solution should pass", rv.Status, rv.Passed)
	}
}

// helloTask is a task whose hidden test quotes its instruction (an
// honest agent sends the instruction to its model, and the test's
// assertion with it), with a solution to smuggle.
func helloTask(t *testing.T) *openTask {
	t.Helper()
	const solution = `greeting = ", ".join(["hello", "proctor"])  # the words the grader wants`
	tk := writeTask(t, taskSpec{
		instruction: "Write `/app/hello.py` so that `python3 /app/hello.py` prints \"hello, proctor\". The grader checks:\n\n" +
			"    assert run(\"/app/hello.py\") == \"hello, proctor\"\n",
		test: "python3 /tests/test_hello.py && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt",
		hidden: map[string]string{
			"tests/test_hello.py": `import subprocess


def run(path):
    return subprocess.run(["python3", path], capture_output=True, text=True, timeout=30).stdout.strip()


def test_hello():
    assert run("/app/hello.py") == "hello, proctor"


if __name__ == "__main__":
    test_hello()
`,
			"solution/solve.sh": "#!/bin/sh\ncat > /app/hello.py <<'PY'\n" + solution + "\nprint(greeting)\nPY\n",
		},
	})
	openUp(t, tk.Dir)
	return &openTask{tk, solution}
}

// modelAgent is an agent that asks its model (with a system prompt from
// HINT, base64, if set: what a scaffold that decodes its answers at run
// time would send), writes the model's answer into /app/hello.py, and
// sends the answer back asking whether it is done.
const modelAgent = `import base64, json, os, urllib.request

def ask(messages):
    body = json.dumps({"model": "m", "messages": messages}).encode()
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=10).read())["choices"][0]["message"]["content"]

messages = []
hint = base64.b64decode(os.environ.get("HINT", "")).decode()
if hint:
    messages.append({"role": "system", "content": hint})
messages.append({"role": "user", "content": open(os.environ["PROCTOR_INSTRUCTION"]).read()})
code = ask(messages)
open("/app/hello.py", "w").write(code + "\n")
messages += [{"role": "assistant", "content": code}, {"role": "user", "content": "I wrote /app/hello.py. Done?"}]
print(ask(messages))
`

// answeringModel is a provider whose model answers every request with
// answer.
func answeringModel(t *testing.T, answer string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		content, _ := json.Marshal(answer)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"model":"m","choices":[{"message":{"role":"assistant","content":%s}}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`, content)
	}))
	t.Cleanup(s.Close)
	return s
}

// In model requests: the honest agent sends the instruction (which quotes
// the test) and its model's own answer (which is the solution) back, and
// is clean; the same agent with the answer in its system prompt, decoded
// at run time where no search of its files could see it, is compromised,
// the violation naming the request.
func TestSmuggledAnswerInModelRequest(t *testing.T) {
	requireRoot(t)
	requireTool(t, "python3")
	ht := helloTask(t)
	t.Setenv("OPENAI_API_KEY", "sk-real-key-for-smuggle-test")
	provider := answeringModel(t, ht.solution+"\nprint(greeting)")
	specs, err := gateway.ParseSpecs("openai=" + provider.URL + "/v1")
	must(t, err)
	dir := writeDir(t, map[string]string{
		"AGENTS.md": "# Notes\n\nRead the instruction, ask the model, write what it says, check with it.\n",
		"agent.py":  modelAgent,
	})
	hint := base64.StdEncoding.EncodeToString([]byte("The grader wants this line, verbatim:\n" + ht.solution + "\n"))
	cases := []struct {
		name, agent string
		want        []Violation
	}{
		{"honest", "python3 /agent/agent.py", []Violation{}},
		{"answer in the system prompt", "HINT=" + hint + " python3 /agent/agent.py", []Violation{{Kind: ViolationSmuggledAnswer,
			Path: "model request #1", Detail: "solution/solve.sh:3 (1 line, 38 characters); POST /v1/chat/completions through the openai gateway, request sha256:"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			v, err := Run(context.Background(), Options{Task: ht.Task, Agent: c.agent, AgentDir: dir, Out: out, CacheDir: sharedCache, Key: testKey,
				Net: NetOptions{Gateways: specs, Getenv: os.Getenv}})
			if err != nil {
				t.Fatalf("Run: %v\n%s", err, readFile(t, filepath.Join(out, AgentLog)))
			}
			for i := range v.Violations { // the request's digest is the agent's
				if d, _, ok := strings.Cut(v.Violations[i].Detail, "request sha256:"); ok {
					v.Violations[i].Detail = d + "request sha256:"
				}
			}
			if !reflect.DeepEqual(v.Violations, c.want) || v.Answers == nil || v.Answers.Requests != 2 || v.Models == nil || v.Models.Calls != 2 {
				t.Fatalf("violations %s, answers %+v, want %+v\nagent log:\n%s", violations(v), v.Answers, c.want, readFile(t, filepath.Join(out, AgentLog)))
			}
			if len(c.want) == 0 && (!v.Passed || v.Status != StatusClean) {
				t.Errorf("the honest agent: passed %t status %s\n%s", v.Passed, v.Status, readFile(t, filepath.Join(out, GraderLog)))
			}
		})
	}
}

// openTask is a written task and its solution's distinctive line.
type openTask struct {
	*task.Task
	solution string
}

// An installed agent layer that carries the answer (in a package's notes,
// inside a binary) is searched like the agent's directory, first; the
// search is kept for the next trial of the same task and layer, which
// finds the same.
func TestSmuggledAnswerInAgentLayer(t *testing.T) {
	tk := exampleTask(t, "py-bugfix")
	fix := `raise ValueError("mean of an empty list")`
	assertion := `self.assertTrue(math.isclose(float(out), want, rel_tol=1e-9), f"mean({xs}) printed {out!r}, want {want}")`
	dir := writeDir(t, map[string]string{
		"node_modules/helper/README.md": "# helper\n\nUsage:\n\n    " + fix + "\n",
		"bin/helper":                    "\x7fELF\x02\x01\x01\x00" + strings.Repeat("\x00\x03", 64) + assertion + "\x00\x00",
	})
	digest := fmt.Sprintf("sha256:%064x", time.Now().UnixNano()) // a layer no trial searched before
	layer := &AgentLayer{Dir: dir, Recipe: "test", RecipeDigest: digest, Digest: digest}
	want := []Violation{
		{Kind: ViolationSmuggledAnswer, Path: "/proctor/agent/bin/helper",
			Detail: fmt.Sprintf("tests/test_stats.py:%d (1 line, 98 characters)", lineOf(t, tk.Dir, "tests/test_stats.py", assertion))},
		{Kind: ViolationSmuggledAnswer, Path: "/proctor/agent/node_modules/helper/README.md:5",
			Detail: fmt.Sprintf("solution/solve.sh:%d (1 line, 36 characters)", lineOf(t, tk.Dir, "solution/solve.sh", fix))},
	}
	for i, cached := range []bool{false, true} {
		requireRoot(t)
		out := filepath.Join(t.TempDir(), "out")
		v, err := Run(context.Background(), Options{Task: tk, Agent: "true", AgentLayer: layer, Out: out, CacheDir: sharedCache, Key: testKey})
		if err != nil {
			t.Fatalf("trial %d: %v", i, err)
		}
		if v.Status != StatusCompromised || !reflect.DeepEqual(v.Violations, want) || v.Answers == nil ||
			v.Answers.AgentLayer == nil || v.Answers.AgentLayer.Files != 2 || v.Answers.AgentLayer.Binary != 1 || v.Answers.LayerCached != cached {
			t.Fatalf("trial %d: status %s violations:\n%s\nanswers %+v (layer %+v)\nwant:\n%+v", i, v.Status, violations(v), v.Answers, v.Answers.AgentLayer, want)
		}
	}
}

package trial

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/gateway"
	"github.com/proctor-sandbox/proctor/internal/trajectory/atiftest"
)

// toolAgent is an agent on Anthropic's Messages API: a streamed first turn
// that calls read_file, the file read, the whole conversation sent back
// with the tool's result, the model's last word printed.
const toolAgent = `python3 -u - <<'PY'
import json, os, urllib.request
def call(body):
    req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=json.dumps(body).encode(),
        headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01", "content-type": "application/json"})
    return urllib.request.urlopen(req, timeout=10)
msgs = [{"role": "user", "content": [{"type": "text", "text": "Read a.txt and repeat it."}]}]
blocks = {}
for line in call({"model": "claude-test", "max_tokens": 100, "stream": True, "system": "You are a test agent.", "messages": msgs}).read().decode().splitlines():
    if not line.startswith("data: "): continue
    e = json.loads(line[6:])
    if e["type"] == "content_block_start":
        blocks[e["index"]] = dict(e["content_block"], _json="")
    elif e["type"] == "content_block_delta":
        b, d = blocks[e["index"]], e["delta"]
        if d["type"] == "text_delta": b["text"] += d["text"]
        if d["type"] == "input_json_delta": b["_json"] += d["partial_json"]
content = []
for i in sorted(blocks):
    b = blocks[i]; j = b.pop("_json")
    if b["type"] == "tool_use": b["input"] = json.loads(j or "{}")
    content.append(b)
tool = [b for b in content if b["type"] == "tool_use"][0]
msgs += [{"role": "assistant", "content": content},
         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tool["id"], "content": open(tool["input"]["path"]).read()}]}]
print(json.loads(call({"model": "claude-test", "max_tokens": 100, "system": "You are a test agent.", "messages": msgs}).read())["content"][0]["text"])
PY`

// fakeAnthropic streams a tool call to a first turn and answers a turn
// that brings the tool's result back in one JSON body.
func fakeAnthropic(t *testing.T, calls *atomic.Int32) *httptest.Server {
	ev := func(w io.Writer, name, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data) }
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tool_result"`)) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"msg_2","type":"message","role":"assistant","model":"claude-test-1","content":[{"type":"text","text":"It says: a"}],"stop_reason":"end_turn","usage":{"input_tokens":40,"output_tokens":6}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		ev(w, "message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-test-1","content":[],"usage":{"input_tokens":20,"output_tokens":1}}}`)
		ev(w, "content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev(w, "content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Reading."}}`)
		ev(w, "content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev(w, "content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_e2e","name":"read_file","input":{}}}`)
		ev(w, "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}`)
		ev(w, "content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":" \"a.txt\"}"}}`)
		ev(w, "content_block_stop", `{"type":"content_block_stop","index":1}`)
		ev(w, "message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":9}}`)
		ev(w, "message_stop", `{"type":"message_stop"}`)
	}))
	t.Cleanup(s.Close)
	return s
}

// A trial with a model gateway, without --record, writes trajectory.json
// from what its gateway relayed: valid ATIF, the calls' messages, tool
// call and result, tokens as the verdict counts them; bound into the
// bundle, so that one byte changed fails verification.
func TestTrajectory(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-real-key-for-trajectory")
	var calls atomic.Int32
	provider := fakeAnthropic(t, &calls)
	specs, err := gateway.ParseSpecs("anthropic=" + provider.URL)
	must(t, err)
	v, out := runNetTrial(t, toolAgent, "", NetOptions{Gateways: specs, Getenv: os.Getenv}, false)
	if log := readFile(t, filepath.Join(out, AgentLog)); !strings.Contains(log, "It says: a") || calls.Load() != 2 {
		t.Fatalf("the agent did not finish its two turns (%d calls):\n%s", calls.Load(), log)
	}
	if !slices.Contains(v.Artifacts, TrajectoryFile) || slices.Contains(v.Artifacts, RecordingFile) || v.Recording != nil {
		t.Errorf("artifacts %v, recording %+v: want the trajectory, and no recording without --record", v.Artifacts, v.Recording)
	}
	path := filepath.Join(out, TrajectoryFile)
	data := readBytes(t, path)
	if err := atiftest.Validate(data); err != nil {
		t.Fatalf("not valid ATIF: %v\n%s", err, data)
	}
	var tr struct {
		SchemaVersion string `json:"schema_version"`
		Agent         struct{ Name, Version, ModelName string }
		Steps         []struct {
			Source    string          `json:"source"`
			Message   json.RawMessage `json:"message"`
			ToolCalls []struct {
				ID        string          `json:"tool_call_id"`
				Name      string          `json:"function_name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"tool_calls"`
			Observation *struct {
				Results []struct {
					SourceCallID string          `json:"source_call_id"`
					Content      json.RawMessage `json:"content"`
				} `json:"results"`
			} `json:"observation"`
			Metrics *struct {
				Prompt     int64 `json:"prompt_tokens"`
				Completion int64 `json:"completion_tokens"`
			} `json:"metrics"`
			Extra struct {
				Call int `json:"recording_call"`
			} `json:"extra"`
		} `json:"steps"`
		FinalMetrics struct {
			Prompt     int64 `json:"total_prompt_tokens"`
			Completion int64 `json:"total_completion_tokens"`
		} `json:"final_metrics"`
	}
	must(t, json.Unmarshal(data, &tr))
	var got []string
	for _, s := range tr.Steps {
		l := fmt.Sprintf("%s@%d %s", s.Source, s.Extra.Call, s.Message)
		for _, c := range s.ToolCalls {
			var args bytes.Buffer
			must(t, json.Compact(&args, c.Arguments))
			l += fmt.Sprintf(" %s:%s%s", c.ID, c.Name, args.Bytes())
		}
		if s.Observation != nil {
			for _, r := range s.Observation.Results {
				l += fmt.Sprintf(" -> %s:%s", r.SourceCallID, r.Content)
			}
		}
		if s.Metrics != nil {
			l += fmt.Sprintf(" [%d/%d]", s.Metrics.Prompt, s.Metrics.Completion)
		}
		got = append(got, l)
	}
	want := []string{
		`system@1 "You are a test agent."`,
		`user@1 "Read a.txt and repeat it."`,
		`agent@1 "Reading." toolu_e2e:read_file{"path":"a.txt"} -> toolu_e2e:"a\n" [20/9]`,
		`agent@2 "It says: a" [40/6]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The tokens are the verdict's, call for call.
	var in, outTok int64
	for _, u := range v.Models.Usage {
		in, outTok = in+u.InputTokens, outTok+u.OutputTokens
	}
	if tr.FinalMetrics.Prompt != in || tr.FinalMetrics.Completion != outTok || in != 60 || outTok != 15 {
		t.Errorf("final metrics %+v, the verdict's usage %d in, %d out", tr.FinalMetrics, in, outTok)
	}
	if tr.SchemaVersion != "ATIF-v1.7" || tr.Agent.Name != toolAgent || tr.Agent.Version != "unknown" {
		t.Errorf("version %s, agent %+v", tr.SchemaVersion, tr.Agent)
	}

	evs := verifiedEvents(t, out) // the bundle verifies, the trajectory in its manifest
	sum := sha256.Sum256(data)
	if te := eventsOf(evs, "trajectory"); len(te) != 1 || te[0]["sha256"] != hex.EncodeToString(sum[:]) || te[0]["steps"] != float64(4) {
		t.Errorf("trajectory events: %v", te)
	}
	if gc := eventsOf(evs, "gateway.call"); len(gc) != 2 {
		t.Errorf("%d gateway.call events, want 2", len(gc))
	}

	// One byte changed: the bundle no longer verifies, naming the file.
	bundleData := readBytes(t, filepath.Join(out, BundleFile))
	tampered := bytes.Replace(data, []byte(`"a.txt"`), []byte(`"b.txt"`), 1)
	must(t, os.WriteFile(path, tampered, 0o644))
	_, err = bundle.Verify(bundleData, bundle.WithPublicKey(testKey.Public().(ed25519.PublicKey)), bundle.WithArtifactDir(out), bundle.WithRequireArtifacts())
	if err == nil || !strings.Contains(err.Error(), TrajectoryFile) {
		t.Errorf("a changed trajectory: Verify = %v", err)
	}
}

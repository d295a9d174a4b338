package trial

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/proctor-sandbox/proctor/internal/gateway"
)

// scriptedAgent talks to its model three times, each request holding the
// last answer, and writes the last answer into the workspace: a
// deterministic agent whose changes follow from what the model said.
const scriptedAgent = `python3 -u - <<'PY'
import json, os, urllib.request
last = "start"
for step in range(3):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": last}]}).encode()
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    try:
        last = json.loads(urllib.request.urlopen(req, timeout=10).read())["choices"][0]["message"]["content"]
    except urllib.error.HTTPError as e:
        print("model error", e.code, e.read().decode()); raise SystemExit(1)
    print("step", step, last)
open("/app/answer.txt", "w").write(last + "\n")
PY`

// fakeModel answers with a function of the request: the same request, the
// same answer. It echoes the credential it got, as a careless provider's
// error might: the recording must hold it scrubbed.
func fakeModel(t *testing.T, calls *int) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*calls++
		body, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(body)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"model":"m","choices":[{"message":{"role":"assistant","content":"answer-%x"}}],"seen":%q,"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`, sum[:4], r.Header.Get("Authorization"))
	}))
	t.Cleanup(s.Close)
	return s
}

// noUpstream fails the test if a replay reaches for a provider.
type noUpstream struct{ t *testing.T }

func (n noUpstream) RoundTrip(*http.Request) (*http.Response, error) {
	n.t.Error("a replay sent a request upstream")
	return nil, errors.New("no upstream in a replay")
}

func readTapeFile(t *testing.T, path string) *gateway.Tape {
	t.Helper()
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	tape, err := gateway.ReadTape(f, 0)
	must(t, err)
	return tape
}

// A recorded trial replays without its model: the same calls, the same
// changeset, the same verdict. A recording with one response altered makes
// the agent ask something else next, and the replay stops there, naming
// the call and both requests' digests.
func TestRecordAndReplay(t *testing.T) {
	requireRoot(t)
	requireTool(t, "python3")
	t.Setenv("OPENAI_API_KEY", "sk-real-key-for-record-test")
	calls := 0
	provider := fakeModel(t, &calls)
	specs, err := gateway.ParseSpecs("openai=" + provider.URL + "/v1")
	must(t, err)
	tk := writeTask(t, taskSpec{files: map[string]string{"a.txt": "a\n"}, test: "test -s /app/answer.txt && echo 1 > /logs/verifier/reward.txt"})
	run := func(n NetOptions, of *ReplayRef) (*Verdict, string, error) {
		out := filepath.Join(t.TempDir(), "out")
		v, err := Run(context.Background(), Options{Task: tk, Agent: scriptedAgent, Out: out, CacheDir: sharedCache, Key: testKey, Net: n, ReplayOf: of})
		return v, out, err
	}

	rec, recOut, err := run(NetOptions{Gateways: specs, Getenv: os.Getenv, Record: true}, nil)
	if err != nil || !rec.Passed || rec.Recording == nil || rec.Recording.Calls != 3 || calls != 3 {
		t.Fatalf("recording: err %v, passed %t, recording %+v, provider calls %d\n%s", err, rec.Passed, rec.Recording, calls, readFile(t, filepath.Join(recOut, AgentLog)))
	}
	if !slices.Contains(rec.Artifacts, RecordingFile) {
		t.Errorf("the recording is not an artifact: %v", rec.Artifacts)
	}
	verifiedEvents(t, recOut) // the bundle, with the recording in its manifest, verifies
	file := filepath.Join(recOut, RecordingFile)
	data, err := os.ReadFile(file)
	must(t, err)
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != rec.Recording.SHA256 {
		t.Errorf("the verdict's recording digest is not the file's")
	}
	if bytes.Contains(data, []byte("sk-real-key-for-record-test")) {
		t.Errorf("the recording holds the real key")
	}

	replay := func(tape *gateway.Tape) (*Verdict, string, error) {
		return run(NetOptions{Gateways: specs, Replay: tape, GatewayTransport: noUpstream{t}},
			&ReplayRef{Recording: rec.Recording.SHA256, Calls: tape.Calls(), RecordedChangeset: rec.Changeset.Digest})
	}
	t.Setenv("OPENAI_API_KEY", "") // a replay needs no key
	v, out, err := replay(readTapeFile(t, file))
	if err != nil || v.Replay == nil || !v.Replay.Identical || v.Replay.Diverged != "" || v.Changeset.Digest != rec.Changeset.Digest || !v.Passed {
		t.Fatalf("replay: err %v, replay %+v, changeset %s (recorded %s), passed %t\n%s", err, v.Replay, v.Changeset.Digest, rec.Changeset.Digest, v.Passed, readFile(t, filepath.Join(out, AgentLog)))
	}
	if calls != 3 {
		t.Errorf("the replay reached the provider: %d calls in all", calls)
	}
	if Changes([]*Verdict{rec, v}) != nil {
		t.Errorf("the replay's verdict differs: %q", Changes([]*Verdict{rec, v}))
	}
	// The same calls make the same trajectory, byte for byte.
	if a, b := readBytes(t, filepath.Join(recOut, TrajectoryFile)), readBytes(t, filepath.Join(out, TrajectoryFile)); !bytes.Equal(a, b) || !bytes.Contains(a, []byte(`"model_turns": 3`)) {
		t.Errorf("the replay's trajectory differs from the recorded one:\n%s\n%s", a, b)
	}

	// Alter the second recorded answer, keeping the file consistent: the
	// agent's third request then differs from the recorded one.
	altered := alterResponse(t, data, 2, "answer-altered")
	v, out, err = replay(mustReadTape(t, altered))
	if err == nil || v == nil || v.Status != StatusError || v.Replay == nil ||
		!strings.HasPrefix(v.Replay.Diverged, "the agent diverged at call 3: recorded request sha256:") || !strings.Contains(v.Replay.Diverged, ", got sha256:") {
		t.Fatalf("an altered recording: err %v, verdict %+v\n%s", err, v, readFile(t, filepath.Join(out, AgentLog)))
	}
	if log := readFile(t, filepath.Join(out, AgentLog)); !strings.Contains(log, "step 1 answer-altered") || strings.Contains(log, "step 2") {
		t.Errorf("the agent should have got the altered answer and been stopped at its next call:\n%s", log)
	}
	verifiedEvents(t, out) // the diverged replay is sealed too
}

func mustReadTape(t *testing.T, data []byte) *gateway.Tape {
	t.Helper()
	tape, err := gateway.ReadTape(bytes.NewReader(data), 0)
	must(t, err)
	return tape
}

// alterResponse rewrites recording.jsonl so that call seq's response body
// says content instead, with its digest, size and blob line made to match
// (the blob lines stay sorted): a recording edited by someone who knows the
// format.
func alterResponse(t *testing.T, data []byte, seq int, content string) []byte {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	callRe := regexp.MustCompile(`"response_sha256":"([0-9a-f]{64})","response_bytes":(\d+)`)
	var old string
	for i, l := range lines {
		if strings.HasPrefix(l, fmt.Sprintf(`{"seq":%d,`, seq)) {
			m := callRe.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("call line %q", l)
			}
			old = m[1]
			body := regexp.MustCompile(`answer-[0-9a-f]{8}`).ReplaceAll(blob(t, lines, old), []byte(content))
			sum := sha256.Sum256(body)
			lines[i] = callRe.ReplaceAllString(l, fmt.Sprintf(`"response_sha256":"%x","response_bytes":%d`, sum, len(body)))
			blobs := []string{}
			for _, b := range lines {
				if strings.HasPrefix(b, `{"sha256":`) && !strings.HasPrefix(b, `{"sha256":"`+old) {
					blobs = append(blobs, b)
				}
			}
			blobs = append(blobs, fmt.Sprintf(`{"sha256":"%x","base64":"%s"}`, sum, base64.StdEncoding.EncodeToString(body)))
			slices.Sort(blobs)
			head := slices.DeleteFunc(slices.Clone(lines), func(s string) bool { return strings.HasPrefix(s, `{"sha256":`) })
			return []byte(strings.Join(append(head, blobs...), "\n") + "\n")
		}
	}
	t.Fatalf("no call %d in the recording", seq)
	return nil
}

func blob(t *testing.T, lines []string, sum string) []byte {
	t.Helper()
	for _, l := range lines {
		var b struct{ SHA256, Base64 string }
		if strings.HasPrefix(l, `{"sha256":"`+sum) && json.Unmarshal([]byte(l), &b) == nil {
			data, err := base64.StdEncoding.DecodeString(b.Base64)
			must(t, err)
			return data
		}
	}
	t.Fatalf("no blob %s", sum)
	return nil
}

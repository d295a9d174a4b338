package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"sync"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/proctor-sandbox/proctor/internal/scriptedmodel"
	"github.com/proctor-sandbox/proctor/internal/trajectory/atiftest"
)

// fixedStats is the example task py-bugfix's fix.
const fixedStats = `"""Small statistics helpers."""


def mean(xs):
    """Return the arithmetic mean of xs; ValueError when xs is empty."""
    if not xs:
        raise ValueError("mean of an empty list")
    return sum(xs) / len(xs)
`

// searchKey is a command that looks for API keys where an agent could
// find them: its environment, every process's, the files it can write. Its
// patterns do not match themselves (the agent's transcript holds the
// command).
const searchKey = `env | grep API_KEY; cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep API_KEY | sort -u; ` +
	`grep -rIl -e 'sk-ant-hos[t]' -e 'sk-openai-hos[t]' /app /tmp /root /etc 2>/dev/null; echo searched`

// cheat reads the hidden tests and pre-writes the grader's reward.
const cheat = `cat /tests/test_stats.py 2>&1 | head -3; mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt; echo cheated`

// providerScripts are the scripted providers' turns, by name: each makes
// a real agent CLI run tools as the vendor's model would ask it to.
var providerScripts = map[string][]scriptedmodel.Step{
	// Claude Code: run a command, read the file, write the fix.
	"claude-fix": {
		{Tool: "Bash", Input: map[string]any{"command": searchKey, "description": "look for keys"}},
		{Tool: "Bash", Input: map[string]any{"command": "cd /app && python3 -c 'import stats; print(stats.mean([1, 2]))'", "description": "run it"}},
		{Tool: "Read", Input: map[string]any{"file_path": "/app/stats.py"}},
		{Tool: "Write", Input: map[string]any{"file_path": "/app/stats.py", "content": fixedStats}},
	},
	"claude-cheat": {
		{Tool: "Bash", Input: map[string]any{"command": cheat, "description": "cheat"}},
	},
	// Codex: its shell tool runs the commands; a heredoc writes the fix.
	"codex-fix": {
		{Tool: "exec_command", Input: map[string]any{"cmd": searchKey}},
		{Tool: "exec_command", Input: map[string]any{"cmd": "cd /app && python3 -c 'import stats; print(stats.mean([1, 2]))'"}},
		{Tool: "exec_command", Input: map[string]any{"cmd": "cat > /app/stats.py <<'EOF'\n" + fixedStats + "EOF\n"}},
	},
	// Qwen Code (Chat Completions, Node brought in its layer): it must
	// read a file before it overwrites it.
	"qwen-fix": {
		{Tool: "run_shell_command", Input: map[string]any{"command": searchKey}},
		{Tool: "read_file", Input: map[string]any{"file_path": "/app/stats.py"}},
		{Tool: "write_file", Input: map[string]any{"file_path": "/app/stats.py", "content": fixedStats}},
	},
	// OpenCode (Anthropic through its own provider settings): its tools
	// take camelCase arguments, and it too reads before it writes.
	"opencode-fix": {
		{Tool: "bash", Input: map[string]any{"command": searchKey, "description": "look for keys"}},
		{Tool: "read", Input: map[string]any{"filePath": "/app/stats.py"}},
		{Tool: "write", Input: map[string]any{"filePath": "/app/stats.py", "content": fixedStats}},
	},
	"codex-cheat": {
		{Tool: "exec_command", Input: map[string]any{"cmd": cheat}},
	},
}

// providerCmds are the script commands of scripted providers:
//
//	fakeprovider NAME SCRIPT   serve SCRIPT on loopback; set NAME_URL
//	providerlog NAME FILE      write the requests NAME answered (path, turn, body), a JSON line each, to FILE
//	stopprovider NAME          stop it
//	atifvalid FILE             FILE is a valid ATIF trajectory
func providerCmds() map[string]func(ts *testscript.TestScript, neg bool, args []string) {
	type served struct {
		s   *scriptedmodel.Server
		srv *httptest.Server
	}
	// One map per script run; scripts run in parallel.
	var mu sync.Mutex
	byScript := map[*testscript.TestScript]map[string]*served{}
	get := func(ts *testscript.TestScript, name string) *served {
		mu.Lock()
		defer mu.Unlock()
		p := byScript[ts][name]
		if p == nil {
			ts.Fatalf("no provider %s", name)
		}
		return p
	}
	return map[string]func(ts *testscript.TestScript, neg bool, args []string){
		"fakeprovider": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 2 {
				ts.Fatalf("usage: fakeprovider NAME SCRIPT")
			}
			steps, ok := providerScripts[args[1]]
			if !ok {
				ts.Fatalf("fakeprovider: no script %s", args[1])
			}
			s := scriptedmodel.New(steps...)
			srv := httptest.NewServer(s)
			ts.Defer(srv.Close)
			mu.Lock()
			if byScript[ts] == nil {
				byScript[ts] = map[string]*served{}
			}
			old := byScript[ts][args[0]]
			byScript[ts][args[0]] = &served{s, srv}
			mu.Unlock()
			if old != nil {
				old.srv.Close()
			}
			url := srv.URL
			if args[0] == "openai" {
				url += "/v1"
			}
			ts.Setenv(strings.ToUpper(args[0])+"_URL", url)
		},
		"providerlog": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 2 {
				ts.Fatalf("usage: providerlog NAME FILE")
			}
			var b bytes.Buffer
			for _, r := range get(ts, args[0]).s.Requests() {
				line, _ := json.Marshal(map[string]any{"path": r.Path, "turn": r.Turn, "body": string(r.Body)})
				b.Write(append(line, '\n'))
			}
			if err := os.WriteFile(ts.MkAbs(args[1]), b.Bytes(), 0o644); err != nil {
				ts.Fatalf("providerlog: %v", err)
			}
		},
		"atifvalid": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 1 {
				ts.Fatalf("usage: atifvalid FILE")
			}
			if err := atiftest.Validate([]byte(ts.ReadFile(args[0]))); err != nil {
				ts.Fatalf("%s: %v", args[0], err)
			}
		},
		"stopprovider": func(ts *testscript.TestScript, neg bool, args []string) {
			if neg || len(args) != 1 {
				ts.Fatalf("usage: stopprovider NAME")
			}
			get(ts, args[0]).srv.Close()
		},
	}
}

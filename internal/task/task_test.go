package task

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// files is a task tree to write: path → content. A path ending in "/" is a
// directory; content starting with "->" makes a symbolic link to the rest.
type files map[string]string

// baseFiles is the smallest valid task.
func baseFiles() files {
	return files{
		"task.toml":         "",
		"instruction.md":    "Do the thing.\n",
		"tests/test.sh":     "#!/bin/sh\nexit 0\n",
		"solution/solve.sh": "#!/bin/sh\ntrue\n",
	}
}

// writeTree writes fs under dir.
func writeTree(t testing.TB, dir string, fs files) {
	t.Helper()
	for p, c := range fs {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if strings.HasSuffix(p, "/") {
			if err := os.MkdirAll(full, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if target, ok := strings.CutPrefix(c, "->"); ok {
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// newTask writes a task made of baseFiles with extra applied (an empty
// string value with key prefix "-" deletes that file) and returns its
// resolved directory.
func newTask(t testing.TB, extra files) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(dir, "my-task")
	fs := baseFiles()
	for p, c := range extra {
		if del, ok := strings.CutPrefix(p, "-"); ok {
			delete(fs, del)
			continue
		}
		fs[p] = c
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, fs)
	return dir
}

const fullTOML = `
version = "1.0"

[metadata]
author_name = "Jane"
difficulty = "medium"
tags = ["git", "python"]
expert_time_estimate_min = 30.0
name = "fix-the-build"

[verifier]
timeout_sec = 900.5
env = { PYTHONHASHSEED = "0", "WITH SPACE" = "ok" }
user = "root"

[agent]
timeout_sec = 1800

[environment]
build_timeout_sec = 600.0
docker_image = "ghcr.io/example/fix:1"
cpus = 2.5
memory_mb = 4096
storage_mb = 20480.0
workdir = "/workspace/src"
network_mode = "no-network"
allow_internet = false
allowed_hosts = []
env = { LANG = "C.UTF-8" }
future_knob = { x = 1 }

[proctor]
rootfs = "environment/rootfs"
workspace = "environment/ws-link"
git_base = "abc123"
grading = "state"
protected = ["tests/**", "**/*.lock"]
pass_threshold = 0.5

[unknown_table]
x = [1, 2, 3]
`

func TestLoadFull(t *testing.T) {
	dir := newTask(t, files{
		"task.toml":               fullTOML,
		"environment/rootfs/":     "",
		"environment/ws/.git/":    "",
		"environment/ws/main.go":  "package main\n",
		"environment/ws-link":     "->ws",
		"environment/Dockerfile":  "FROM scratch\n",
		"tests/test_outputs.py":   "",
		"solution/extra/notes.md": "",
	})
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := &Task{
		Dir:         dir,
		Name:        "fix-the-build",
		Instruction: filepath.Join(dir, "instruction.md"),
		Tests:       filepath.Join(dir, "tests"),
		Solution:    filepath.Join(dir, "solution/solve.sh"),
		Agent:       AgentConfig{Timeout: 1800 * time.Second},
		Verifier: VerifierConfig{
			Timeout: 900*time.Second + 500*time.Millisecond,
			Env:     map[string]string{"PYTHONHASHSEED": "0", "WITH SPACE": "ok"},
		},
		Environment: EnvironmentConfig{
			Workdir:     "/workspace/src",
			CPUs:        2.5,
			MemoryMB:    4096,
			StorageMB:   20480,
			NetworkMode: NetworkNone,
			Env:         map[string]string{"LANG": "C.UTF-8"},
			DockerImage: "ghcr.io/example/fix:1", BuildTimeout: 600 * time.Second,
		},
		Proctor: ProctorConfig{
			Rootfs:        filepath.Join(dir, "environment/rootfs"),
			Workspace:     filepath.Join(dir, "environment/ws"), // the link resolved
			GitBase:       "abc123",
			Grading:       GradingState,
			Protected:     []string{"tests/**", "**/*.lock"},
			PassThreshold: 0.5,
			PinnedEnv:     map[string]string{},
		},
		SolutionEnv: map[string]string{},
	}
	raw := got.Raw
	got.Raw = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load:\n got %+v\nwant %+v", got, want)
	}
	// Unknown tables and keys are kept.
	if _, ok := raw["unknown_table"].(map[string]any); !ok {
		t.Errorf("Raw lost [unknown_table]: %v", raw)
	}
	env, _ := raw["environment"].(map[string]any)
	if _, ok := env["future_knob"]; !ok {
		t.Errorf("Raw lost [environment].future_knob: %v", env)
	}
}

func TestLoadDefaults(t *testing.T) {
	tests := []struct {
		name  string
		extra files
		setup func(t *testing.T, dir string) // after the files are written
		check func(t *testing.T, dir string, got *Task)
	}{
		{
			name:  "empty task.toml",
			extra: nil,
			check: func(t *testing.T, dir string, got *Task) {
				want := &Task{
					Dir:         dir,
					Name:        "my-task",
					Instruction: filepath.Join(dir, "instruction.md"),
					Tests:       filepath.Join(dir, "tests"),
					Solution:    filepath.Join(dir, "solution/solve.sh"),
					Agent:       AgentConfig{Timeout: DefaultAgentTimeout},
					Verifier:    VerifierConfig{Timeout: DefaultVerifierTimeout, Env: map[string]string{}},
					Environment: EnvironmentConfig{
						Workdir:      "/app",
						CPUs:         1,
						MemoryMB:     2048,
						StorageMB:    10240,
						NetworkMode:  NetworkNone,
						Env:          map[string]string{},
						BuildTimeout: DefaultBuildTimeout,
					},
					Proctor:     ProctorConfig{Rootfs: RootfsHost, Grading: GradingWorkspace, PassThreshold: 1, PinnedEnv: map[string]string{}},
					SolutionEnv: map[string]string{},
					Raw:         map[string]any{},
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("Load:\n got %+v\nwant %+v", got, want)
				}
			},
		},
		{
			name:  "no solution",
			extra: files{"-solution/solve.sh": ""},
			check: func(t *testing.T, dir string, got *Task) {
				if got.Solution != "" {
					t.Errorf("Solution = %q, want empty", got.Solution)
				}
			},
		},
		{
			name:  "default workspace, no git",
			extra: files{"environment/workspace/a.txt": "a"},
			check: func(t *testing.T, dir string, got *Task) {
				if w := filepath.Join(dir, "environment/workspace"); got.Proctor.Workspace != w {
					t.Errorf("Workspace = %q, want %q", got.Proctor.Workspace, w)
				}
				if got.Proctor.GitBase != "" {
					t.Errorf("GitBase = %q, want empty", got.Proctor.GitBase)
				}
			},
		},
		{
			name:  "default workspace with git gives HEAD",
			extra: files{"environment/workspace/.git/": ""},
			check: func(t *testing.T, dir string, got *Task) {
				if got.Proctor.GitBase != "HEAD" {
					t.Errorf("GitBase = %q, want HEAD", got.Proctor.GitBase)
				}
			},
		},
		{
			name:  "environment/workspace a file is no workspace",
			extra: files{"environment/workspace": "not a dir"},
			check: func(t *testing.T, dir string, got *Task) {
				if got.Proctor.Workspace != "" {
					t.Errorf("Workspace = %q, want empty", got.Proctor.Workspace)
				}
			},
		},
		{
			name: "legacy memory and storage strings",
			extra: files{"task.toml": `[environment]
memory = "2G"
storage = "512M"`},
			check: func(t *testing.T, dir string, got *Task) {
				if got.Environment.MemoryMB != 2048 || got.Environment.StorageMB != 512 {
					t.Errorf("MemoryMB, StorageMB = %d, %d; want 2048, 512", got.Environment.MemoryMB, got.Environment.StorageMB)
				}
			},
		},
		{
			name: "legacy memory agreeing with memory_mb",
			extra: files{"task.toml": `[environment]
memory = "1.5g"
memory_mb = 1536`},
			check: func(t *testing.T, dir string, got *Task) {
				if got.Environment.MemoryMB != 1536 {
					t.Errorf("MemoryMB = %d, want 1536", got.Environment.MemoryMB)
				}
			},
		},
		{
			name:  "[task].name wins over [metadata].name",
			extra: files{"task.toml": "[task]\nname = \"org/t\"\n[metadata]\nname = \"m\"\n"},
			check: func(t *testing.T, dir string, got *Task) {
				if got.Name != "org/t" {
					t.Errorf("Name = %q, want org/t", got.Name)
				}
			},
		},
		{
			name:  "symlink inside the task is followed",
			extra: files{"task.toml": "[proctor]\nrootfs = \"r\"\n", "r": "->environment/root", "environment/root/": ""},
			check: func(t *testing.T, dir string, got *Task) {
				if w := filepath.Join(dir, "environment/root"); got.Proctor.Rootfs != w {
					t.Errorf("Rootfs = %q, want %q", got.Proctor.Rootfs, w)
				}
			},
		},
		{
			name:  "absolute symlink into the task is followed",
			extra: files{"task.toml": "[proctor]\nworkspace = \"w\"\n", "environment/ws/": ""},
			setup: func(t *testing.T, dir string) {
				if err := os.Symlink(filepath.Join(dir, "environment/ws"), filepath.Join(dir, "w")); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, dir string, got *Task) {
				if w := filepath.Join(dir, "environment/ws"); got.Proctor.Workspace != w {
					t.Errorf("Workspace = %q, want %q", got.Proctor.Workspace, w)
				}
			},
		},
		{
			name:  "tests reached through a symlink",
			extra: files{"-tests/test.sh": "", "tests": "->verifier", "verifier/test.sh": "exit 0"},
			check: func(t *testing.T, dir string, got *Task) {
				if w := filepath.Join(dir, "verifier"); got.Tests != w {
					t.Errorf("Tests = %q, want %q", got.Tests, w)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := newTask(t, tt.extra)
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			got, err := Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, dir, got)
		})
	}
}

func TestLoadErrors(t *testing.T) {
	outside := t.TempDir()
	writeTree(t, outside, files{"secret/": "", "passwd": "root:x:0:0"})

	tests := []struct {
		name  string
		extra files
		file  string // relative to the task dir; "" for task.toml
		field string
		is    error
		msg   string // a substring of the message
	}{
		{name: "bad TOML", extra: files{"task.toml": "version = 1\n[agent\ntimeout_sec = 10\n"}, is: ErrSyntax, msg: "line 2"},
		{name: "duplicate key", extra: files{"task.toml": "[agent]\ntimeout_sec = 1\ntimeout_sec = 2\n"}, is: ErrSyntax, msg: "line 3"},
		{name: "missing task.toml", extra: files{"-task.toml": ""}, is: ErrMissing, msg: "task.toml: missing"},
		{name: "task.toml a directory", extra: files{"-task.toml": "", "task.toml/": ""}, is: ErrNotRegular},
		{name: "task.toml links outside", extra: files{"task.toml": "->" + filepath.Join(outside, "passwd")}, is: ErrEscape},
		{name: "missing instruction.md", extra: files{"-instruction.md": ""}, file: "instruction.md", is: ErrMissing, msg: "instruction.md: missing"},
		{name: "instruction.md links outside", extra: files{"instruction.md": "->" + filepath.Join(outside, "passwd")}, file: "instruction.md", is: ErrEscape, msg: `symbolic link "instruction.md"`},
		{name: "missing tests/test.sh", extra: files{"-tests/test.sh": "", "tests/other.py": ""}, file: "tests/test.sh", is: ErrMissing, msg: "tests/test.sh: missing"},
		{name: "missing tests", extra: files{"-tests/test.sh": ""}, file: "tests", is: ErrMissing, msg: "tests: missing"},
		{name: "tests a file", extra: files{"-tests/test.sh": "", "tests": "x"}, file: "tests", is: ErrNotDir},
		{name: "solve.sh links outside", extra: files{"solution/solve.sh": "->../../" + filepath.Base(outside) + "/passwd"}, file: "solution/solve.sh", is: ErrEscape},

		{name: "workspace ../", extra: files{"task.toml": "[proctor]\nworkspace = \"../x\"\n"}, field: "[proctor].workspace", is: ErrEscape},
		{name: "workspace a/../../", extra: files{"task.toml": "[proctor]\nworkspace = \"environment/../../x\"\n"}, field: "[proctor].workspace", is: ErrEscape},
		{name: "workspace absolute", extra: files{"task.toml": "[proctor]\nworkspace = \"" + outside + "\"\n"}, field: "[proctor].workspace", is: ErrEscape, msg: "absolute"},
		{name: "workspace via absolute symlink", extra: files{"task.toml": "[proctor]\nworkspace = \"environment/ws\"\n", "environment/ws": "->" + filepath.Join(outside, "secret")}, field: "[proctor].workspace", is: ErrEscape, msg: `symbolic link "environment/ws"`},
		{name: "workspace via relative symlink", extra: files{"task.toml": "[proctor]\nworkspace = \"environment/ws\"\n", "environment/ws": "->../../../" + filepath.Base(outside)}, field: "[proctor].workspace", is: ErrEscape},
		{name: "workspace via symlinked parent", extra: files{"task.toml": "[proctor]\nworkspace = \"environment/secret\"\n", "environment": "->" + outside}, field: "[proctor].workspace", is: ErrEscape},
		{name: "workspace via link chain", extra: files{"task.toml": "[proctor]\nworkspace = \"a\"\n", "a": "->b", "b": "->c/..", "c/": ""}, field: "[proctor].workspace", is: ErrOverlap},
		{name: "workspace via link chain out", extra: files{"task.toml": "[proctor]\nworkspace = \"a\"\n", "a": "->b/../..", "b/": ""}, field: "[proctor].workspace", is: ErrEscape},
		{name: "default workspace via symlink", extra: files{"environment/workspace": "->" + filepath.Join(outside, "secret")}, field: "[proctor].workspace", is: ErrEscape},
		{name: "workspace missing", extra: files{"task.toml": "[proctor]\nworkspace = \"nope\"\n"}, field: "[proctor].workspace", is: ErrMissing},
		{name: "workspace a file", extra: files{"task.toml": "[proctor]\nworkspace = \"instruction.md\"\n"}, field: "[proctor].workspace", is: ErrNotDir},
		{name: "workspace is the task dir", extra: files{"task.toml": "[proctor]\nworkspace = \".\"\n"}, field: "[proctor].workspace", is: ErrOverlap},
		{name: "workspace is tests", extra: files{"task.toml": "[proctor]\nworkspace = \"tests\"\n"}, field: "[proctor].workspace", is: ErrOverlap},
		{name: "workspace inside solution", extra: files{"task.toml": "[proctor]\nworkspace = \"solution/extra\"\n", "solution/extra/": ""}, field: "[proctor].workspace", is: ErrOverlap},
		{name: "workspace holds linked tests", extra: files{"task.toml": "[proctor]\nworkspace = \"environment\"\n", "-tests/test.sh": "", "tests": "->environment/t", "environment/t/test.sh": ""}, field: "[proctor].workspace", is: ErrOverlap},
		{name: "workspace empty", extra: files{"task.toml": "[proctor]\nworkspace = \"\"\n"}, field: "[proctor].workspace", is: ErrValue},
		{name: "rootfs ../", extra: files{"task.toml": "[proctor]\nrootfs = \"..\"\n"}, field: "[proctor].rootfs", is: ErrEscape},
		{name: "rootfs absolute", extra: files{"task.toml": "[proctor]\nrootfs = \"/\"\n"}, field: "[proctor].rootfs", is: ErrEscape},
		{name: "rootfs via symlink", extra: files{"task.toml": "[proctor]\nrootfs = \"environment/rootfs\"\n", "environment/rootfs": "->/"}, field: "[proctor].rootfs", is: ErrEscape},
		{name: "rootfs a file", extra: files{"task.toml": "[proctor]\nrootfs = \"instruction.md\"\n"}, field: "[proctor].rootfs", is: ErrNotDir},

		{name: "git_base without git", extra: files{"task.toml": "[proctor]\ngit_base = \"main\"\n", "environment/workspace/x": ""}, field: "[proctor].git_base", is: ErrNotGitRepo},
		{name: "git_base without workspace", extra: files{"task.toml": "[proctor]\ngit_base = \"main\"\n"}, field: "[proctor].git_base", is: ErrNotGitRepo},
		{name: "git_base with .git a file that is no gitfile", extra: files{"task.toml": "[proctor]\ngit_base = \"main\"\n", "environment/workspace/.git": "not a gitfile"}, field: "[proctor].git_base", is: ErrNotGitRepo},
		{name: "unknown grading", extra: files{"task.toml": "[proctor]\ngrading = \"x\"\n"}, field: "[proctor].grading", is: ErrUnknownValue, msg: `unknown value "x" (want "workspace" or "state")`},
		{name: "bad glob", extra: files{"task.toml": "[proctor]\nprotected = [\"ok/**\", \"a/[b\"]\n"}, field: "[proctor].protected[1]", is: ErrValue},
		{name: "empty glob", extra: files{"task.toml": "[proctor]\nprotected = [\"\"]\n"}, field: "[proctor].protected[0]", is: ErrValue},
		{name: "pass_threshold 0", extra: files{"task.toml": "[proctor]\npass_threshold = 0\n"}, field: "[proctor].pass_threshold", is: ErrValue},
		{name: "pass_threshold 1.5", extra: files{"task.toml": "[proctor]\npass_threshold = 1.5\n"}, field: "[proctor].pass_threshold", is: ErrValue},
		{name: "pass_threshold nan", extra: files{"task.toml": "[proctor]\npass_threshold = nan\n"}, field: "[proctor].pass_threshold", is: ErrValue},

		{name: "allowlist bad host", extra: files{"task.toml": "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"x.org\", \"http://y.org/\"]\n"}, field: "[environment].allowed_hosts[1]", is: ErrValue},
		{name: "allowlist bare star", extra: files{"task.toml": "[agent]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"*\"]\n"}, field: "[agent].allowed_hosts[0]", is: ErrValue},
		{name: "verifier allowlist", extra: files{"task.toml": "[verifier]\nnetwork_mode = \"allowlist\"\n"}, field: "[verifier].network_mode", is: ErrUnsupported, msg: "the grader never has network"},
		{name: "public network for the grader", extra: files{"task.toml": "[verifier]\nnetwork_mode = \"public\"\n"}, field: "[verifier].network_mode", is: ErrUnsupported},
		{name: "no network and the internet", extra: files{"task.toml": "[environment]\nnetwork_mode = \"no-network\"\nallow_internet = true\n"}, field: "[environment].network_mode", is: ErrValue},
		{name: "gpus", extra: files{"task.toml": "[environment]\ngpus = 1\n"}, field: "[environment].gpus", is: ErrUnsupported},
		{name: "gpus negative", extra: files{"task.toml": "[environment]\ngpus = -1\n"}, field: "[environment].gpus", is: ErrValue},
		{name: "mcp servers", extra: files{"task.toml": "[[environment.mcp_servers]]\nname = \"x\"\ntransport = \"stdio\"\ncommand = \"x\"\n"}, field: "[environment].mcp_servers", is: ErrUnsupported},
		{name: "mcp servers a string", extra: files{"task.toml": "[environment]\nmcp_servers = \"x\"\n"}, field: "[environment].mcp_servers", is: ErrType},
		{name: "artifacts a string", extra: files{"task.toml": "artifacts = \"/app\"\n"}, field: "artifacts", is: ErrType},
		{name: "artifact relative", extra: files{"task.toml": "artifacts = [\"app/out\"]\n"}, field: "artifacts[0]", is: ErrValue},
		{name: "artifact from the tests", extra: files{"task.toml": "artifacts = [\"/tests/expected\"]\n"}, field: "artifacts[0]", is: ErrValue},
		{name: "artifact escaping", extra: files{"task.toml": "artifacts = [{source = \"/app/out\", destination = \"../x\"}]\n"}, field: "artifacts[0].destination", is: ErrValue},
		{name: "artifact of a service", extra: files{"task.toml": "artifacts = [{source = \"/app/out\", service = \"db\"}]\n"}, field: "artifacts[0].service", is: ErrUnsupported},
		{name: "artifacts twice at one place", extra: files{"task.toml": "artifacts = [\"/app/out\", \"/tmp/out\"]\n"}, field: "artifacts[1]", is: ErrValue},
		{name: "unknown network", extra: files{"task.toml": "[environment]\nnetwork_mode = \"host\"\n"}, field: "[environment].network_mode", is: ErrUnknownValue, msg: `"no-network"`},
		{name: "allowed_hosts without allowlist", extra: files{"task.toml": "[environment]\nallowed_hosts = [\"pypi.org\"]\n"}, field: "[environment].allowed_hosts", is: ErrValue},
		{name: "verifier network override", extra: files{"task.toml": "[verifier]\nnetwork_mode = \"public\"\n"}, field: "[verifier].network_mode", is: ErrUnsupported},

		{name: "workdir relative", extra: files{"task.toml": "[environment]\nworkdir = \"app\"\n"}, field: "[environment].workdir", is: ErrValue},
		{name: "workdir root", extra: files{"task.toml": "[environment]\nworkdir = \"/\"\n"}, field: "[environment].workdir", is: ErrValue},
		{name: "workdir unclean", extra: files{"task.toml": "[environment]\nworkdir = \"/app/../tmp\"\n"}, field: "[environment].workdir", is: ErrValue},
		{name: "workdir trailing slash", extra: files{"task.toml": "[environment]\nworkdir = \"/app/\"\n"}, field: "[environment].workdir", is: ErrValue},
		{name: "workdir /tmp", extra: files{"task.toml": "[environment]\nworkdir = \"/tmp\"\n"}, field: "[environment].workdir", is: ErrValue},
		{name: "workdir under /proc", extra: files{"task.toml": "[environment]\nworkdir = \"/proc/self\"\n"}, field: "[environment].workdir", is: ErrValue},
		{name: "workdir under /tests", extra: files{"task.toml": "[environment]\nworkdir = \"/tests/x\"\n"}, field: "[environment].workdir", is: ErrValue},
		{name: "workdir with newline", extra: files{"task.toml": "[environment]\nworkdir = \"/app\\n/x\"\n"}, field: "[environment].workdir", is: ErrValue},

		{name: "negative cpus", extra: files{"task.toml": "[environment]\ncpus = -1\n"}, field: "[environment].cpus", is: ErrValue},
		{name: "zero memory_mb", extra: files{"task.toml": "[environment]\nmemory_mb = 0\n"}, field: "[environment].memory_mb", is: ErrValue},
		{name: "negative storage_mb", extra: files{"task.toml": "[environment]\nstorage_mb = -5\n"}, field: "[environment].storage_mb", is: ErrValue},
		{name: "huge memory_mb", extra: files{"task.toml": "[environment]\nmemory_mb = 9223372036854775807\n"}, field: "[environment].memory_mb", is: ErrValue},
		{name: "zero agent timeout", extra: files{"task.toml": "[agent]\ntimeout_sec = 0\n"}, field: "[agent].timeout_sec", is: ErrValue},
		{name: "negative verifier timeout", extra: files{"task.toml": "[verifier]\ntimeout_sec = -1.5\n"}, field: "[verifier].timeout_sec", is: ErrValue},
		{name: "infinite timeout", extra: files{"task.toml": "[agent]\ntimeout_sec = inf\n"}, field: "[agent].timeout_sec", is: ErrValue},
		{name: "timeout too long", extra: files{"task.toml": "[agent]\ntimeout_sec = 1e300\n"}, field: "[agent].timeout_sec", is: ErrValue},
		{name: "bad legacy memory", extra: files{"task.toml": "[environment]\nmemory = \"lots\"\n"}, field: "[environment].memory", is: ErrValue},
		{name: "legacy memory conflicts", extra: files{"task.toml": "[environment]\nmemory = \"2G\"\nmemory_mb = 4096\n"}, field: "[environment].memory", is: ErrValue},
		{name: "env name with =", extra: files{"task.toml": "[verifier]\nenv = { \"A=B\" = \"x\" }\n"}, field: `[verifier].env."A=B"`, is: ErrValue},
		{name: "env name empty", extra: files{"task.toml": "[environment]\nenv = { \"\" = \"x\" }\n"}, field: "[environment].env", is: ErrValue},
		{name: "env value with NUL", extra: files{"task.toml": "[environment]\nenv = { A = \"x\\u0000y\" }\n"}, field: "[environment].env.A", is: ErrValue},
		{name: "metadata name with newline", extra: files{"task.toml": "[metadata]\nname = \"a\\nb\"\n"}, field: "[metadata].name", is: ErrValue},

		{name: "timeout a string", extra: files{"task.toml": "[agent]\ntimeout_sec = \"10\"\n"}, field: "[agent].timeout_sec", is: ErrType, msg: `want a number, got string "10"`},
		{name: "cpus a string", extra: files{"task.toml": "[environment]\ncpus = \"2\"\n"}, field: "[environment].cpus", is: ErrType},
		{name: "memory_mb fractional", extra: files{"task.toml": "[environment]\nmemory_mb = 1.5\n"}, field: "[environment].memory_mb", is: ErrType},
		{name: "legacy memory a number", extra: files{"task.toml": "[environment]\nmemory = 2\n"}, field: "[environment].memory", is: ErrType},
		{name: "proctor not a table", extra: files{"task.toml": "proctor = 3\n"}, field: "[proctor]", is: ErrType, msg: "want a table, got integer 3"},
		{name: "environment an array", extra: files{"task.toml": "environment = [1]\n"}, field: "[environment]", is: ErrType},
		{name: "protected a string", extra: files{"task.toml": "[proctor]\nprotected = \"tests/**\"\n"}, field: "[proctor].protected", is: ErrType},
		{name: "protected holds a number", extra: files{"task.toml": "[proctor]\nprotected = [\"a\", 2]\n"}, field: "[proctor].protected[1]", is: ErrType},
		{name: "grading a bool", extra: files{"task.toml": "[proctor]\ngrading = true\n"}, field: "[proctor].grading", is: ErrType},
		{name: "env value a number", extra: files{"task.toml": "[verifier]\nenv = { A = 1 }\n"}, field: "[verifier].env.A", is: ErrType},
		{name: "env an array", extra: files{"task.toml": "[verifier]\nenv = [\"A=1\"]\n"}, field: "[verifier].env", is: ErrType},
		{name: "allow_internet a string", extra: files{"task.toml": "[environment]\nallow_internet = \"no\"\n"}, field: "[environment].allow_internet", is: ErrType},
		{name: "workdir a date", extra: files{"task.toml": "[environment]\nworkdir = 1979-05-27\n"}, field: "[environment].workdir", is: ErrType, msg: "local date"},
		{name: "metadata name a number", extra: files{"task.toml": "[metadata]\nname = 7\n"}, field: "[metadata].name", is: ErrType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := newTask(t, tt.extra)
			_, err := Load(dir)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			file := filepath.Join(dir, "task.toml")
			if tt.file != "" {
				file = filepath.Join(dir, filepath.FromSlash(tt.file))
			}
			if e.File != file {
				t.Errorf("File = %q, want %q", e.File, file)
			}
			if e.Field != tt.field {
				t.Errorf("Field = %q, want %q", e.Field, tt.field)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("error %q is not %v", err, tt.is)
			}
			msg := err.Error()
			t.Log(msg)
			if strings.ContainsAny(msg, "\n\r") {
				t.Errorf("message is not one line: %q", msg)
			}
			if !strings.HasPrefix(msg, file+": ") {
				t.Errorf("message %q does not start with the file", msg)
			}
			if tt.field != "" && !strings.Contains(msg, ": "+tt.field+": ") {
				t.Errorf("message %q does not name the field %s", msg, tt.field)
			}
			if !strings.Contains(msg, tt.msg) {
				t.Errorf("message %q does not contain %q", msg, tt.msg)
			}
		})
	}
}

func TestLoadSyntaxPosition(t *testing.T) {
	dir := newTask(t, files{"task.toml": "a = 1\nb = 2\nc = = 3\n"})
	_, err := Load(dir)
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *SyntaxError", err)
	}
	if se.Line != 3 || se.Column == 0 {
		t.Errorf("position = line %d, column %d; want line 3 and a column", se.Line, se.Column)
	}
	if want := "line 3, column "; !strings.Contains(err.Error(), want) {
		t.Errorf("message %q lacks %q", err, want)
	}
}

func TestLoadDirErrors(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		dir  string
		is   error
	}{
		{"empty", "", ErrValue},
		{"missing", filepath.Join(tmp, "nope"), ErrMissing},
		{"a file", file, ErrNotDir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.dir)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, tt.is) {
				t.Fatalf("Load(%q) = %v, want an *Error matching %v", tt.dir, err, tt.is)
			}
		})
	}
}

func TestErrorOneLine(t *testing.T) {
	tests := []struct {
		name string
		err  *Error
		want string
	}{
		{"all parts", &Error{File: "/t/task.toml", Field: "[proctor].grading", Err: ErrValue}, "/t/task.toml: [proctor].grading: invalid value"},
		{"no field", &Error{File: "/t/tests/test.sh", Err: ErrMissing}, "/t/tests/test.sh: missing"},
		{"no file", &Error{Err: ErrMissing}, "missing"},
		{"nil err", &Error{File: "/t"}, "/t: unknown error"},
		{"newline in file", &Error{File: "/t/a\nb", Err: ErrMissing}, `/t/a\nb: missing`},
		{"control and bad utf-8", &Error{File: "/t/\x1b[31m\xff", Err: ErrMissing}, `/t/\x1b[31m\xff: missing`},
		{"line separator", &Error{File: "/t/a\u2028b", Err: ErrMissing}, `/t/a\u2028b: missing`},
		{"utf-8 kept", &Error{File: "/t/héllo\uFFFD", Err: ErrMissing}, "/t/héllo\uFFFD: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"2G", 2048, true},
		{" 2g ", 2048, true},
		{"1.5G", 1536, true},
		{"512M", 512, true},
		{"2048K", 2, true},
		{"1K", 0, true}, // Harbor truncates; the caller then refuses 0
		{"2", 0, false},
		{"G", 0, false},
		{"infG", 0, false},
		{"1e30G", 0, false},
		{"2GB", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSize(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("parseSize(%q) = %d, %v; want %d, ok=%t", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

// A misspelt key in Proctor's own table is an error, not a silently weaker
// task.
func TestProctorTableIsStrict(t *testing.T) {
	dir := t.TempDir()
	for p, c := range map[string]string{
		"task.toml":      "[proctor]\nprotect = [\"**/conftest.py\"]\n",
		"instruction.md": "x\n",
		"tests/test.sh":  "#!/bin/sh\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "[proctor].protect: unknown key") || !strings.Contains(err.Error(), "task.toml") {
		t.Fatalf("Load: %v: want an unknown-key error naming task.toml and [proctor].protect", err)
	}
}

// An allow-list in [environment] is the agent's, unless [agent] sets its own.
func TestLoadAllowlist(t *testing.T) {
	dir := newTask(t, files{"task.toml": "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\", \"*.github.com:443\"]\n"})
	tk, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if mode, hosts := tk.AgentNetwork(); mode != NetworkAllowlist || !reflect.DeepEqual(hosts, []string{"pypi.org", "*.github.com:443"}) {
		t.Errorf("agent network %q %q", mode, hosts)
	}
	dir = newTask(t, files{"task.toml": "[environment]\nnetwork_mode = \"allowlist\"\nallowed_hosts = [\"pypi.org\"]\n[agent]\nnetwork_mode = \"no-network\"\n"})
	if tk, err = Load(dir); err != nil {
		t.Fatal(err)
	}
	if mode, hosts := tk.AgentNetwork(); mode != NetworkNone || len(hosts) != 0 {
		t.Errorf("[agent] no-network did not override: %q %q", mode, hosts)
	}
}

// A task with a container image runs in it, as in Harbor.
func TestLoadDockerImage(t *testing.T) {
	dir := newTask(t, files{"task.toml": "[environment]\ndocker_image = \"ghcr.io/example/tb:1.0\"\n"})
	tk, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Proctor.Rootfs != RootfsImage || tk.Environment.DockerImage != "ghcr.io/example/tb:1.0" || tk.Proctor.Grading != GradingState {
		t.Errorf("rootfs %q, image %q, grading %q", tk.Proctor.Rootfs, tk.Environment.DockerImage, tk.Proctor.Grading)
	}
	for name, toml := range map[string]string{
		"image rootfs without an image": "[proctor]\nrootfs = \"image\"\n",
		"a reference with a space":      "[environment]\ndocker_image = \"ghcr.io/x y\"\n",
	} {
		if _, err := Load(newTask(t, files{"task.toml": toml})); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
}

// A Harbor task whose environment is only a Dockerfile is built: it loads
// as an image task naming its Dockerfile, with its build_timeout_sec. One
// declared by a compose file is refused before anything runs, naming the
// file on one line, not run on this machine's /usr and /etc in its place.
// Asked for by name, the host is still the host; a prebuilt image wins.
func TestLoadDockerfileOnly(t *testing.T) {
	harbor := "version = \"1.0\"\n\n[metadata]\ndifficulty = \"easy\"\n\n[verifier]\ntimeout_sec = 900.0\n\n[agent]\ntimeout_sec = 900.0\n\n[environment]\nbuild_timeout_sec = 120.0\ncpus = 1\nmemory_mb = 2048\nstorage_mb = 10240\n"
	for _, f := range []string{"environment/docker-compose.yaml", "environment/docker-compose.yml", "environment/compose.yaml", "environment/compose.yml"} {
		for _, extra := range []string{"", "\n[proctor]\ngrading = \"state\"\n"} {
			dir := newTask(t, files{"task.toml": harbor + extra, f: "services: {}\n", "environment/Dockerfile": "FROM debian\n"})
			_, err := Load(dir)
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrUnsupported) || e.File != filepath.Join(dir, filepath.FromSlash(f)) {
				t.Fatalf("%s: Load = %v, want an ErrUnsupported naming the file", f, err)
			}
			if msg := err.Error(); !strings.Contains(msg, "docker compose") || !strings.Contains(msg, "docker_image") || strings.Contains(msg, "\n") {
				t.Errorf("%s: message %q", f, msg)
			}
		}
	}
	for _, extra := range []string{"", "\n[proctor]\nrootfs = \"image\"\n"} {
		dir := newTask(t, files{"task.toml": harbor + extra, "environment/Dockerfile": "FROM debian:bookworm\nWORKDIR /app\n"})
		tk, err := Load(dir)
		if err != nil {
			t.Fatalf("Dockerfile only (%q): %v", extra, err)
		}
		if tk.Proctor.Rootfs != RootfsImage || tk.Environment.Dockerfile != filepath.Join(dir, "environment/Dockerfile") ||
			tk.Environment.DockerImage != "" || tk.Proctor.Grading != GradingState || tk.Environment.BuildTimeout != 120*time.Second {
			t.Errorf("Dockerfile only: rootfs %q, dockerfile %q, grading %q, build timeout %v", tk.Proctor.Rootfs, tk.Environment.Dockerfile, tk.Proctor.Grading, tk.Environment.BuildTimeout)
		}
	}
	dir := newTask(t, files{"task.toml": harbor + "\n[proctor]\nrootfs = \"host\"\n", "environment/Dockerfile": "FROM debian\n"})
	if tk, err := Load(dir); err != nil || tk.Proctor.Rootfs != RootfsHost || tk.Environment.Dockerfile != "" {
		t.Errorf("rootfs = \"host\" asked for by name: %v", err)
	}
	img := strings.Replace(harbor, "[environment]\n", "[environment]\ndocker_image = \"alexgshaw/hello:20251031\"\n", 1)
	dir = newTask(t, files{"task.toml": img, "environment/Dockerfile": "FROM debian\n"})
	if tk, err := Load(dir); err != nil || tk.Proctor.Rootfs != RootfsImage || tk.Environment.Dockerfile != "" {
		t.Errorf("docker_image beside the Dockerfile: %v", err)
	}
	dir = newTask(t, files{"task.toml": harbor, "environment/Dockerfile": "->/etc/passwd"})
	if _, err := Load(dir); !errors.Is(err, ErrEscape) {
		t.Errorf("a Dockerfile that is a symlink out of the task: %v", err)
	}
	dir = newTask(t, files{"task.toml": strings.Replace(harbor, "120.0", "-1", 1), "environment/Dockerfile": "FROM debian\n"})
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "build_timeout_sec") {
		t.Errorf("a negative build_timeout_sec: %v", err)
	}
}

// A workspace's repository may have any shape git makes: a .git directory,
// a .git file naming the git directory elsewhere (a linked worktree,
// --separate-git-dir), or a bare repository; each defaults to git_base HEAD.
func TestLoadGitWorkspaceShapes(t *testing.T) {
	for name, extra := range map[string]files{
		".git directory": {"environment/workspace/.git/HEAD": "ref: refs/heads/main\n"},
		"gitfile":        {"environment/workspace/.git": "gitdir: /srv/repo/.git/worktrees/ws\n"},
		"bare":           {"environment/workspace/HEAD": "ref: refs/heads/main\n", "environment/workspace/objects/": "", "environment/workspace/refs/": ""},
	} {
		tk, err := Load(newTask(t, extra))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if tk.Proctor.GitBase != "HEAD" {
			t.Errorf("%s: git_base %q, want the default HEAD", name, tk.Proctor.GitBase)
		}
	}
}

// tb2TOML is a task.toml in the shape Terminal-Bench 2 publishes its tasks
// (schema 1.1, [task] with authors, the internet asked for, empty env
// tables), with artifacts and a solution env added as Harbor allows.
const tb2TOML = `schema_version = "1.1"
artifacts = ["/app/output.log", {source = "/tmp/run", destination = "run", exclude = ["*.tmp"]}]

[task]
name = "terminal-bench/largest-eigenval"
description = "Evaluates the agent's ability to optimize eigenvalue computation."
keywords = ["coding", "optimization"]
[[task.authors]]
name = "A. Author"
email = "author@example.com"

[metadata]
author_name = "A. Author"
author_email = "author@example.com"
difficulty = "medium"
category = "mathematics"
tags = ["coding", "optimization"]
estimated_duration_sec = 210.0
expert_time_estimate_min = 60.0
junior_time_estimate_min = 180.0

[verifier]
timeout_sec = 900.0

[agent]
timeout_sec = 900.0

[environment]
build_timeout_sec = 600.0
docker_image = "alexgshaw/largest-eigenval:20251031"
cpus = 1
memory_mb = 2048
storage_mb = 10240
gpus = 0
allow_internet = true
mcp_servers = []

[verifier.env]

[environment.env]

[solution.env]
SEED = "7"
`

// A published Terminal-Bench 2 task.toml loads as written: the internet
// is recorded as asked for (not granted), the rest read.
func TestLoadPublishedTerminalBench2(t *testing.T) {
	dir := newTask(t, files{"task.toml": tb2TOML})
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "terminal-bench/largest-eigenval" || !got.InternetRequested() || got.Environment.NetworkMode != NetworkNone {
		t.Errorf("name %q, internet asked %v, mode %q", got.Name, got.InternetRequested(), got.Environment.NetworkMode)
	}
	if got.Environment.DockerImage != "alexgshaw/largest-eigenval:20251031" || got.Agent.Timeout != 900*time.Second {
		t.Errorf("environment %+v agent %+v", got.Environment, got.Agent)
	}
	want := []Artifact{{Source: "/app/output.log", Destination: "output.log"}, {Source: "/tmp/run", Destination: "run", Exclude: []string{"*.tmp"}}}
	if !reflect.DeepEqual(got.Artifacts, want) {
		t.Errorf("artifacts %+v, want %+v", got.Artifacts, want)
	}
	if got.SolutionEnv["SEED"] != "7" {
		t.Errorf("solution env %v", got.SolutionEnv)
	}
	// network_mode = "public" asks the same, from [environment] or [agent].
	for _, toml := range []string{"[environment]\nnetwork_mode = \"public\"\n", "[agent]\nnetwork_mode = \"public\"\n"} {
		got, err := Load(newTask(t, files{"task.toml": toml}))
		if err != nil || !got.InternetRequested() {
			t.Errorf("%q: internet asked %v, err %v", toml, got != nil && got.InternetRequested(), err)
		}
	}
}

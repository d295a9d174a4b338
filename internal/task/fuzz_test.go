package task

import (
	"bytes"
	"embed"
	"errors"
	"math"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

//go:embed testdata/seeds/*.toml
var seeds embed.FS

// FuzzLoad feeds arbitrary bytes to Load as task.toml. Load must not panic;
// its errors must be one-line *Errors; what it accepts must satisfy the
// documented invariants; and encoding what it decoded (Raw) again must load
// to the same task and encode to the same bytes.
func FuzzLoad(f *testing.F) {
	ents, err := seeds.ReadDir("testdata/seeds")
	if err != nil {
		f.Fatal(err)
	}
	if len(ents) == 0 {
		f.Fatal("the seed corpus testdata/seeds is empty")
	}
	for _, e := range ents {
		data, err := seeds.ReadFile(path.Join("testdata/seeds", e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}

	dir := newTask(f, files{
		"environment/rootfs/":         "",
		"environment/workspace/.git/": "",
		"environment/workspace/a.go":  "package a\n",
		"environment/out":             "->/",
		"environment/loop":            "->loop",
		"environment/ws":              "->workspace",
		"environment/x/y":             "",
	})
	config := filepath.Join(dir, "task.toml")

	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(config, data, 0o644); err != nil {
			t.Fatal(err)
		}
		got, err := Load(dir)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T %v is not an *Error", err, err)
			}
			if e.File == "" || strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("bad error %q", err)
			}
			return
		}
		checkInvariants(t, got)

		enc, err := toml.Marshal(got.Raw)
		if err != nil {
			t.Fatalf("encoding Raw: %v", err)
		}
		if err := os.WriteFile(config, enc, 0o644); err != nil {
			t.Fatal(err)
		}
		again, err := Load(dir)
		if err != nil {
			t.Fatalf("re-encoded task.toml does not load: %v\n%s", err, enc)
		}
		enc2, err := toml.Marshal(again.Raw)
		if err != nil {
			t.Fatalf("encoding Raw again: %v", err)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable:\n%s\n---\n%s", enc, enc2)
		}
		got.Raw, again.Raw = nil, nil
		if !reflect.DeepEqual(got, again) {
			t.Fatalf("re-encoded task.toml loads differently:\n%+v\n%+v", got, again)
		}
	})
}

// checkInvariants checks what Load promises of every *Task it returns.
func checkInvariants(t *testing.T, tk *Task) {
	t.Helper()
	inside := func(what, p string) {
		if p == "" {
			return
		}
		r, err := filepath.Rel(tk.Dir, p)
		if !filepath.IsAbs(p) || err != nil || !filepath.IsLocal(r) {
			t.Errorf("%s %q is not inside %q", what, p, tk.Dir)
		}
	}
	inside("Instruction", tk.Instruction)
	inside("Tests", tk.Tests)
	inside("Solution", tk.Solution)
	inside("Workspace", tk.Proctor.Workspace)
	if tk.Proctor.Rootfs != RootfsHost && tk.Proctor.Rootfs != RootfsImage {
		inside("Rootfs", tk.Proctor.Rootfs)
	}
	if tk.Name == "" {
		t.Error("empty Name")
	}
	if tk.Agent.Timeout <= 0 || tk.Verifier.Timeout <= 0 {
		t.Errorf("timeouts %v, %v", tk.Agent.Timeout, tk.Verifier.Timeout)
	}
	env := tk.Environment
	if err := checkWorkdir(env.Workdir); err != nil {
		t.Errorf("Workdir: %v", err)
	}
	if !(env.CPUs > 0) || math.IsInf(env.CPUs, 0) || env.MemoryMB <= 0 || env.StorageMB <= 0 {
		t.Errorf("limits %v, %d, %d", env.CPUs, env.MemoryMB, env.StorageMB)
	}
	if env.NetworkMode != NetworkNone || len(env.AllowedHosts) != 0 {
		t.Errorf("network %q %q", env.NetworkMode, env.AllowedHosts)
	}
	if env.Env == nil || tk.Verifier.Env == nil {
		t.Error("nil Env map")
	}
	p := tk.Proctor
	if p.Grading != GradingWorkspace && p.Grading != GradingState {
		t.Errorf("Grading %q", p.Grading)
	}
	if !(p.PassThreshold > 0 && p.PassThreshold <= 1) {
		t.Errorf("PassThreshold %v", p.PassThreshold)
	}
	if p.GitBase != "" && p.Workspace == "" {
		t.Errorf("GitBase %q without a workspace", p.GitBase)
	}
}

package dataset

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseRef(t *testing.T) {
	for _, tc := range []struct {
		in, name, version string
		ok                bool
	}{
		{"terminal-bench@2.0", "terminal-bench", "2.0", true},
		{"terminal-bench/terminal-bench-2-1@1.0", "terminal-bench/terminal-bench-2-1", "1.0", true},
		{"a@b@c", "a@b", "c", true},
		{"terminal-bench", "", "", false},
		{"@2.0", "", "", false},
		{"terminal-bench@", "", "", false},
		{"a b@1", "", "", false},
		{"a@1\n", "", "", false},
	} {
		r, err := ParseRef(tc.in)
		if (err == nil) != tc.ok || r.Name != tc.name || r.Version != tc.version {
			t.Errorf("ParseRef(%q) = %+v, %v", tc.in, r, err)
		}
		if err != nil && !errors.Is(err, ErrRef) {
			t.Errorf("ParseRef(%q): %v is not ErrRef", tc.in, err)
		}
	}
}

// harborRegistry is shaped as Harbor's registry.json: datasets with and
// without commits, metrics, descriptions, several versions of one name.
const harborRegistry = `[
    {
        "name": "hello-world",
        "version": "head",
        "description": "A single, simple task for debugging.",
        "tasks": [
            {
                "name": "hello-world",
                "git_url": "https://github.com/laude-institute/harbor.git",
                "path": "examples/tasks/hello-world"
            }
        ]
    },
    {
        "name": "terminal-bench",
        "version": "2.0",
        "description": "Version 2.0 of Terminal-Bench.",
        "tasks": [
            {
                "name": "adaptive-rejection-sampler",
                "git_url": "https://github.com/laude-institute/terminal-bench-2.git",
                "git_commit_id": "69671fbaac6d67a7ef0dfec016cc38a64ef7a77c",
                "path": "adaptive-rejection-sampler"
            },
            {
                "name": "bn-fit-modify",
                "git_url": "https://github.com/laude-institute/terminal-bench-2.git",
                "git_commit_id": "69671fbaac6d67a7ef0dfec016cc38a64ef7a77c",
                "path": "bn-fit-modify"
            }
        ],
        "metrics": [{"type": "mean", "kwargs": {}}]
    },
    {
        "name": "terminal-bench",
        "version": "1.0",
        "description": "",
        "tasks": []
    }
]`

func TestParseRegistry(t *testing.T) {
	reg, err := ParseRegistry("registry.json", []byte(harborRegistry))
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.Find(Ref{"terminal-bench", "2.0"})
	if err != nil {
		t.Fatal(err)
	}
	want := TaskSpec{Name: "bn-fit-modify", GitURL: "https://github.com/laude-institute/terminal-bench-2.git",
		Commit: "69671fbaac6d67a7ef0dfec016cc38a64ef7a77c", Path: "bn-fit-modify"}
	if len(d.Tasks) != 2 || d.Tasks[1] != want {
		t.Errorf("tasks %+v", d.Tasks)
	}
	if h, err := reg.Find(Ref{"hello-world", "head"}); err != nil || h.Tasks[0].Commit != "" || h.Tasks[0].Path != "examples/tasks/hello-world" {
		t.Errorf("hello-world: %+v, %v", h, err)
	}
	_, err = reg.Find(Ref{"terminal-bench", "9.9"})
	if !errors.Is(err, ErrUnknownVersion) || !strings.Contains(err.Error(), `terminal-bench has no version "9.9" (it has 2.0, 1.0)`) {
		t.Errorf("missing version: %v", err)
	}
	if _, err := reg.Find(Ref{"swe-bench", "1"}); !errors.Is(err, ErrUnknownDataset) || !strings.Contains(err.Error(), `"swe-bench"`) {
		t.Errorf("unknown name: %v", err)
	}
}

// TestParseRegistryBad: each bad registry is one line naming the registry
// and the field.
func TestParseRegistryBad(t *testing.T) {
	task := func(fields string) string {
		return `[{"name": "d", "version": "1", "description": "", "tasks": [{"name": "t", ` + fields + `}]}]`
	}
	const url = `"git_url": "https://example.com/r.git"`
	const commit = `"git_commit_id": "69671fbaac6d67a7ef0dfec016cc38a64ef7a77c"`
	for _, tc := range []struct{ name, doc, want string }{
		{"not an array", `{"datasets": []}`, "r.json: not a JSON array of datasets"},
		{"truncated", harborRegistry[:200], "r.json: not a JSON array of datasets"},
		{"no name", `[{"version": "1", "tasks": []}]`, "r.json: [0].name: missing"},
		{"version a number", `[{"name": "d", "version": 2, "tasks": []}]`, "r.json: [0]: want a dataset object"},
		{"name with @", `[{"name": "d@x", "version": "1", "tasks": []}]`, `r.json: [0].name: "d@x"`},
		{"no tasks", `[{"name": "d", "version": "1"}]`, "r.json: [0].tasks: missing"},
		{"listed twice", `[{"name": "d", "version": "1", "tasks": []}, {"name": "d", "version": "1", "tasks": []}]`, "r.json: [1]: d@1 is listed twice (also [0])"},
		{"short commit", task(url + `, "git_commit_id": "69671fba", "path": "t"`), `r.json: [0].tasks[0].git_commit_id: "69671fba": want a full commit id`},
		{"no git_url", task(`"path": "t"`), "r.json: [0].tasks[0].git_url: missing: only tasks in a git repository can be pinned"},
		{"remote helper", task(`"git_url": "ext::sh -c touch% /tmp/pwned", "path": "t"`), `r.json: [0].tasks[0].git_url: "ext::sh -c touch% /tmp/pwned": want an https://`},
		{"an option", task(`"git_url": "--upload-pack=touch /tmp/x", "path": "t"`), "r.json: [0].tasks[0].git_url:"},
		{"a bare path", task(`"git_url": "/srv/repo", "path": "t"`), "r.json: [0].tasks[0].git_url:"},
		{"path escapes", task(url + `, ` + commit + `, "path": "../other"`), `r.json: [0].tasks[0].path: "../other": leaves the repository`},
		{"path escapes inside", task(url + `, ` + commit + `, "path": "a/../../b"`), `r.json: [0].tasks[0].path: "a/../../b": leaves the repository`},
		{"path absolute", task(url + `, ` + commit + `, "path": "/etc"`), `r.json: [0].tasks[0].path: "/etc": want a relative path`},
		{"path .git", task(url + `, ` + commit + `, "path": ".git/hooks"`), `r.json: [0].tasks[0].path: ".git/hooks": names .git`},
		{"path empty", task(url + `, ` + commit + `, "path": ""`), "r.json: [0].tasks[0].path: empty"},
		{"no path", task(url + `, ` + commit), "r.json: [0].tasks[0].path: missing"},
		{"task name a path", `[{"name": "d", "version": "1", "tasks": [{"name": "../x", ` + url + `, "path": "t"}]}]`, `r.json: [0].tasks[0].name: "../x": want letters`},
		{"task names twice", `[{"name": "d", "version": "1", "tasks": [{"name": "t", ` + url + `, "path": "a"}, {"name": "t", ` + url + `, "path": "b"}]}]`, `r.json: [0].tasks[1].name: "t" is also tasks[0]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRegistry("r.json", []byte(tc.doc))
			if err == nil || !errors.Is(err, ErrRegistry) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want ErrRegistry starting %q", err, tc.want)
			}
			var re *RegistryError
			if !errors.As(err, &re) || re.Source != "r.json" || strings.Contains(err.Error(), "\n") {
				t.Errorf("not a one-line *RegistryError: %#v", err)
			}
		})
	}
}

func TestLoadRegistry(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/registry.json" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(harborRegistry))
	}))
	defer srv.Close()
	ctx := context.Background()
	reg, err := LoadRegistry(ctx, srv.URL+"/registry.json", nil)
	if err != nil || len(reg.Datasets) != 3 || reg.Source != srv.URL+"/registry.json" {
		t.Fatalf("by URL: %+v, %v", reg, err)
	}
	if _, err := LoadRegistry(ctx, srv.URL+"/nope.json", nil); err == nil || !strings.Contains(err.Error(), "HTTP 404") {
		t.Errorf("404: %v", err)
	}
	p := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(p, []byte(harborRegistry), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, loc := range []string{p, "file://" + p} {
		if reg, err := LoadRegistry(ctx, loc, nil); err != nil || len(reg.Datasets) != 3 {
			t.Errorf("%s: %v", loc, err)
		}
	}
	if _, err := LoadRegistry(ctx, p+".missing", nil); err == nil || !strings.HasPrefix(err.Error(), p+".missing: ") {
		t.Errorf("missing file: %v", err)
	}
}

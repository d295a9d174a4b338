package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/proctor-sandbox/proctor/internal/cli"
	"github.com/proctor-sandbox/proctor/internal/image"
	"github.com/proctor-sandbox/proctor/internal/standin"
	"github.com/proctor-sandbox/proctor/internal/testcorpus"
	"github.com/proctor-sandbox/proctor/internal/trial"
)

// tbBase is the base image the examples/tb tasks' Dockerfiles start from
// (examples/tb/base-image.sh makes it from a minimal Debian trixie root).
const tbBase = "proctor-examples/debian:trixie"

// TestTerminalBenchExamples runs testdata/tb/*.txtar, a session each with
// one of the shipped Terminal-Bench 2 tasks of examples/tb as a user runs
// it: built from its Dockerfile on the examples' base image, its verifier
// fetching its tools from the base's Debian mirror and from a stand-in on
// loopback for astral.sh, github.com, pypi.org and files.pythonhosted.org
// (the command tbnet), recorded once and replayed to every grader.
//
// The base here is the tests' Debian trixie root (python3, git, pytest)
// under the base's name, imported into the store once per cache; each
// Dockerfile's apt-get install reaches the root's own mirror through the
// build's proxy, built once per cache. The stand-in's pytest is the root's.
func TestTerminalBenchExamples(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" || os.Getenv("PROCTOR_NO_SKIP") != "" {
			t.Fatal("cannot run here: needs root (under CI a skipped test is a failure)")
		}
		t.Skip("trials and image builds need root")
	}
	root := testcorpus.TrixieGit(t)
	mirrors := testcorpus.AptHosts(t, root)
	cache := os.Getenv("PROCTOR_TEST_CACHE") // shared by make test
	if cache == "" {
		cache = t.TempDir()
	}
	st, err := image.Open(filepath.Join(cache, trial.ImageStoreDir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Resolve(tbBase); errors.Is(err, image.ErrNotFound) {
		if _, err := st.Import(testcorpus.DebianImage(t, root, tbBase, "/")); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	// Each environment built once, before the scripts run at once.
	for _, task := range []string{"sales-report", "log-summary"} {
		args := []string{"image", "build", "-q", "--cache-dir", cache, filepath.Join(examples, "tb", task, "environment")}
		for _, h := range mirrors {
			args = append(args, "--allow-host", h)
		}
		var out bytes.Buffer
		if code := cli.Main(args, nil, &out, &out); code != 0 {
			t.Fatalf("proctor %s: exit %d\n%s", strings.Join(args, " "), code, &out)
		}
	}
	var nets sync.Map // *testscript.TestScript -> *standin.Internet
	testscript.Run(t, testscript.Params{
		Dir: filepath.Join("testdata", "tb"),
		Setup: func(env *testscript.Env) error {
			env.Setenv("EXAMPLES", examples)
			env.Setenv("PROCTOR_CACHE_DIR", cache)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exits": cmdExits,
			// tbnet: start this script's stand-in internet and point
			// proctor at it and at the mirror ($PROCTOR_CONFIG).
			// tbnet stop: stop the stand-in.
			"tbnet": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) > 1 || len(args) == 1 && args[0] != "stop" {
					ts.Fatalf("usage: tbnet [stop]")
				}
				if len(args) == 1 {
					n, ok := nets.Load(ts)
					if !ok {
						ts.Fatalf("tbnet stop: not started")
					}
					ts.Check(n.(*standin.Internet).Close())
					return
				}
				n, err := standin.Start(standin.Options{SitePackages: filepath.Join(root, "usr/lib/python3/dist-packages"), Dir: ts.MkAbs("internet")})
				ts.Check(err)
				nets.Store(ts, n)
				ts.Defer(func() { n.Close() })
				config := ts.MkAbs("net.toml")
				ts.Check(os.WriteFile(config, []byte(fmt.Sprintf("host_map = %s\nca_files = [%q]\nverifier_allow_hosts = %s\n\n[build]\nallow_hosts = %s\n",
					tomlList(n.HostMap), n.CAFile, tomlList(append(mirrors, standin.Hosts...)), tomlList(mirrors))), 0o644))
				ts.Setenv("PROCTOR_CONFIG", config)
			},
		},
		Condition: func(cond string) (bool, error) {
			if cond == "root" {
				return os.Geteuid() == 0, nil
			}
			return false, errors.New("unknown condition " + cond)
		},
	})
}

// tomlList is a TOML array of strings.
func tomlList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/proctor-sandbox/proctor/internal/cli"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"proctor": func() { os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs testdata/*.txtar: each is a user's session with proctor.
func TestScripts(t *testing.T) {
	params := testscript.Params{
		Dir: "testdata",
		Setup: func(env *testscript.Env) error {
			if os.Geteuid() != 0 {
				env.Setenv("NOT_ROOT", "1")
			}
			examples, err := filepath.Abs(filepath.Join("..", "..", "examples"))
			if err != nil {
				return err
			}
			env.Setenv("EXAMPLES", examples)
			cache := os.Getenv("PROCTOR_TEST_CACHE") // shared by make test
			if cache == "" {
				cache = filepath.Join(env.WorkDir, ".cache")
			}
			env.Setenv("PROCTOR_CACHE_DIR", cache)
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				if os.Geteuid() != 0 && (os.Getenv("CI") == "true" || os.Getenv("PROCTOR_NO_SKIP") != "") {
					return false, errors.New("scripts need root under CI")
				}
				return os.Geteuid() == 0, nil
			}
			return false, errors.New("unknown condition " + cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			// freeport NAME: set NAME to a TCP port free on 127.0.0.1 now.
			"freeport": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 1 {
					ts.Fatalf("usage: freeport NAME")
				}
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					ts.Fatalf("freeport: %v", err)
				}
				port := l.Addr().(*net.TCPAddr).Port
				l.Close()
				ts.Setenv(args[0], strconv.Itoa(port))
			},
			// fakemodel: serve OpenAI-style chat completions on loopback for
			// the rest of the script, answering each request with a function
			// of its body, and set MODEL_URL to the server's URL.
			"fakemodel": func(ts *testscript.TestScript, neg bool, args []string) {
				if neg || len(args) != 0 {
					ts.Fatalf("usage: fakemodel")
				}
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					body, _ := io.ReadAll(r.Body)
					sum := sha256.Sum256(body)
					w.Header().Set("Content-Type", "application/json")
					// The credential echoed back: the recording must hold it scrubbed.
					fmt.Fprintf(w, `{"model":"m","choices":[{"message":{"role":"assistant","content":"answer-%x"}}],"seen":%q,"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`, sum[:4], r.Header.Get("Authorization"))
				}))
				ts.Defer(srv.Close)
				ts.Setenv("MODEL_URL", srv.URL)
			},
			"exits": cmdExits,
		},
	}
	for k, v := range providerCmds() {
		params.Cmds[k] = v
	}
	testscript.Run(t, params)
}

// cmdExits is the script command exits N CMD ARGS...: CMD must exit with
// status N.
func cmdExits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: %v", err)
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		got = ee.ExitCode()
	} else if err != nil {
		ts.Fatalf("exits: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

package gitbase

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// hardening goes before every git subcommand. Command-line settings win over
// every config file, so even a config that slipped in could not run a hook,
// an fsmonitor or a transport, write a reflog or start an automatic gc.
var hardening = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "core.fsmonitor=false",
	"-c", "core.logAllRefUpdates=false",
	"-c", "gc.auto=0",
	"-c", "maintenance.auto=false",
	"-c", "protocol.allow=never",
}

// git runs git with an environment built from nothing: no setting of the
// caller's environment reaches it (GIT_DIR, GIT_CONFIG_PARAMETERS,
// XDG_CONFIG_HOME, …) except PATH, which git needs to find its helpers.
type git struct {
	path string   // absolute path of the git executable
	env  []string // the whole environment
}

// newGit builds git's environment. home is an empty directory private to
// this build: no user config, attributes or ignore file is found through it.
func newGit(path, home string) *git {
	env := []string{
		"HOME=" + home,
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_PAGER=cat",
		// Never fetch a missing object from a promisor remote (git 2.45
		// and later; older ones have no remote here to fetch from), and
		// never let a replace ref stand for an object.
		"GIT_NO_LAZY_FETCH=1",
		"GIT_NO_REPLACE_OBJECTS=1",
	}
	if p, ok := os.LookupEnv("PATH"); ok {
		env = append(env, "PATH="+p)
	}
	return &git{path: path, env: env}
}

// run runs one git command in dir with extra environment entries and
// returns its standard output. Standard input is /dev/null. On error the
// first lines of git's standard error are in the *GitError.
func (g *git) run(ctx context.Context, dir string, extraEnv []string, args ...string) ([]byte, error) {
	return g.runInput(ctx, dir, extraEnv, nil, args...)
}

func (g *git) runInput(ctx context.Context, dir string, extraEnv []string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, g.path, append(append([]string(nil), hardening...), args...)...)
	cmd.Dir = dir
	cmd.Env = append(append([]string(nil), g.env...), extraEnv...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// git starts helpers (pack-objects, index-pack): on cancellation kill
	// the whole group, and do not wait forever for pipes they hold.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err != nil {
		if ctx.Err() != nil {
			err = errors.Join(ctx.Err(), err)
		}
		return stdout.Bytes(), &GitError{Args: args, Stderr: oneLine(stderr.String()), Err: err}
	}
	return stdout.Bytes(), nil
}

// oneLine folds git's message onto one line and bounds it.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
	s = strings.TrimSuffix(s, ";")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

// alternatesEnv lends src's objects to a git command run in the new
// repository, through the environment: nothing is written into the new
// repository (no info/alternates), and src's config is never read, since
// git reads only the alternate's objects (and its own alternates). Paths
// holding the list separator or a leading quote are quoted as git expects.
func alternatesEnv(objects string) []string {
	p := objects
	if strings.ContainsAny(p, ":\"\\") {
		p = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(p) + `"`
	}
	return []string{"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + p}
}

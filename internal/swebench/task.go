package swebench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/proctor-sandbox/proctor/internal/task"
)

// Workdir is where the repository is in the sandboxes, as in SWE-bench's
// images.
const Workdir = "/testbed"

// DefaultProtected are the files an agent may not change in a SWE-bench
// task, beside the test files test_patch touches: test configuration and
// interpreter start-up hooks, through which a submission could force test
// outcomes.
var DefaultProtected = []string{
	"**/conftest.py", "**/pytest.ini", "**/tox.ini", "**/setup.cfg", "**/pyproject.toml",
	"**/sitecustomize.py", "**/usercustomize.py", "**/*.pth", "**/.gitattributes",
}

// GoProtected are the files an agent may not change in a Go instance,
// beside the test files test_patch touches: a module or workspace file, a
// replace directive or a vendored copy would point the module's
// dependencies (a test helper library among them) at code of the agent's
// choosing; .gitattributes steers git apply. A fix that needs a new
// dependency cannot be graded here.
var GoProtected = []string{"**/go.mod", "**/go.sum", "**/go.work", "**/go.work.sum", "**/vendor/**", "**/.gitattributes"}

// Options say where the repositories are and where the tasks go.
type Options struct {
	Repos    string            // a directory of clones, OWNER__NAME or OWNER/NAME
	Out      string            // tasks go in Out/INSTANCE_ID
	ImageMap map[string]string // instance_id (or repo) → container image; "" entries ignored
	// EnvMap: instance_id (or repo) → variables of every phase of its
	// task ([environment] env), e.g. PYTHONPATH=src for a src layout run
	// on the host's system. An instance_id entry wins over a repo one.
	EnvMap map[string]map[string]string
}

// The test runners an instance is graded with, chosen by the test files
// its test_patch touches.
const (
	RunnerPytest = "pytest"  // Python test files, JUnit XML
	RunnerGo     = "go test" // Go _test.go files, go test -json
)

// runnerOf picks the test runner for the files test_patch touches, and the
// files (pytest) or package directories (go test) to run.
func runnerOf(testFiles []string) (runner string, targets []string, err error) {
	var py, goDirs []string
	for _, f := range testFiles {
		switch {
		case strings.HasSuffix(f, ".py"):
			py = append(py, f)
		case strings.HasSuffix(f, "_test.go"):
			d := path.Dir(f)
			if !goPackageDir(d) {
				continue // testdata, vendor, _ or . directories hold no package the go command tests
			}
			if !slices.Contains(goDirs, d) {
				goDirs = append(goDirs, d)
			}
		}
	}
	switch {
	case len(py) > 0 && len(goDirs) > 0:
		return "", nil, fmt.Errorf("test_patch touches both Python and Go test files: one runner per instance")
	case len(py) > 0:
		return RunnerPytest, py, nil
	case len(goDirs) > 0:
		return RunnerGo, goDirs, nil
	}
	return "", nil, fmt.Errorf("test_patch touches no Python test file and no Go _test.go file in a package")
}

// goPackageDir reports whether the go command would test a package in dir.
func goPackageDir(dir string) bool {
	if dir == "." {
		return true
	}
	for _, e := range strings.Split(dir, "/") {
		if e == "testdata" || e == "vendor" || strings.HasPrefix(e, "_") || strings.HasPrefix(e, ".") {
			return false
		}
	}
	return true
}

// lookup is the map's entry for the instance, else for its repository.
func lookup[V any](m map[string]V, in Instance) (V, bool) {
	if v, ok := m[in.InstanceID]; ok {
		return v, true
	}
	v, ok := m[in.Repo]
	return v, ok
}

var envName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// CheckEnv checks the variables an EnvMap entry gives: names are shell
// identifiers, none is the harness's own (PROCTOR_*), no value holds a NUL.
func CheckEnv(env map[string]string) error {
	for k, v := range env {
		switch {
		case !envName().MatchString(k):
			return fmt.Errorf("variable %q: want a name of letters, digits and '_'", k)
		case strings.HasPrefix(k, "PROCTOR_"):
			return fmt.Errorf("variable %q: PROCTOR_ variables are the harness's", k)
		case strings.IndexByte(v, 0) >= 0:
			return fmt.Errorf("variable %q: the value holds a NUL byte", k)
		}
	}
	return nil
}

// Import writes the task of one instance and returns its directory. The
// directory must not exist; on error nothing is left of it.
func Import(in Instance, o Options) (dir string, err error) {
	dir = filepath.Join(o.Out, in.InstanceID)
	if _, err := os.Lstat(dir); err == nil {
		return "", fmt.Errorf("%s: exists already", dir)
	}
	src, err := findRepo(o.Repos, in.Repo)
	if err != nil {
		return "", fmt.Errorf("%s: %w", in.InstanceID, err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	for _, d := range []string{"environment", "tests", "solution"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return "", err
		}
	}
	repo := filepath.Join(dir, "environment", "repo")
	// A local clone shares the objects (hard links); nothing of the
	// source's config or hooks comes with it, and nothing is checked out.
	clone := exec.Command("git", "clone", "--quiet", "--no-checkout", "--", src, repo)
	clone.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := clone.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: cloning %s: %v: %s", in.InstanceID, src, err, strings.TrimSpace(string(out)))
	}
	check := exec.Command("git", "-C", repo, "cat-file", "-e", in.BaseCommit+"^{commit}")
	if err := check.Run(); err != nil {
		return "", fmt.Errorf("%s: base_commit %s is not in %s", in.InstanceID, in.BaseCommit, src)
	}
	testFiles, _ := patchFiles(in.TestPatch) // checked by ReadInstances
	runner, targets, err := runnerOf(testFiles)
	if err != nil {
		return "", fmt.Errorf("%s: %w", in.InstanceID, err)
	}
	protected := append([]string(nil), DefaultProtected...)
	script, results := pytestScript(targets), task.ResultsJUnit
	if runner == RunnerGo {
		protected = append([]string(nil), GoProtected...)
		script, results = goTestScript(targets, testFiles), task.ResultsGoTestJSON
	}
	protected = append(protected, testFiles...)
	image, _ := lookup(o.ImageMap, in)
	env, _ := lookup(o.EnvMap, in)
	if err := CheckEnv(env); err != nil {
		return "", fmt.Errorf("%s: env: %w", in.InstanceID, err)
	}

	files := map[string]string{
		"instruction.md":      in.ProblemStatement,
		"task.toml":           taskTOML(in, protected, image, env, results),
		"tests/test.patch":    in.TestPatch,
		"tests/test.sh":       script,
		"solution/gold.patch": in.Patch,
		"solution/solve.sh":   "#!/bin/sh\n# The gold patch (the SWE-bench oracle).\ncd " + Workdir + " && exec git apply --whitespace=nowarn /solution/gold.patch\n",
		"tests/expected.json": "",
	}
	exp, err := json.MarshalIndent(map[string][]string{"fail_to_pass": in.FailToPass, "pass_to_pass": nonNil(in.PassToPass)}, "", "  ")
	if err != nil {
		return "", err
	}
	files["tests/expected.json"] = string(exp) + "\n"
	for name, content := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), mode); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// findRepo finds the clone of OWNER/NAME under repos.
func findRepo(repos, repo string) (string, error) {
	owner, name, _ := strings.Cut(repo, "/")
	for _, c := range []string{owner + "__" + name, filepath.Join(owner, name), name} {
		p := filepath.Join(repos, c)
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return filepath.Abs(p)
		}
	}
	return "", fmt.Errorf("no clone of %s in %s (want %s__%s or %s/%s)", repo, repos, owner, name, owner, name)
}

func taskTOML(in Instance, protected []string, image string, env map[string]string, results string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Made by proctor swebench import from SWE-bench instance %s.\nversion = \"1.0\"\n\n", in.InstanceID)
	fmt.Fprintf(&b, "[metadata]\nswebench_instance_id = %s\nswebench_repo = %s\n\n", strconv.Quote(in.InstanceID), strconv.Quote(in.Repo))
	b.WriteString("[agent]\ntimeout_sec = 1800.0\n\n[verifier]\ntimeout_sec = 1800.0\n\n")
	fmt.Fprintf(&b, "[environment]\nworkdir = %q\nmemory_mb = 4096\nstorage_mb = 10240\n", Workdir)
	if image != "" {
		fmt.Fprintf(&b, "docker_image = %s\n", strconv.Quote(image))
	}
	if len(env) > 0 {
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString("\n[environment.env]\n")
		for _, k := range keys {
			fmt.Fprintf(&b, "%s = %s\n", k, tomlString(env[k])) // k: a checked identifier
		}
	}
	b.WriteString("\n[proctor]\n")
	if image == "" {
		b.WriteString("rootfs = \"host\"\n")
	}
	fmt.Fprintf(&b, "workspace = \"environment/repo\"\ngit_base = %q\ngrading = \"workspace\"\nresults = %q\nprotected = [\n", in.BaseCommit, results)
	for _, p := range protected {
		fmt.Fprintf(&b, "  %s,\n", strconv.Quote(p))
	}
	b.WriteString("]\n")
	return b.String()
}

// tomlString is s as a TOML basic string: quotes, backslashes and control
// characters escaped.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// shellQuote quotes a path checked by patchFiles (no quotes in it).
func shellQuote(p string) string { return "'" + p + "'" }

func pytestScript(pyTests []string) string {
	var q []string
	for _, t := range pyTests {
		q = append(q, shellQuote(t))
	}
	return `#!/bin/sh
# SWE-bench grading, made by proctor swebench import: apply the test patch,
# run the tests it touches with the harness's tripwire, report JUnit XML.
# The harness resolves from the report; this script's status is pytest's.
cd ` + Workdir + ` || exit 3
GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 git apply --whitespace=nowarn /tests/test.patch || { echo "proctor: the test patch does not apply" >&2; exit 3; }
exec python3 -m pytest -p no:cacheprovider -rA --rootdir=` + Workdir + ` --junitxml="$PROCTOR_RESULTS" ` + strings.Join(q, " ") + ` "$PROCTOR_TRIPWIRE"
`
}

// goTestScript runs go test -json on the package directories, with the
// harness's tripwire added to each (under the package clause of a test
// file test_patch touches there), so that every package's report must hold
// it failed.
func goTestScript(dirs, testFiles []string) string {
	var plant, pkgs strings.Builder
	for _, d := range dirs {
		var first string
		for _, f := range testFiles {
			if path.Dir(f) == d && strings.HasSuffix(f, "_test.go") {
				first = f
				break
			}
		}
		fmt.Fprintf(&plant, "plant %s %s || exit 3\n", shellQuote(d), shellQuote(first))
		fmt.Fprintf(&pkgs, " %s", shellQuote("./"+d))
	}
	return `#!/bin/sh
# SWE-bench grading, made by proctor swebench import: apply the test patch,
# add the harness's tripwire (a test that always fails) to each package it
# touches, and run their tests with go test -json. The harness resolves
# from the report; this script's status is go test's.
cd ` + Workdir + ` || exit 3
GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null GIT_ATTR_NOSYSTEM=1 git apply --whitespace=nowarn /tests/test.patch || { echo "proctor: the test patch does not apply" >&2; exit 3; }
PATH="$PATH:/usr/local/go/bin:/usr/lib/go/bin"
# No network, no toolchain download, no workspace file or go env file, no
# flags but these.
export GOPROXY=off GOTOOLCHAIN=local GOTELEMETRY=off GOWORK=off GOENV=off GOFLAGS=
export GOCACHE="${GOCACHE:-/tmp/proctor-gocache}"
# plant DIR TESTFILE: the tripwire, under the harness's random file name,
# in the package TESTFILE declares.
tripwire=$PROCTOR_TRIPWIRE
name=$(basename "$tripwire" .part)
plant() {
	pkg=$(sed -n 's/^package[[:space:]]\{1,\}\([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' -- "$2" | head -n 1)
	[ -n "$pkg" ] || { echo "proctor: no package clause in $2" >&2; return 1; }
	rm -f -- "$1/$name" && { echo "package $pkg"; cat "$tripwire"; } > "$1/$name"
}
` + plant.String() + `# The test binaries need not know where the tripwire came from.
unset PROCTOR_TRIPWIRE
exec go test -json` + pkgs.String() + ` > "$PROCTOR_RESULTS"
`
}

package swebench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	"**/sitecustomize.py", "**/usercustomize.py", "**/*.pth",
}

// Options say where the repositories are and where the tasks go.
type Options struct {
	Repos    string            // a directory of clones, OWNER__NAME or OWNER/NAME
	Out      string            // tasks go in Out/INSTANCE_ID
	ImageMap map[string]string // instance_id (or repo) → container image; "" entries ignored
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
	var pyTests []string
	for _, f := range testFiles {
		if strings.HasSuffix(f, ".py") {
			pyTests = append(pyTests, f)
		}
	}
	if len(pyTests) == 0 {
		return "", fmt.Errorf("%s: test_patch touches no Python test file: only pytest instances are supported", in.InstanceID)
	}
	protected := append([]string(nil), DefaultProtected...)
	protected = append(protected, testFiles...)
	image := o.ImageMap[in.InstanceID]
	if image == "" {
		image = o.ImageMap[in.Repo]
	}

	files := map[string]string{
		"instruction.md":      in.ProblemStatement,
		"task.toml":           taskTOML(in, protected, image),
		"tests/test.patch":    in.TestPatch,
		"tests/test.sh":       testScript(pyTests),
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

func taskTOML(in Instance, protected []string, image string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Made by proctor swebench import from SWE-bench instance %s.\nversion = \"1.0\"\n\n", in.InstanceID)
	fmt.Fprintf(&b, "[metadata]\nswebench_instance_id = %s\nswebench_repo = %s\n\n", strconv.Quote(in.InstanceID), strconv.Quote(in.Repo))
	b.WriteString("[agent]\ntimeout_sec = 1800.0\n\n[verifier]\ntimeout_sec = 1800.0\n\n")
	fmt.Fprintf(&b, "[environment]\nworkdir = %q\nmemory_mb = 4096\nstorage_mb = 10240\n", Workdir)
	if image != "" {
		fmt.Fprintf(&b, "docker_image = %s\n", strconv.Quote(image))
	}
	b.WriteString("\n[proctor]\n")
	if image == "" {
		b.WriteString("rootfs = \"host\"\n")
	}
	fmt.Fprintf(&b, "workspace = \"environment/repo\"\ngit_base = %q\ngrading = \"workspace\"\nresults = \"junit\"\nprotected = [\n", in.BaseCommit)
	for _, p := range protected {
		fmt.Fprintf(&b, "  %s,\n", strconv.Quote(p))
	}
	b.WriteString("]\n")
	return b.String()
}

func testScript(pyTests []string) string {
	var q []string
	for _, t := range pyTests {
		q = append(q, "'"+t+"'") // plain relative paths: checked by patchFiles
	}
	return `#!/bin/sh
# SWE-bench grading, made by proctor swebench import: apply the test patch,
# run the tests it touches with the harness's tripwire, report JUnit XML.
# The harness resolves from the report; this script's status is pytest's.
cd ` + Workdir + ` || exit 3
git apply --whitespace=nowarn /tests/test.patch || { echo "proctor: the test patch does not apply" >&2; exit 3; }
exec python3 -m pytest -p no:cacheprovider -rA --rootdir=` + Workdir + ` --junitxml="$PROCTOR_RESULTS" ` + strings.Join(q, " ") + ` "$PROCTOR_TRIPWIRE"
`
}

package trial

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/workspace"
)

// harnessPaths are where only the harness writes. An agent change there is
// a violation and never reaches the grader. /logs/agent is the agent's own
// log directory in Harbor's layout: changes there are left out silently.
var harnessPaths = []string{TestsPath, "/logs", "/proctor", SolutionPath}

// agentLogs is Harbor's directory for the agent's own logs.
const agentLogs = "/logs/agent"

// systemDirs are where, in state grading, changing a file that already
// existed is a trojan attempt: the grader calls these tools.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// pathDirs are the command search path inside (sandbox.DefaultPath), in
// order: a new file early in it can shadow a tool the grader calls.
var pathDirs = strings.Split(sandbox.DefaultPath, ":")

// builtinProtected are protected in every task: Python imports them at
// start-up from anywhere on its path, so they hook a Python grader, and a
// real fix never needs them.
var builtinProtected = []string{"**/sitecustomize.py", "**/usercustomize.py"}

// policy decides which changes of the agent reach the grader.
type policy struct {
	grading   string
	workdir   string
	protected []string
	pristine  func(p string) (bool, error) // does p exist in the pristine environment?
}

// decision is the fate of one changeset entry.
type decision struct {
	keep      bool
	violation *Violation
}

// decide applies the policy to one entry (in changeset order).
func (p *policy) decide(e workspace.Entry) (decision, error) {
	// A directory that only records the path to a change (an overlay copies
	// up the parents of what changes) is structure, never a violation.
	structural := e.Kind == workspace.KindDir && !e.Opaque
	for _, h := range harnessPaths {
		if !under(e.Path, h) {
			continue
		}
		if structural || under(e.Path, agentLogs) {
			return decision{}, nil
		}
		return decision{violation: &Violation{Kind: ViolationHarnessPath, Path: e.Path,
			Detail: fmt.Sprintf("%s under %s, which only the harness writes", describe(e), h)}}, nil
	}
	if isBytecode(e.Path) {
		// A cache is never the agent's work, and a planted one could stand
		// in for a source file the grader imports: left out.
		return decision{}, nil
	}
	if p.grading == task.GradingWorkspace && !under(e.Path, p.workdir) {
		return decision{}, nil // not the agent's submission: left out
	}
	if g, ok := p.matchProtected(e.Path); ok {
		if structural {
			return decision{keep: true}, nil
		}
		return decision{violation: &Violation{Kind: ViolationProtected, Path: e.Path,
			Detail: fmt.Sprintf("%s matching protected glob %q: restored from the pristine copy", describe(e), g)}}, nil
	}
	if p.grading == task.GradingState && !structural {
		if shadowed, err := p.shadows(e); err != nil {
			return decision{}, err
		} else if shadowed != "" {
			return decision{violation: &Violation{Kind: ViolationSystemFile, Path: e.Path,
				Detail: fmt.Sprintf("new command shadowing %s on the PATH: left out", shadowed)}}, nil
		}
		for _, d := range systemDirs {
			if !under(e.Path, d) {
				continue
			}
			existed, err := p.pristine(e.Path)
			if err != nil {
				return decision{}, fmt.Errorf("checking %q against the pristine environment: %w", e.Path, err)
			}
			if existed {
				return decision{violation: &Violation{Kind: ViolationSystemFile, Path: e.Path,
					Detail: fmt.Sprintf("%s of a file the environment ships: reverted", describe(e))}}, nil
			}
		}
	}
	return decision{keep: true}, nil
}

// shadows returns the pristine command that a new entry in a PATH
// directory would stand in for, or "".
func (p *policy) shadows(e workspace.Entry) (string, error) {
	dir, name := path.Split(e.Path)
	dir = strings.TrimSuffix(dir, "/")
	i := slices.Index(pathDirs, dir)
	if i < 0 || e.Kind == workspace.KindWhiteout {
		return "", nil
	}
	if existed, err := p.pristine(e.Path); err != nil || existed {
		return "", err // a change to an existing file is judged as such
	}
	for _, later := range pathDirs[i+1:] {
		existed, err := p.pristine(later + "/" + name)
		if err != nil {
			return "", err
		}
		if existed {
			return later + "/" + name, nil
		}
	}
	return "", nil
}

// isBytecode reports Python bytecode caches: __pycache__ directories and
// .pyc files.
func isBytecode(p string) bool {
	return strings.HasSuffix(p, ".pyc") || strings.HasSuffix(p, "/__pycache__") || strings.Contains(p, "/__pycache__/")
}

// matchProtected matches a path against the protected globs: relative to
// the workdir for paths under it, and relative to "/" always.
func (p *policy) matchProtected(abs string) (string, bool) {
	cands := []string{strings.TrimPrefix(abs, "/")}
	if under(abs, p.workdir) && abs != p.workdir {
		cands = append(cands, strings.TrimPrefix(abs, p.workdir+"/"))
	}
	for _, g := range append(slices.Clone(builtinProtected), p.protected...) {
		pat := strings.TrimPrefix(g, "/")
		for _, c := range cands {
			if ok, _ := doublestar.Match(pat, c); ok {
				return g, true
			}
		}
	}
	return "", false
}

func describe(e workspace.Entry) string {
	switch {
	case e.Kind == workspace.KindWhiteout:
		return "deletion"
	case e.Kind == workspace.KindDir && e.Opaque:
		return "replaced directory"
	case e.Kind == workspace.KindSymlink:
		return fmt.Sprintf("symlink to %q", e.Link)
	case e.Kind == workspace.KindDir:
		return "directory"
	}
	return "write"
}

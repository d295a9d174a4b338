package trial

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/task"
	"github.com/proctor-sandbox/proctor/internal/tooling"
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

// builtinProtected are protected in every task: each one hooks programs the
// grader runs, and a real fix never needs it. Python imports sitecustomize
// and usercustomize (as a module, a package or an extension) at start-up
// from anywhere on its path, and reads a python3NN.zip on its path before
// the standard library; the dynamic linker loads what ld.so.preload names
// into every program and the NSS modules nsswitch.conf names into any that
// looks up a user; ld.so.conf decides where libraries come from; the
// alternatives symlinks decide what awk, editor or java mean. A glob starting
// with "/" matches from the root only.
var builtinProtected = []string{
	"**/sitecustomize.py", "**/sitecustomize", "**/sitecustomize/**", "**/sitecustomize.*so",
	"**/usercustomize.py", "**/usercustomize", "**/usercustomize/**", "**/usercustomize.*so",
	"/usr/lib/python3*.zip", "/usr/local/lib/python3*.zip",
	"/etc/ld.so.preload", "/etc/ld.so.conf", "/etc/ld.so.conf.d/**", "/etc/nsswitch.conf",
	"/etc/alternatives/**",
}

// policy decides which changes of the agent reach the grader.
type policy struct {
	grading   string
	workdir   string
	protected []string
	pristine  func(p string) (pristineKind, error) // what p is in the pristine environment
	// pristineDescendants visits what lies beneath a pristine directory.
	pristineDescendants func(p string, visit func(string) bool) error
	// tooling is the verifier's tooling: nothing the agent wrote may
	// become part of it. nil in the run that learns it.
	tooling *tooling.Profile
	// content reads a file of the changeset (at most a few MiB); nil when
	// the changeset's content is not at hand.
	content func(p string) ([]byte, error)
	// pristineContent reads a pristine file (at most a few MiB); nil when
	// not at hand.
	pristineContent func(p string) ([]byte, error)
	// pristineSum is the SHA-256 (hex) of a pristine regular file; nil
	// when not at hand.
	pristineSum func(p string) (string, error)
	// resolve follows a path through the environment as the grader would
	// see it with the whole changeset applied; nil: links are not judged
	// by where they lead.
	resolve func(p string) (string, error)
}

// verdictOf is the policy's reading of a whole changeset.
type verdictOf struct {
	keep       map[string]bool // entries carried to the grader, by path
	violations []Violation
	leftOut    []workspace.Dropped // entries not carried, without a violation, and why
}

// judge decides every entry of a changeset (in its order: parents first). A
// refused entry refuses everything beneath it, and an entry is carried only
// when its parent is: carried, or a real directory in the pristine
// environment (never a symlink an entry would otherwise replace).
func (p *policy) judge(entries []workspace.Entry) (*verdictOf, error) {
	out := &verdictOf{keep: map[string]bool{}}
	refused := map[string]bool{}
	for _, e := range entries {
		parent := path.Dir(e.Path)
		if anc := refusedAncestor(refused, parent); anc != "" {
			refused[e.Path] = true
			out.leftOut = append(out.leftOut, workspace.Dropped{Path: e.Path, Reason: "beneath " + anc + ", which was not carried"})
			continue
		}
		d, err := p.decide(e)
		if err != nil {
			return nil, err
		}
		if d.violation != nil {
			out.violations = append(out.violations, *d.violation)
		}
		if d.keep && !out.keep[parent] {
			kind, err := p.pristine(parent)
			if err != nil {
				return nil, fmt.Errorf("checking %q against the pristine environment: %w", parent, err)
			}
			if kind != pristineDir {
				d = decision{reason: "its parent " + parent + " is not a directory in the environment and was not carried"}
			}
		}
		if d.keep {
			out.keep[e.Path] = true
			continue
		}
		if !d.structural && (d.violation == nil || d.violation.Kind != ViolationHarnessPath) {
			// What the agent put beneath a change that is not carried
			// must not be carried either: it would land on the pristine
			// version (a directory where a symlink was, say). Under a
			// harness path nothing is carried anyway, and each write there
			// is its own violation.
			refused[e.Path] = true
		}
		if d.violation == nil && d.reason != "" {
			out.leftOut = append(out.leftOut, workspace.Dropped{Path: e.Path, Reason: d.reason})
		}
	}
	return out, nil
}

func refusedAncestor(refused map[string]bool, p string) string {
	for ; p != "/" && p != "."; p = path.Dir(p) {
		if refused[p] {
			return p
		}
	}
	return ""
}

// decision is the fate of one changeset entry.
type decision struct {
	keep       bool
	structural bool // a directory the pristine environment has, not replaced
	violation  *Violation
	reason     string // why it is left out without a violation ("" when that needs no saying)
}

// decide applies the policy to one entry.
func (p *policy) decide(e workspace.Entry) (decision, error) {
	// A directory that only records the path to a change (an overlay copies
	// up the parents of what changes) is structure, never a violation; a
	// directory the agent created is a change like any other.
	structural := false
	if e.Kind == workspace.KindDir && !e.Opaque {
		kind, err := p.pristine(e.Path)
		if err != nil {
			return decision{}, fmt.Errorf("checking %q against the pristine environment: %w", e.Path, err)
		}
		structural = kind == pristineDir
	}
	for _, h := range harnessPaths {
		if !under(e.Path, h) {
			continue
		}
		if structural || under(e.Path, agentLogs) {
			return decision{structural: structural}, nil
		}
		return decision{violation: &Violation{Kind: ViolationHarnessPath, Path: e.Path,
			Detail: fmt.Sprintf("%s under %s, which only the harness writes", describe(e), h)}}, nil
	}
	if e.Kind == workspace.KindSymlink && p.resolve != nil {
		// A link into the harness's paths would hand the grader what only
		// the harness writes, or the hidden tests themselves (an answer
		// file linked to /tests/expected_output.txt).
		target := e.Link
		if !path.IsAbs(target) {
			target = path.Join(path.Dir(e.Path), target)
		}
		final, err := p.resolve(target)
		if err != nil {
			return decision{}, fmt.Errorf("following the link %q: %w", e.Path, err)
		}
		for _, h := range harnessPaths {
			if under(final, h) && !under(final, agentLogs) {
				return decision{violation: &Violation{Kind: ViolationHarnessPath, Path: e.Path,
					Detail: fmt.Sprintf("%s, which leads to %s, under %s, which only the harness writes", describe(e), final, h)}}, nil
			}
		}
	}
	if isBytecode(e.Path) {
		// A cache is never the agent's work, and a planted one could stand
		// in for a source file the grader imports.
		return decision{reason: "bytecode cache"}, nil
	}
	if strings.HasSuffix(e.Path, ".pth") {
		// Python runs the import lines of any .pth file on its path at
		// start-up: a hook into a Python grader, never carried, and a
		// violation where the grader's Python would run it.
		if p.tooling != nil && p.tooling.OnSearchPath(path.Dir(e.Path)) {
			return decision{violation: &Violation{Kind: ViolationTooling, Path: e.Path,
				Detail: fmt.Sprintf("%s of a Python start-up hook (.pth) in %s, on the verifier's import path: left out", describe(e), path.Dir(e.Path))}}, nil
		}
		return decision{reason: "Python start-up hook (.pth)"}, nil
	}
	if isGitMetadata(e.Path) {
		// A repository's own files (config, hooks, info/attributes) steer
		// the git the grader runs: a filter in .git/config rewrites what
		// git apply writes. Commits are not the submission either: the
		// grader gets the pristine repository and the agent's work tree.
		return decision{reason: "git metadata: the grader gets the pristine repository"}, nil
	}
	if p.grading == task.GradingWorkspace && !under(e.Path, p.workdir) {
		return decision{structural: structural}, nil // not the agent's submission: left out
	}
	if d, err := p.hidesProtected(e); err != nil || d.violation != nil {
		return d, err
	}
	if g, ok := p.matchProtected(e.Path); ok {
		if structural {
			return decision{keep: true, structural: true}, nil
		}
		return decision{violation: &Violation{Kind: ViolationProtected, Path: e.Path,
			Detail: fmt.Sprintf("%s matching protected glob %q: restored from the pristine copy", describe(e), g)}}, nil
	}
	if p.tooling != nil && !structural {
		kind, err := p.pristine(e.Path)
		if err != nil {
			return decision{}, fmt.Errorf("checking %q against the pristine environment: %w", e.Path, err)
		}
		c := tooling.Change{Path: e.Path, New: kind == pristineAbsent,
			Removes: e.Kind == workspace.KindWhiteout || (e.Kind == workspace.KindDir && e.Opaque) ||
				(e.Kind != workspace.KindDir && kind == pristineDir),
			Symlink: e.Kind == workspace.KindSymlink, Dir: e.Kind == workspace.KindDir}
		if e.Kind == workspace.KindFile && p.content != nil {
			c.Content = func() ([]byte, error) { return p.content(e.Path) }
		}
		if kind == pristineOther && p.pristineContent != nil {
			c.Pristine = func() ([]byte, error) { return p.pristineContent(e.Path) }
		}
		if e.Kind == workspace.KindFile && kind == pristineOther && p.pristineSum != nil {
			c.Same = func() bool {
				sum, err := p.pristineSum(e.Path)
				return err == nil && sum == e.SHA256
			}
		}
		d := p.tooling.Check(c)
		if d.Violation != "" {
			return decision{violation: &Violation{Kind: ViolationTooling, Path: e.Path,
				Detail: fmt.Sprintf("%s that %s: left out", describe(e), d.Violation)}}, nil
		}
		if d.LeftOut != "" {
			return decision{reason: d.LeftOut}, nil
		}
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
			kind, err := p.pristine(e.Path)
			if err != nil {
				return decision{}, fmt.Errorf("checking %q against the pristine environment: %w", e.Path, err)
			}
			if kind == pristineOther && e.Kind == workspace.KindFile && p.pristineSum != nil {
				if sum, err := p.pristineSum(e.Path); err == nil && sum == e.SHA256 {
					// A copy-up (chmod, touch): the pristine file stands.
					return decision{reason: "the same content as the pristine file (a copy-up): the pristine file stands"}, nil
				}
			}
			if kind != pristineAbsent {
				return decision{violation: &Violation{Kind: ViolationSystemFile, Path: e.Path,
					Detail: fmt.Sprintf("%s of a file the environment ships: reverted", describe(e))}}, nil
			}
		}
	}
	return decision{keep: true, structural: structural}, nil
}

// hidesProtected refuses a change that would take protected files away with
// their directory: a deletion or replacement of a pristine directory holding
// a path that matches a protected glob.
func (p *policy) hidesProtected(e workspace.Entry) (decision, error) {
	if (e.Kind == workspace.KindDir && !e.Opaque) || p.pristineDescendants == nil {
		return decision{}, nil
	}
	kind, err := p.pristine(e.Path)
	if err != nil || kind != pristineDir {
		return decision{}, err
	}
	var hit, glob string
	err = p.pristineDescendants(e.Path, func(sub string) bool {
		if g, ok := p.matchProtected(sub); ok {
			hit, glob = sub, g
			return true
		}
		return false
	})
	if errors.Is(err, errWalkTooLarge) {
		return decision{violation: &Violation{Kind: ViolationProtected, Path: e.Path,
			Detail: fmt.Sprintf("%s of a directory too large to check for protected files: refused", describe(e))}}, nil
	}
	if err != nil {
		return decision{}, fmt.Errorf("checking what %q held in the pristine environment: %w", e.Path, err)
	}
	if hit == "" {
		return decision{}, nil
	}
	return decision{violation: &Violation{Kind: ViolationProtected, Path: e.Path,
		Detail: fmt.Sprintf("%s of a directory holding %s, which matches protected glob %q: restored", describe(e), hit, glob)}}, nil
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
	if kind, err := p.pristine(e.Path); err != nil || kind != pristineAbsent {
		return "", err // a change to an existing file is judged as such
	}
	for _, later := range pathDirs[i+1:] {
		kind, err := p.pristine(later + "/" + name)
		if err != nil {
			return "", err
		}
		if kind != pristineAbsent {
			return later + "/" + name, nil
		}
	}
	return "", nil
}

// isGitMetadata reports a .git directory or file, or anything beneath one.
func isGitMetadata(p string) bool {
	return strings.HasSuffix(p, "/.git") || strings.Contains(p, "/.git/")
}

// isBytecode reports Python bytecode caches: __pycache__ directories and
// .pyc files.
func isBytecode(p string) bool {
	return strings.HasSuffix(p, ".pyc") || strings.HasSuffix(p, "/__pycache__") || strings.Contains(p, "/__pycache__/")
}

// matchProtected matches a path against the protected globs: relative to
// "/" always, and relative to the workdir for paths under it unless the glob
// starts with "/".
func (p *policy) matchProtected(abs string) (string, bool) {
	cands := []string{strings.TrimPrefix(abs, "/")}
	if under(abs, p.workdir) && abs != p.workdir {
		cands = append(cands, strings.TrimPrefix(abs, p.workdir+"/"))
	}
	for _, g := range append(slices.Clone(builtinProtected), p.protected...) {
		pat, anchored := strings.CutPrefix(g, "/")
		for i, c := range cands {
			if anchored && i > 0 {
				break // the workdir-relative candidate
			}
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

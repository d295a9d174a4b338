package tooling

import (
	"path"
	"slices"
	"strings"

	"github.com/proctor-sandbox/proctor/internal/task"
)

// Exposure is what a task leaves within the agent's reach, as its profile
// tells it: for the people who write benchmarks (proctor validate). It is
// plain data, made by Profile.Exposure; every list is sorted.
type Exposure struct {
	// Outside are the tooling's paths (Files and Probed) outside the code
	// roots that the grading carries the agent's changes to: all of them
	// in state grading, none in workspace grading (only the code roots
	// are carried). Check keeps the agent out of each.
	Outside []string
	// Inside are the tooling's paths in the code roots (runner
	// configuration, dependency stores): carried in either mode, and
	// kept out by Check the same way.
	Inside []string
	// Hidden are files and directories the grader read that are data,
	// not tooling code: outside the code roots, the stores and the
	// system directories, not a command or module the grader ran or
	// imported. They are in the environment the agent works in, so the
	// agent can read them: expected outputs, a hidden test set.
	Hidden []string
}

// systemTop are the top-level directories of the operating system and
// the virtual file systems: what the grader reads there is the system's,
// not the task's.
var systemTop = []string{"usr", "bin", "sbin", "etc", "proc", "sys", "dev"}

// System reports a path in the operating system's directories (/usr,
// /etc, /lib, /lib64 …) or the virtual file systems (/proc, /sys, /dev).
func System(q string) bool {
	top, _, _ := strings.Cut(strings.TrimPrefix(q, "/"), "/")
	return slices.Contains(systemTop, top) || strings.HasPrefix(top, "lib")
}

// Exposure classifies the profile's paths for a task's grading mode,
// task.GradingState or task.GradingWorkspace (any other value is taken
// as workspace grading).
func (p *Profile) Exposure(grading string) Exposure {
	inCode := func(q string) bool {
		for _, c := range p.CodeRoots {
			if under(q, c) {
				return true
			}
		}
		return false
	}
	// aboveCode: "/" and the code roots' other ancestors, which every
	// process passes on its way in.
	aboveCode := func(q string) bool {
		for _, c := range p.CodeRoots {
			if q != c && under(c, q) {
				return true
			}
		}
		return false
	}
	e := Exposure{Outside: []string{}, Inside: []string{}, Hidden: []string{}}
	for _, q := range append(slices.Clone(p.Files), p.Probed...) {
		switch {
		case inCode(q):
			e.Inside = append(e.Inside, q)
		case grading == task.GradingState:
			e.Outside = append(e.Outside, q)
		}
	}
	for _, q := range p.Files {
		base := path.Base(q)
		switch {
		case inCode(q), aboveCode(q), System(q),
			ancestorIn(p.Stores, q) != "", ancestorIn(p.Made, q) != "",
			has(p.Names, stem(base)), has(p.SearchDirs, path.Dir(q)),
			slices.Contains(p.Configs, base), slices.Contains(shellStartup, q):
			continue
		}
		e.Hidden = append(e.Hidden, q)
	}
	for _, l := range []*[]string{&e.Outside, &e.Inside, &e.Hidden} {
		slices.Sort(*l)
		*l = slices.Compact(*l)
	}
	return e
}

package cgroup

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Group is one sandbox's cgroup: a directory in each hierarchy it needs, all
// named alike and all holding the same processes.
//
// A Group owns the directories it created and nothing else. Its methods are
// safe for concurrent use; Kill and Destroy hold the group for up to a few
// seconds while processes die.
type Group struct {
	name    string
	fs      *sysfs
	members []member // fixed once New returns

	// mu serialises the operations on the group.
	mu        sync.Mutex
	destroyed bool
}

// member is one directory of a group.
type member struct {
	version     Version
	dir         string
	controllers []string // v1: the hierarchy's controllers; v2: the enabled ones
}

// target is a directory New plans to create.
type target struct {
	version     Version
	parent      string
	controllers []string
	enable      []string // v2: controllers to enable in parent's subtree_control
	optional    bool     // skip it, rather than fail, if it cannot be created
	v2root      string   // v2: the cgroup2 mount point, for placeV2's fallback
}

// UniqueName returns a name for New of the form "proctor-<pid>-<random>",
// the form CleanStale recognises.
func UniqueName() string {
	// Unique, not secret: the runtime-seeded ChaCha8 source is enough, and it
	// keeps crypto's packages (and their start-up cost) out of the binary.
	return fmt.Sprintf("proctor-%d-%016x", os.Getpid(), rand.Uint64())
}

// New creates the cgroup(s) named name below the caller's own cgroup in each
// hierarchy the limits need, and applies the limits. Use UniqueName for the
// name. A group with no limits still gets one directory, to track and kill
// processes; on v1 a cpuacct directory is added, when possible, for CPU
// usage.
//
// On v2 a controller can be enabled for the children of a cgroup only while
// that cgroup holds no process (the "no internal processes" rule), so when
// the caller's cgroup holds processes New places the group by the first of
// these that works:
//
//  1. below the caller's own cgroup <own>, when the controllers are already
//     enabled in <own>/cgroup.subtree_control or enabling them succeeds;
//  2. when <own> holds no process but the caller (a delegated scope, as
//     under systemd-run --scope -p Delegate=yes): New moves the calling
//     process, and only it, into the leaf <own>/proctor-supervisor-<pid>,
//     enables the controllers in <own> and creates the group as
//     <own>/<name>. The caller stays in that leaf: later groups go beside
//     it, Destroy leaves it, and CleanStale removes it once the caller is
//     dead and it is empty. This is the only case in which the package
//     moves a process it was not given;
//  3. when the caller is root and the cgroup2 root is writable: below
//     <cgroup2 root>/proctor, which New creates if missing, never puts a
//     process in, and leaves in place. The caller's own cgroup limits then
//     do not cover the group;
//  4. otherwise New fails with an error matching ErrInternalProcesses (and
//     syscall.EBUSY) that explains the rule and names the remedies.
//
// If a controller the limits need is unusable, New returns a
// *MissingControllersError listing all of them and creates nothing. On any
// other failure it returns a wrapped error and leaves no group directory
// behind; it may leave controllers enabled in a cgroup.subtree_control on
// v2, the caller in its supervisor leaf and <cgroup2 root>/proctor, all of
// which other groups may be relying on.
func New(name string, lim Limits) (*Group, error) { return hostFS().newGroup(name, lim) }

func (s *sysfs) newGroup(name string, lim Limits) (*Group, error) {
	if err := validName(name); err != nil {
		return nil, err
	}
	if err := lim.validate(); err != nil {
		return nil, err
	}
	l, err := s.detect()
	if err != nil {
		return nil, fmt.Errorf("detecting cgroups: %w", err)
	}
	targets, err := l.plan(lim.controllers())
	if err != nil {
		return nil, err
	}
	return s.create(name, targets, lim)
}

func validName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 200 ||
		strings.ContainsAny(name, "/\x00\n") {
		return fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	return nil
}

// plan decides which directories to create for the needed controllers.
func (l *layout) plan(need []string) ([]target, error) {
	missing := map[string]string{}
	var v2 *target
	var targets []*target
	byHier := map[*v1Hier]*target{}
	for _, c := range need {
		p, why := l.place(c)
		switch p.version {
		case V2:
			if v2 == nil {
				v2 = &target{version: V2, parent: l.unified.parent, v2root: l.unified.mount}
				targets = append(targets, v2)
			}
			v2.controllers = append(v2.controllers, c)
			if !l.unified.enabled[c] {
				v2.enable = append(v2.enable, c)
			}
		case V1:
			if byHier[p.v1] == nil {
				t := &target{version: V1, parent: p.v1.parent, controllers: p.v1.controllers}
				byHier[p.v1] = t
				targets = append(targets, t)
			}
		default:
			missing[c] = why
		}
	}
	if len(missing) > 0 {
		return nil, newMissing(missing)
	}
	if len(targets) == 0 {
		t, h, err := l.trackingTarget()
		if err != nil {
			return nil, err
		}
		if h != nil {
			byHier[h] = t
		}
		targets = append(targets, t)
	}
	// CPU usage on v1 lives in cpuacct, which no limit needs.
	if h := l.v1["cpuacct"]; h != nil && h.canCreate && byHier[h] == nil && len(byHier) > 0 {
		targets = append(targets, &target{version: V1, parent: h.parent, controllers: h.controllers, optional: true})
	}
	out := make([]target, len(targets))
	for i, t := range targets {
		out[i] = *t
	}
	return out, nil
}

// trackingTarget picks the hierarchy for a group that needs no controller,
// and for v1 returns that hierarchy too.
func (l *layout) trackingTarget() (*target, *v1Hier, error) {
	if l.version() == V2 {
		return &target{version: V2, parent: l.unified.parent}, nil, nil
	}
	for _, c := range trackingOrder {
		if h := l.v1[c]; h != nil && h.canCreate {
			return &target{version: V1, parent: h.parent, controllers: h.controllers}, h, nil
		}
	}
	return nil, nil, ErrNoHierarchy
}

// create enables v2 controllers (placing the v2 directory elsewhere if the
// caller's cgroup cannot have them, see placeV2), makes the directories and
// applies the limits, removing what it made if any step fails.
func (s *sysfs) create(name string, targets []target, lim Limits) (*Group, error) {
	for i := range targets {
		if targets[i].version == V2 && len(targets[i].enable) > 0 {
			if err := s.placeV2(&targets[i]); err != nil {
				return nil, err
			}
		}
	}
	g := &Group{name: name, fs: s}
	for _, t := range targets {
		dir := filepath.Join(t.parent, name)
		if err := s.mkdir(dir); err != nil {
			if t.optional {
				continue
			}
			g.undo()
			return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
		}
		g.members = append(g.members, member{version: t.version, dir: dir, controllers: t.controllers})
	}
	if err := g.apply(lim); err != nil {
		g.undo()
		return nil, fmt.Errorf("cgroup %s: %w", name, err)
	}
	return g, nil
}

// enable turns on controllers for the children of a v2 cgroup. EBUSY, the
// cgroup holding processes, comes back as an ErrInternalProcesses error with
// a hint.
func (s *sysfs) enable(parent string, ctrls []string) error {
	file := filepath.Join(parent, "cgroup.subtree_control")
	var b strings.Builder
	for i, c := range ctrls {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("+" + c)
	}
	err := s.write(file, b.String())
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("%w: cannot enable %s in %s, because cgroup v2 gives controllers to the children of a cgroup only while it has no processes of its own "+
			"(proctor moves no process but itself, and itself only out of a cgroup it is alone in); "+
			"hint: run proctor in a delegated cgroup of its own, e.g. systemd-run --user --scope -p Delegate=yes proctor …, or as root: %w",
			ErrInternalProcesses, strings.Join(ctrls, ","), file, err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EROFS):
		reasons := map[string]string{}
		for _, c := range ctrls {
			reasons[c] = "cannot enable in " + file + ": " + err.Error()
		}
		return newMissing(reasons)
	}
	return fmt.Errorf("enabling %s in %s: %w", strings.Join(ctrls, ","), file, err)
}

// undo removes the directories of a group that never held processes.
func (g *Group) undo() {
	for i := len(g.members) - 1; i >= 0; i-- {
		_ = g.fs.removeTree(g.members[i].dir, true)
	}
	g.members = nil
}

func (g *Group) memberFor(c string) (member, bool) {
	for _, m := range g.members {
		if slices.Contains(m.controllers, c) {
			return m, true
		}
	}
	return member{}, false
}

// AddProc moves process pid (all its threads) into every directory of the
// group. If it fails part way the process may be in some directories only;
// the caller should kill it.
func (g *Group) AddProc(pid int) error {
	if pid <= 0 || pid == os.Getpid() {
		// Writing 0 would move the caller; the caller in its own group
		// would be killed by Kill.
		return fmt.Errorf("%w: %d", ErrInvalidPid, pid)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.destroyed {
		return ErrDestroyed
	}
	for _, m := range g.members {
		if err := g.fs.write(filepath.Join(m.dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("adding pid %d to cgroup %s: %w", pid, m.dir, err)
		}
	}
	return nil
}

// Paths returns the group's directories, one per hierarchy (still listed
// after Destroy has removed them).
func (g *Group) Paths() []string {
	out := make([]string, len(g.members))
	for i, m := range g.members {
		out[i] = m.dir
	}
	return out
}

// Version is V2 if every directory of the group is on the unified
// hierarchy, V1 otherwise.
func (g *Group) Version() Version {
	for _, m := range g.members {
		if m.version == V1 {
			return V1
		}
	}
	return V2
}

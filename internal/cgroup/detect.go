package cgroup

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Version is a cgroup hierarchy version. The zero value means none.
type Version int

const (
	V1 Version = iota + 1 // legacy per-controller hierarchies
	V2                    // the unified hierarchy
)

func (v Version) String() string {
	switch v {
	case V1:
		return "v1"
	case V2:
		return "v2"
	}
	return "none"
}

// limitControllers are the controllers a Limits can need, in the order used
// for reports.
var limitControllers = []string{"cpu", "memory", "pids"}

// Info says where New would create groups and with which controllers. It is
// a snapshot: nothing is created or changed to obtain it.
type Info struct {
	// Version is V2 when every usable controller (or, if none is usable, the
	// hierarchy New would use to track processes) is on the unified
	// hierarchy, V1 when any of them is on a v1 hierarchy, and 0 when no
	// cgroup hierarchy is usable at all.
	Version Version
	// Controllers says, for "memory", "pids" and "cpu", whether New can
	// apply a limit with it.
	Controllers map[string]bool
	// Roots maps each usable controller (and "cpuacct" when usable on v1) to
	// the caller's own cgroup directory in its hierarchy: New creates groups
	// directly below it, unless on v2 that cgroup holds other processes and
	// New falls back to <cgroup2 root>/proctor (see New).
	Roots map[string]string
	// Unified is the caller's cgroup directory in the unified hierarchy
	// (the one above it when the caller is in the supervisor leaf New moved
	// it to), or "" when no cgroup2 filesystem covering it is mounted.
	Unified string
	// Reasons explains, for each unusable controller, why.
	Reasons map[string]string
}

// Detect reports which controllers are usable for limits here and on which
// version, without creating anything.
func Detect() (Info, error) { return hostFS().info() }

// v1Hier is one mounted cgroup v1 hierarchy and the caller's place in it.
type v1Hier struct {
	mount       string   // mount point (under sysfs.root)
	controllers []string // all controllers of the hierarchy, e.g. cpu,cpuacct
	parent      string   // the caller's cgroup directory
	canCreate   bool
}

// v2Node is the caller's cgroup in the unified hierarchy.
type v2Node struct {
	// parent is the caller's cgroup directory or, when the caller is in
	// the supervisor leaf New moved it to, the directory above that leaf.
	parent    string
	mount     string          // the cgroup2 mount point: the fallback's root
	available map[string]bool // cgroup.controllers of parent
	enabled   map[string]bool // cgroup.subtree_control of parent
	canCreate bool
	canEnable bool // cgroup.subtree_control is writable
}

// layout is what detect found. Controllers missing from v1 have no usable
// v1 hierarchy.
type layout struct {
	unified *v2Node
	v1      map[string]*v1Hier // controller → hierarchy; co-mounted ones share
}

// placement says where one controller would be used.
type placement struct {
	version Version
	v1      *v1Hier // for V1
}

func (s *sysfs) detect() (*layout, error) {
	cgf, err := os.Open(s.abs("/proc/self/cgroup"))
	if err != nil {
		return nil, fmt.Errorf("reading own cgroup: %w", err)
	}
	own, err := parseProcCgroup(cgf)
	cgf.Close()
	if err != nil {
		return nil, fmt.Errorf("parsing /proc/self/cgroup: %w", err)
	}
	mf, err := os.Open(s.abs("/proc/self/mountinfo"))
	if err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	mounts, err := parseMountinfo(mf)
	mf.Close()
	if err != nil {
		return nil, fmt.Errorf("parsing /proc/self/mountinfo: %w", err)
	}

	v2Path := ""
	v1Paths := map[string]string{} // controller → caller's cgroup path
	for _, e := range own {
		if e.id == 0 && len(e.controllers) == 0 {
			v2Path = e.path
			continue
		}
		for _, c := range e.controllers {
			v1Paths[c] = e.path
		}
	}

	l := &layout{v1: map[string]*v1Hier{}}
	for _, m := range mounts {
		switch m.fsType {
		case "cgroup2":
			if l.unified != nil || v2Path == "" {
				continue
			}
			dir, ok := s.resolve(m, v2Path)
			if !ok {
				continue
			}
			mount := s.abs(m.mountPoint)
			if dir != mount && filepath.Base(dir) == supervisorName(os.Getpid()) {
				// An earlier New moved us here: groups go beside the leaf.
				dir = filepath.Dir(dir)
			}
			n := &v2Node{parent: dir, mount: mount, canCreate: s.writable(dir)}
			if data, _, err := readOptional(filepath.Join(dir, "cgroup.controllers")); err == nil {
				n.available = parseSet(data)
			}
			if data, _, err := readOptional(filepath.Join(dir, "cgroup.subtree_control")); err == nil {
				n.enabled = parseSet(data)
			}
			n.canEnable = s.writable(filepath.Join(dir, "cgroup.subtree_control"))
			l.unified = n
		case "cgroup":
			ctrls := v1Controllers(m.superOpts)
			var h *v1Hier
			for _, c := range ctrls {
				if l.v1[c] != nil {
					continue // an earlier mount of the same hierarchy won
				}
				p, ok := v1Paths[c]
				if !ok {
					continue
				}
				if h == nil {
					dir, ok := s.resolve(m, p)
					if !ok {
						break
					}
					h = &v1Hier{
						mount:       s.abs(m.mountPoint),
						controllers: ctrls,
						parent:      dir,
						canCreate:   s.writable(dir),
					}
				}
				l.v1[c] = h
			}
		}
	}
	return l, nil
}

// resolve maps the caller's cgroup path in a hierarchy to a directory under
// the mount m, which may expose only part of the hierarchy (m.root).
func (s *sysfs) resolve(m mountEntry, cgPath string) (string, bool) {
	root := path.Clean(m.root)
	cg := path.Clean(cgPath)
	var rel string
	switch {
	case root == "/":
		rel = cg
	case cg == root:
		rel = "/"
	case strings.HasPrefix(cg, root+"/"):
		rel = cg[len(root):]
	default:
		return "", false
	}
	dir := filepath.Join(s.abs(m.mountPoint), rel)
	if !isDir(dir) {
		return "", false
	}
	return dir, true
}

// place says where controller c would be used, or why it cannot be.
func (l *layout) place(c string) (placement, string) {
	if u := l.unified; u != nil && u.available[c] {
		// A controller offered by the unified hierarchy cannot be on a v1
		// one at the same time.
		switch {
		case !u.canCreate:
			return placement{}, "no write permission on " + u.parent
		case !u.enabled[c] && !u.canEnable:
			return placement{}, "not enabled in " + filepath.Join(u.parent, "cgroup.subtree_control") + " and that file is not writable"
		}
		return placement{version: V2}, ""
	}
	if h := l.v1[c]; h != nil {
		if !h.canCreate {
			return placement{}, "no write permission on " + h.parent
		}
		return placement{version: V1, v1: h}, ""
	}
	if l.unified != nil {
		return placement{}, "not in " + filepath.Join(l.unified.parent, "cgroup.controllers") + " and no v1 hierarchy mounted"
	}
	return placement{}, "no cgroup hierarchy for it is mounted"
}

// version is the Version Info reports (see Info.Version).
func (l *layout) version() Version {
	var v1, v2 bool
	for _, c := range limitControllers {
		p, _ := l.place(c)
		switch p.version {
		case V1:
			v1 = true
		case V2:
			v2 = true
		}
	}
	switch {
	case v1:
		return V1
	case v2:
		return V2
	case l.unified != nil && l.unified.canCreate:
		return V2
	}
	for _, c := range trackingOrder {
		if h := l.v1[c]; h != nil && h.canCreate {
			return V1
		}
	}
	return 0
}

// trackingOrder is the order in which v1 hierarchies are tried to hold a
// group that needs no controller.
var trackingOrder = []string{"pids", "cpuacct", "cpu", "memory"}

func (s *sysfs) info() (Info, error) {
	l, err := s.detect()
	if err != nil {
		return Info{}, err
	}
	in := Info{
		Version:     l.version(),
		Controllers: map[string]bool{},
		Roots:       map[string]string{},
		Reasons:     map[string]string{},
	}
	if l.unified != nil {
		in.Unified = l.unified.parent
	}
	for _, c := range limitControllers {
		p, why := l.place(c)
		switch p.version {
		case V2:
			in.Controllers[c] = true
			in.Roots[c] = l.unified.parent
		case V1:
			in.Controllers[c] = true
			in.Roots[c] = p.v1.parent
		default:
			in.Controllers[c] = false
			in.Reasons[c] = why
		}
	}
	if h := l.v1["cpuacct"]; h != nil && h.canCreate {
		in.Roots["cpuacct"] = h.parent
	}
	return in, nil
}

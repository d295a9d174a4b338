package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// This file holds the pure parsers for the kernel's text formats. None of
// them touches the filesystem.

// mountEntry is the part of one /proc/self/mountinfo line this package uses.
type mountEntry struct {
	root       string   // the part of the filesystem mounted here ("/" for all of it)
	mountPoint string   // where it is mounted, as seen by this process
	fsType     string   // "cgroup", "cgroup2", …
	superOpts  []string // per-superblock options (v1: the controllers)
}

var errMalformed = errors.New("malformed line")

// parseMountinfo parses the format described in proc(5): "id parent
// major:minor root mountpoint options [optional...] - fstype source
// superoptions". Empty lines are skipped; any other malformed line is an
// error.
func parseMountinfo(r io.Reader) ([]mountEntry, error) {
	var out []mountEntry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		e, err := parseMountinfoLine(line)
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d: %w", n, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading mountinfo: %w", err)
	}
	return out, nil
}

func parseMountinfoLine(line string) (mountEntry, error) {
	f := strings.Split(line, " ")
	sep := -1
	for i := 6; i < len(f); i++ {
		if f[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || len(f) < sep+4 {
		return mountEntry{}, fmt.Errorf("%w: %q", errMalformed, line)
	}
	root, err := unescapeMountField(f[3])
	if err != nil {
		return mountEntry{}, err
	}
	mp, err := unescapeMountField(f[4])
	if err != nil {
		return mountEntry{}, err
	}
	return mountEntry{
		root:       root,
		mountPoint: mp,
		fsType:     f[sep+1],
		superOpts:  strings.Split(f[sep+3], ","),
	}, nil
}

// unescapeMountField undoes the kernel's octal escaping (\040 for a space,
// \011, \012, \134) of paths in mountinfo.
func unescapeMountField(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+4 > len(s) {
			return "", fmt.Errorf("%w: bad escape in %q", errMalformed, s)
		}
		v, err := strconv.ParseUint(s[i+1:i+4], 8, 8)
		if err != nil {
			return "", fmt.Errorf("%w: bad escape in %q", errMalformed, s)
		}
		b.WriteByte(byte(v))
		i += 3
	}
	return b.String(), nil
}

// v1Controllers returns the controllers a cgroup v1 mount's super options
// name. Several controllers may share one hierarchy ("cpu,cpuacct"); flags
// and key=value options (name=systemd, release_agent=…) are not controllers.
func v1Controllers(superOpts []string) []string {
	var out []string
	for _, o := range superOpts {
		switch {
		case o == "" || strings.Contains(o, "="):
		case o == "rw" || o == "ro" || o == "noprefix" || o == "clone_children" ||
			o == "xattr" || o == "cpuset_v2_mode" || o == "favordynmods" ||
			o == "nofavordynmods" || o == "all" || o == "none":
		default:
			out = append(out, o)
		}
	}
	return out
}

// procCgroupEntry is one line of /proc/<pid>/cgroup:
// "hierarchy-ID:controller-list:cgroup-path". The v2 line is "0::path".
type procCgroupEntry struct {
	id          int
	controllers []string // nil for the unified hierarchy
	path        string
}

func parseProcCgroup(r io.Reader) ([]procCgroupEntry, error) {
	var out []procCgroupEntry
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("cgroup line %d: %w: %q", n, errMalformed, line)
		}
		id, err := strconv.Atoi(parts[0])
		if err != nil || id < 0 {
			return nil, fmt.Errorf("cgroup line %d: %w: %q", n, errMalformed, line)
		}
		if !strings.HasPrefix(parts[2], "/") {
			return nil, fmt.Errorf("cgroup line %d: %w: relative path %q", n, errMalformed, parts[2])
		}
		e := procCgroupEntry{id: id, path: parts[2]}
		if parts[1] != "" {
			e.controllers = strings.Split(parts[1], ",")
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading cgroup file: %w", err)
	}
	return out, nil
}

// keyedValue finds key in a flat-keyed cgroup file ("key value" lines, as in
// memory.events, pids.events, memory.oom_control and cpu.stat). found is
// false when the key is absent (older kernels lack some keys).
func keyedValue(data, key string) (v int64, found bool, err error) {
	for _, line := range strings.Split(data, "\n") {
		k, val, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok || k != key {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return 0, true, fmt.Errorf("%w: key %q: %q", errMalformed, key, line)
		}
		return v, true, nil
	}
	return 0, false, nil
}

// parseInt parses a single-value cgroup file such as memory.peak.
func parseInt(data string) (int64, error) {
	v, err := strconv.ParseInt(strings.TrimSpace(data), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", errMalformed, data)
	}
	return v, nil
}

// parseSet parses a space-separated controller list such as
// cgroup.controllers or cgroup.subtree_control.
func parseSet(data string) map[string]bool {
	m := map[string]bool{}
	for _, f := range strings.Fields(data) {
		m[f] = true
	}
	return m
}

// parsePids parses cgroup.procs: one pid per line.
func parsePids(data string) ([]int, error) {
	var out []int
	for _, f := range strings.Fields(data) {
		p, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%w: pid %q", errMalformed, f)
		}
		out = append(out, p)
	}
	return out, nil
}

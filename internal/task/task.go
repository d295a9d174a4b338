package task

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/pelletier/go-toml/v2"
)

// Values of ProctorConfig.Grading.
const (
	GradingWorkspace = "workspace" // grade the workspace the agent left (default)
	GradingState     = "state"     // grade the whole state of the sandbox
)

// Values of network_mode. Only NetworkNone is accepted for now; see Load.
const (
	NetworkNone      = "no-network"
	NetworkAllowlist = "allowlist"
)

// RootfsHost is the ProctorConfig.Rootfs value meaning "a read-only view of
// the host's root", the default.
const RootfsHost = "host"

// Defaults. They follow Harbor's task config model, the pydantic classes in
// src/harbor/models/task/config.py and its documentation page
// docs/content/docs/tasks/index.mdx (upstream laude-institute/harbor, read
// in copies of several of its versions: parsewave/parsewave-harness (early),
// LegoX/harbor and IQuestLab/ModularRSI (middle), AlienKevin/sprint and
// lieexxli/harbor (current)):
//
//   - [verifier].timeout_sec: 600.0 in every version.
//   - [agent].timeout_sec: 600.0 in early versions; current Harbor defaults
//     it to None, meaning no timeout. Proctor never runs an agent without a
//     deadline, so it keeps the earlier 600 s.
//   - [environment].cpus = 1, memory_mb = 2048, storage_mb = 10240: Harbor's
//     defaults until it made them None ("left to the provider"); Proctor is
//     its own provider and keeps them. The deprecated memory = "2G" and
//     storage = "10G" that Terminal-Bench tasks use are still accepted and
//     converted the same way (see megabytes).
//   - [environment].workdir: None in Harbor (the image's WORKDIR);
//     Terminal-Bench images work in /app.
//   - network: Harbor defaults to public (allow_internet = true, later
//     network_mode = "public"). Proctor defaults to no network, the only mode
//     it offers: a task may only make the sandbox stricter.
const (
	DefaultAgentTimeout    = 600 * time.Second
	DefaultVerifierTimeout = 600 * time.Second
	DefaultWorkdir         = "/app"
	DefaultCPUs            = 1.0
	DefaultMemoryMB        = 2048
	DefaultStorageMB       = 10240
	DefaultPassThreshold   = 1.0
	DefaultWorkspace       = "environment/workspace" // used when it is a directory and [proctor].workspace is unset
)

// MaxConfigSize is the largest task.toml Load reads.
const MaxConfigSize = 1 << 20

// reservedDirs are the container paths the harness mounts or owns; the
// workdir may be none of them nor under them.
var reservedDirs = []string{"/proc", "/dev", "/sys", "/tmp", "/proctor", "/tests", "/logs", "/agent"}

// maxSymlinks bounds the symbolic links followed while resolving one path,
// as Linux's MAXSYMLINKS does.
const maxSymlinks = 40

// Task is a loaded, validated task directory. It is immutable after Load:
// callers must not modify its maps or slices (Raw included), and may then
// share it between goroutines freely. Every path in it is absolute, has no
// symbolic link in it, and lies inside Dir.
type Task struct {
	Dir         string // absolute, symlinks resolved
	Name        string // [task].name, else [metadata].name, else the directory's base name
	Instruction string // absolute path of instruction.md
	Tests       string // absolute path of tests/ (which holds test.sh)
	Solution    string // absolute path of solution/solve.sh, "" when absent
	Agent       AgentConfig
	Verifier    VerifierConfig
	Environment EnvironmentConfig
	Proctor     ProctorConfig
	Raw         map[string]any // the whole decoded task.toml, unknown tables and keys included
}

// AgentConfig is the [agent] table.
type AgentConfig struct {
	Timeout time.Duration // timeout_sec; DefaultAgentTimeout when unset
}

// VerifierConfig is the [verifier] table.
type VerifierConfig struct {
	Timeout time.Duration     // timeout_sec; DefaultVerifierTimeout when unset
	Env     map[string]string // env, as written (Harbor's ${VAR} templates are not expanded); never nil
}

// EnvironmentConfig is the [environment] table.
type EnvironmentConfig struct {
	Workdir      string            // absolute, clean container path; DefaultWorkdir when unset
	CPUs         float64           // cpus; DefaultCPUs when unset
	MemoryMB     int64             // memory_mb, or the legacy memory = "2G"; DefaultMemoryMB when unset
	StorageMB    int64             // storage_mb, or the legacy storage = "10G"; DefaultStorageMB when unset
	NetworkMode  string            // always NetworkNone for now
	AllowedHosts []string          // always empty for now (allow-lists are refused)
	Env          map[string]string // env, as written; never nil
	DockerImage  string            // docker_image, "" when unset
}

// ProctorConfig is the [proctor] table, Proctor's own extension to the
// Harbor format.
type ProctorConfig struct {
	// Rootfs is RootfsHost, or the absolute path of a directory inside the
	// task directory (written relative to it) to use as the root file system.
	Rootfs string
	// Workspace is the absolute path of the directory inside the task
	// directory that becomes the agent's workdir, "" for none. It defaults
	// to DefaultWorkspace when that is a directory.
	Workspace string
	// GitBase is the commit the workspace's changes are measured against, as
	// written; "HEAD" when unset and the workspace has a .git directory.
	GitBase string
	// Grading is GradingWorkspace (default) or GradingState.
	Grading string
	// Protected lists doublestar globs of files the agent must not change;
	// each was checked with doublestar.ValidatePattern.
	Protected []string
	// PassThreshold is the reward at or above which a run passes, in (0, 1];
	// default 1. Zero is refused because every run would pass.
	PassThreshold float64
}

// Load reads and validates the task in dir. It never runs anything and never
// follows a symbolic link out of the task directory; every error is an
// *Error naming the file and, where one is at fault, the field.
//
// Unknown tables and keys are kept in Raw; a known key with a value of the
// wrong type is an error. Requests Proctor cannot honour (network access, an
// allow-list) are errors, never silently dropped.
func Load(dir string) (*Task, error) {
	if dir == "" {
		return nil, &Error{Err: errorf(ErrValue, "empty task directory path")}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, &Error{File: dir, Err: err}
	}
	resolved, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &Error{File: abs, Err: ErrMissing}
		}
		return nil, &Error{File: abs, Err: err}
	}
	root, err := os.OpenRoot(resolved)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &Error{File: resolved, Err: ErrMissing}
		}
		if fi, serr := os.Stat(resolved); serr == nil && !fi.IsDir() {
			return nil, &Error{File: resolved, Err: ErrNotDir}
		}
		return nil, &Error{File: resolved, Err: err}
	}
	defer root.Close()
	l := &loader{dir: resolved, root: root, file: filepath.Join(resolved, "task.toml")}
	return l.load()
}

// loader holds the state of one Load.
type loader struct {
	dir  string   // the task directory, absolute and resolved
	root *os.Root // opened on dir: no access through it leaves dir
	file string   // absolute path of task.toml, for field errors
}

func (l *loader) load() (*Task, error) {
	t := &Task{Dir: l.dir}

	raw, err := l.readConfig()
	if err != nil {
		return nil, err
	}
	t.Raw = raw

	if t.Instruction, err = l.requireFile("instruction.md"); err != nil {
		return nil, err
	}
	if t.Tests, err = l.requireDir("tests"); err != nil {
		return nil, err
	}
	if _, err = l.requireFile("tests/test.sh"); err != nil {
		return nil, err
	}
	if t.Solution, err = l.optionalFile("solution/solve.sh"); err != nil {
		return nil, err
	}

	top := table{file: l.file, m: raw}
	if t.Name, err = l.name(top); err != nil {
		return nil, err
	}
	if t.Agent, err = l.agent(top); err != nil {
		return nil, err
	}
	if t.Verifier, err = l.verifier(top); err != nil {
		return nil, err
	}
	if t.Environment, err = l.environment(top); err != nil {
		return nil, err
	}
	if t.Proctor, err = l.proctor(top, t); err != nil {
		return nil, err
	}
	return t, nil
}

// readConfig reads and decodes task.toml.
func (l *loader) readConfig() (map[string]any, error) {
	rel, fi, err := l.resolve("task.toml")
	if err != nil {
		return nil, l.pathError("task.toml", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{File: l.file, Err: ErrNotRegular}
	}
	f, err := l.root.Open(rel)
	if err != nil {
		return nil, &Error{File: l.file, Err: err}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxConfigSize+1))
	if err != nil {
		return nil, &Error{File: l.file, Err: err}
	}
	if len(data) > MaxConfigSize {
		return nil, &Error{File: l.file, Err: errorf(ErrTooLarge, "larger than %d bytes", MaxConfigSize)}
	}
	var raw map[string]any
	if err := toml.Unmarshal(data, &raw); err != nil {
		se := &SyntaxError{Msg: strings.TrimPrefix(err.Error(), "toml: ")}
		var de *toml.DecodeError
		if errors.As(err, &de) {
			se.Line, se.Column = de.Position()
		}
		return nil, &Error{File: l.file, Err: se}
	}
	if raw == nil {
		raw = map[string]any{}
	}
	return raw, nil
}

// pathError turns an error from resolve for a required path into an *Error
// naming that path's file.
func (l *loader) pathError(rel string, err error) error {
	file := filepath.Join(l.dir, filepath.FromSlash(rel))
	if errors.Is(err, ErrMissing) {
		return &Error{File: file, Err: ErrMissing}
	}
	return &Error{File: file, Err: err}
}

func (l *loader) requireFile(rel string) (string, error) {
	res, fi, err := l.resolve(rel)
	if err != nil {
		return "", l.pathError(rel, err)
	}
	if !fi.Mode().IsRegular() {
		return "", &Error{File: filepath.Join(l.dir, filepath.FromSlash(rel)), Err: ErrNotRegular}
	}
	return filepath.Join(l.dir, res), nil
}

func (l *loader) requireDir(rel string) (string, error) {
	res, fi, err := l.resolve(rel)
	if err != nil {
		return "", l.pathError(rel, err)
	}
	if !fi.IsDir() {
		return "", &Error{File: filepath.Join(l.dir, filepath.FromSlash(rel)), Err: ErrNotDir}
	}
	return filepath.Join(l.dir, res), nil
}

// optionalFile is requireFile, but a missing file gives "".
func (l *loader) optionalFile(rel string) (string, error) {
	p, err := l.requireFile(rel)
	if errors.Is(err, ErrMissing) {
		return "", nil
	}
	return p, err
}

// resolve follows rel inside the task directory one component at a time,
// the way the kernel would, and returns the result relative to the task
// directory ("." for the directory itself) with every symbolic link
// resolved, and the Lstat of that result. Each link's target is checked
// before it is followed: an absolute target or a ".." that leaves the task
// directory is ErrEscape. All access goes through l.root, so even a tree
// changed under our feet cannot make it read outside.
func (l *loader) resolve(rel string) (string, fs.FileInfo, error) {
	switch {
	case rel == "":
		return "", nil, errorf(ErrValue, "empty path")
	case strings.IndexByte(rel, 0) >= 0:
		return "", nil, errorf(ErrValue, "path %q contains a NUL byte", rel)
	case filepath.IsAbs(rel) || strings.HasPrefix(rel, "/"):
		return "", nil, errorf(ErrEscape, "absolute path %q (want a path relative to the task directory)", rel)
	case !filepath.IsLocal(rel):
		return "", nil, errorf(ErrEscape, "%q leads outside the task directory", rel)
	}
	pending := splitPath(filepath.Clean(rel))
	var cur []string
	hops := 0
	for len(pending) > 0 {
		c := pending[0]
		pending = pending[1:]
		if c == ".." {
			if len(cur) == 0 {
				// Only a link target can hold "..": rel itself is local.
				return "", nil, errorf(ErrEscape, "a symbolic link on the way to %q leads outside the task directory", rel)
			}
			cur = cur[:len(cur)-1]
			continue
		}
		next := append(cur[:len(cur):len(cur)], c)
		name := filepath.Join(next...)
		fi, err := l.root.Lstat(name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return "", nil, errorf(ErrMissing, "%q does not exist", filepath.ToSlash(name))
			}
			return "", nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			hops++
			if hops > maxSymlinks {
				return "", nil, errorf(ErrValue, "too many levels of symbolic links at %q", filepath.ToSlash(name))
			}
			target, err := l.root.Readlink(name)
			if err != nil {
				return "", nil, err
			}
			if filepath.IsAbs(target) {
				r, err := filepath.Rel(l.dir, filepath.Clean(target))
				if err != nil || !filepath.IsLocal(r) && r != "." {
					return "", nil, errorf(ErrEscape, "symbolic link %q -> %q leads outside the task directory", filepath.ToSlash(name), target)
				}
				cur = nil
				pending = append(splitPath(r), pending...)
				continue
			}
			tp := splitPath(target)
			if escapes(len(cur), tp) {
				return "", nil, errorf(ErrEscape, "symbolic link %q -> %q leads outside the task directory", filepath.ToSlash(name), target)
			}
			pending = append(tp, pending...)
			continue
		}
		if len(pending) > 0 && !fi.IsDir() {
			return "", nil, errorf(ErrNotDir, "%q is not a directory", filepath.ToSlash(name))
		}
		cur = next
	}
	res := "."
	if len(cur) > 0 {
		res = filepath.Join(cur...)
	}
	fi, err := l.root.Lstat(res)
	if err != nil {
		return "", nil, err
	}
	return res, fi, nil
}

// escapes reports whether following parts from a directory depth levels
// below the task directory climbs above it at some point.
func escapes(depth int, parts []string) bool {
	for _, p := range parts {
		if p == ".." {
			depth--
			if depth < 0 {
				return true
			}
		} else {
			depth++
		}
	}
	return false
}

// splitPath splits p at separators, dropping empty and "." parts.
func splitPath(p string) []string {
	var out []string
	for _, s := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		if s != "." {
			out = append(out, s)
		}
	}
	return out
}

// ---- fields ----

// name picks the task's name.
func (l *loader) name(top table) (string, error) {
	for _, section := range []string{"task", "metadata"} {
		tb, err := top.table(section)
		if err != nil {
			return "", err
		}
		n, ok, err := tb.str("name")
		if err != nil {
			return "", err
		}
		if !ok {
			continue
		}
		if strings.TrimSpace(n) == "" {
			return "", tb.errorf("name", ErrValue, "empty name")
		}
		if strings.IndexFunc(n, unicode.IsControl) >= 0 {
			return "", tb.errorf("name", ErrValue, "name %q has control characters", n)
		}
		return n, nil
	}
	return filepath.Base(l.dir), nil
}

func (l *loader) agent(top table) (AgentConfig, error) {
	tb, err := top.table("agent")
	if err != nil {
		return AgentConfig{}, err
	}
	var c AgentConfig
	if c.Timeout, err = tb.timeout("timeout_sec", DefaultAgentTimeout); err != nil {
		return c, err
	}
	if _, _, err := tb.network(false); err != nil {
		return c, err
	}
	return c, nil
}

func (l *loader) verifier(top table) (VerifierConfig, error) {
	tb, err := top.table("verifier")
	if err != nil {
		return VerifierConfig{}, err
	}
	var c VerifierConfig
	if c.Timeout, err = tb.timeout("timeout_sec", DefaultVerifierTimeout); err != nil {
		return c, err
	}
	if c.Env, err = tb.env("env"); err != nil {
		return c, err
	}
	if _, _, err := tb.network(false); err != nil {
		return c, err
	}
	return c, nil
}

func (l *loader) environment(top table) (EnvironmentConfig, error) {
	tb, err := top.table("environment")
	if err != nil {
		return EnvironmentConfig{}, err
	}
	c := EnvironmentConfig{Workdir: DefaultWorkdir, CPUs: DefaultCPUs}
	if w, ok, err := tb.str("workdir"); err != nil {
		return c, err
	} else if ok {
		if err := checkWorkdir(w); err != nil {
			return c, tb.wrap("workdir", err)
		}
		c.Workdir = w
	}
	if v, ok, err := tb.number("cpus"); err != nil {
		return c, err
	} else if ok {
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return c, tb.errorf("cpus", ErrValue, "must be positive, got %s", fmtFloat(v))
		}
		c.CPUs = v
	}
	if c.MemoryMB, err = tb.megabytes("memory_mb", "memory", DefaultMemoryMB); err != nil {
		return c, err
	}
	if c.StorageMB, err = tb.megabytes("storage_mb", "storage", DefaultStorageMB); err != nil {
		return c, err
	}
	if c.NetworkMode, c.AllowedHosts, err = tb.network(true); err != nil {
		return c, err
	}
	if c.Env, err = tb.env("env"); err != nil {
		return c, err
	}
	if c.DockerImage, _, err = tb.str("docker_image"); err != nil {
		return c, err
	}
	return c, nil
}

// checkWorkdir checks a container working directory.
func checkWorkdir(w string) error {
	switch {
	case w == "":
		return errorf(ErrValue, "empty path")
	case strings.IndexFunc(w, unicode.IsControl) >= 0:
		return errorf(ErrValue, "%q has control characters", w)
	case !path.IsAbs(w):
		return errorf(ErrValue, "%q is not absolute", w)
	case path.Clean(w) != w:
		return errorf(ErrValue, "%q is not clean (want %q)", w, path.Clean(w))
	case w == "/":
		return errorf(ErrValue, `"/" cannot be the workdir`)
	}
	for _, r := range reservedDirs {
		if w == r || strings.HasPrefix(w, r+"/") {
			return errorf(ErrValue, "%q is under %s, which the harness owns", w, r)
		}
	}
	return nil
}

func (l *loader) proctor(top table, t *Task) (ProctorConfig, error) {
	tb, err := top.table("proctor")
	if err != nil {
		return ProctorConfig{}, err
	}
	c := ProctorConfig{Rootfs: RootfsHost, Grading: GradingWorkspace, PassThreshold: DefaultPassThreshold}

	// Directories the agent must not see: a workspace or rootfs that
	// overlaps them would hand it the grader or the answer.
	hidden := []string{relTo(t.Dir, t.Tests)}
	if res, fi, err := l.resolve("solution"); err == nil && fi.IsDir() {
		hidden = append(hidden, res)
	}

	if v, ok, err := tb.str("rootfs"); err != nil {
		return c, err
	} else if ok && v != RootfsHost {
		if c.Rootfs, err = l.dirField(tb, "rootfs", v, hidden); err != nil {
			return c, err
		}
	}

	if v, ok, err := tb.str("workspace"); err != nil {
		return c, err
	} else if ok {
		if c.Workspace, err = l.dirField(tb, "workspace", v, hidden); err != nil {
			return c, err
		}
	} else {
		_, fi, err := l.resolve(DefaultWorkspace)
		switch {
		case err == nil && fi.IsDir():
			if c.Workspace, err = l.dirField(tb, "workspace", DefaultWorkspace, hidden); err != nil {
				return c, err
			}
		case err == nil, errors.Is(err, ErrMissing), errors.Is(err, ErrNotDir):
			// No default workspace.
		default:
			return c, tb.wrap("workspace", fmt.Errorf("default %s: %w", DefaultWorkspace, err))
		}
	}

	if c.GitBase, _, err = tb.str("git_base"); err != nil {
		return c, err
	}
	hasGit := false
	if c.Workspace != "" {
		fi, err := l.root.Lstat(filepath.Join(relTo(t.Dir, c.Workspace), ".git"))
		hasGit = err == nil && fi.IsDir()
	}
	switch {
	case c.GitBase != "" && c.Workspace == "":
		return c, tb.errorf("git_base", ErrNotGitRepo, "set, but the task has no workspace")
	case c.GitBase != "" && !hasGit:
		return c, tb.errorf("git_base", ErrNotGitRepo, "workspace %q is not a git repository (no .git directory)", relTo(t.Dir, c.Workspace))
	case c.GitBase == "" && hasGit:
		c.GitBase = "HEAD"
	}

	if v, ok, err := tb.str("grading"); err != nil {
		return c, err
	} else if ok {
		if v != GradingWorkspace && v != GradingState {
			return c, tb.errorf("grading", ErrUnknownValue, "unknown value %q (want %q or %q)", v, GradingWorkspace, GradingState)
		}
		c.Grading = v
	}

	if v, ok, err := tb.strings("protected"); err != nil {
		return c, err
	} else if ok {
		for i, g := range v {
			f := fmt.Sprintf("protected[%d]", i)
			if g == "" {
				return c, tb.errorf(f, ErrValue, "empty glob")
			}
			if !doublestar.ValidatePattern(g) {
				return c, tb.errorf(f, ErrValue, "invalid glob %q", g)
			}
		}
		c.Protected = v
	}

	if v, ok, err := tb.number("pass_threshold"); err != nil {
		return c, err
	} else if ok {
		if !(v > 0 && v <= 1) {
			return c, tb.errorf("pass_threshold", ErrValue, "%s is not in (0, 1]", fmtFloat(v))
		}
		c.PassThreshold = v
	}
	return c, nil
}

// dirField resolves the value of a path field that must name a directory
// inside the task directory overlapping none of hidden.
func (l *loader) dirField(tb table, key, v string, hidden []string) (string, error) {
	res, fi, err := l.resolve(v)
	if err != nil {
		return "", tb.wrap(key, err)
	}
	if !fi.IsDir() {
		return "", tb.errorf(key, ErrNotDir, "%q is not a directory", v)
	}
	for _, h := range hidden {
		if within(res, h) || within(h, res) {
			return "", tb.errorf(key, ErrOverlap, "%q overlaps %q, which the agent must not see", v, filepath.ToSlash(h))
		}
	}
	return filepath.Join(l.dir, res), nil
}

// within reports whether the relative path b is a or inside a.
func within(a, b string) bool {
	if a == "." {
		return true
	}
	return b == a || strings.HasPrefix(b, a+string(filepath.Separator))
}

// relTo returns p relative to dir; p is inside dir.
func relTo(dir, p string) string {
	r, err := filepath.Rel(dir, p)
	if err != nil {
		return p
	}
	return r
}

// ---- typed access to decoded TOML ----

// table is one decoded TOML table and its name for error messages.
type table struct {
	file string
	name string         // "environment"; "" for the document itself
	m    map[string]any // nil when the table is absent
}

// field names key in this table, as in "[environment].memory_mb". key is
// one of our known, bare keys, or a path built with quoteKey such as
// `env."A B"` or "protected[2]".
func (t table) field(key string) string {
	if t.name == "" {
		return key
	}
	return "[" + t.name + "]." + key
}

func (t table) errorf(key string, sentinel error, format string, args ...any) error {
	return &Error{File: t.file, Field: t.field(key), Err: errorf(sentinel, format, args...)}
}

func (t table) wrap(key string, err error) error {
	return &Error{File: t.file, Field: t.field(key), Err: err}
}

func (t table) typeError(key, want string, v any) error {
	return t.errorf(key, ErrType, "want %s, got %s", want, describe(v))
}

// table returns the sub-table key; absent gives an empty table.
func (t table) table(key string) (table, error) {
	sub := table{file: t.file, name: key}
	if t.name != "" {
		sub.name = t.name + "." + quoteKey(key)
	}
	v, ok := t.m[key]
	if !ok {
		return sub, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		name := "[" + sub.name + "]"
		return sub, &Error{File: t.file, Field: name, Err: errorf(ErrType, "want a table, got %s", describe(v))}
	}
	sub.m = m
	return sub, nil
}

func (t table) str(key string) (string, bool, error) {
	v, ok := t.m[key]
	if !ok {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", false, t.typeError(key, "a string", v)
	}
	return s, true, nil
}

func (t table) boolean(key string) (bool, bool, error) {
	v, ok := t.m[key]
	if !ok {
		return false, false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, false, t.typeError(key, "a boolean", v)
	}
	return b, true, nil
}

// number accepts a TOML integer or float.
func (t table) number(key string) (float64, bool, error) {
	v, ok := t.m[key]
	if !ok {
		return 0, false, nil
	}
	switch n := v.(type) {
	case int64:
		return float64(n), true, nil
	case float64:
		return n, true, nil
	}
	return 0, false, t.typeError(key, "a number", v)
}

// integer accepts a TOML integer, or a float with no fractional part as
// Harbor's pydantic models do.
func (t table) integer(key string) (int64, bool, error) {
	v, ok := t.m[key]
	if !ok {
		return 0, false, nil
	}
	switch n := v.(type) {
	case int64:
		return n, true, nil
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<62 {
			return int64(n), true, nil
		}
	}
	return 0, false, t.typeError(key, "an integer", v)
}

func (t table) strings(key string) ([]string, bool, error) {
	v, ok := t.m[key]
	if !ok {
		return nil, false, nil
	}
	a, ok := v.([]any)
	if !ok {
		return nil, false, t.typeError(key, "an array of strings", v)
	}
	out := make([]string, 0, len(a))
	for i, e := range a {
		s, ok := e.(string)
		if !ok {
			return nil, false, t.typeError(fmt.Sprintf("%s[%d]", key, i), "a string", e)
		}
		out = append(out, s)
	}
	return out, true, nil
}

// timeout reads a positive number of seconds.
func (t table) timeout(key string, def time.Duration) (time.Duration, error) {
	v, ok, err := t.number(key)
	if err != nil || !ok {
		return def, err
	}
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, t.errorf(key, ErrValue, "want a finite number of seconds, got %s", fmtFloat(v))
	case v <= 0:
		return 0, t.errorf(key, ErrValue, "must be positive, got %s", fmtFloat(v))
	case v*float64(time.Second) >= math.MaxInt64:
		return 0, t.errorf(key, ErrValue, "%s seconds is too long", fmtFloat(v))
	}
	d := time.Duration(math.Round(v * float64(time.Second)))
	if d <= 0 {
		return 0, t.errorf(key, ErrValue, "%s seconds is shorter than a nanosecond", fmtFloat(v))
	}
	return d, nil
}

// megabytes reads key as a positive integer of megabytes, or else the legacy
// string form legacy ("2G", "512M", "1048576K"), which Harbor still accepts
// and converts as here: G × 1024, M as is, K ÷ 1024, truncated. Both given
// and different is an error, as in Harbor.
func (t table) megabytes(key, legacy string, def int64) (int64, error) {
	const maxMB = math.MaxInt64 >> 20 // so that MB << 20 fits an int64
	n, ok, err := t.integer(key)
	if err != nil {
		return 0, err
	}
	if ok && (n <= 0 || n > maxMB) {
		return 0, t.errorf(key, ErrValue, "must be positive and at most %d, got %d", int64(maxMB), n)
	}
	s, lok, err := t.str(legacy)
	if err != nil {
		return 0, err
	}
	if !lok {
		if ok {
			return n, nil
		}
		return def, nil
	}
	m, err := parseSize(s)
	if err != nil {
		return 0, t.wrap(legacy, err)
	}
	if m <= 0 || m > maxMB {
		return 0, t.errorf(legacy, ErrValue, "%q is %d MB (want at least 1 MB)", s, m)
	}
	if ok && n != m {
		return 0, t.errorf(legacy, ErrValue, "%q is %d MB, but %s is %d", s, m, key, n)
	}
	return m, nil
}

// parseSize converts a size like "2G" to megabytes as Harbor's
// EnvironmentConfig._parse_size_to_mb does.
func parseSize(s string) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	var mul float64
	switch {
	case strings.HasSuffix(u, "G"):
		mul = 1024
	case strings.HasSuffix(u, "M"):
		mul = 1
	case strings.HasSuffix(u, "K"):
		mul = 1.0 / 1024
	default:
		return 0, errorf(ErrValue, "invalid size %q (want a number and G, M or K, as in \"2G\")", s)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(u[:len(u)-1]), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f*mul >= 1<<62 {
		return 0, errorf(ErrValue, "invalid size %q (want a number and G, M or K, as in \"2G\")", s)
	}
	return int64(f * mul), nil
}

// env reads a table of environment variables.
func (t table) env(key string) (map[string]string, error) {
	out := map[string]string{}
	v, ok := t.m[key]
	if !ok {
		return out, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, t.typeError(key, "a table of strings", v)
	}
	for k, e := range m {
		f := key + "." + quoteKey(k)
		switch {
		case k == "":
			return nil, t.errorf(key, ErrValue, "empty variable name")
		case strings.ContainsAny(k, "=\x00"):
			return nil, t.errorf(f, ErrValue, "variable name %q contains '=' or NUL", k)
		}
		s, ok := e.(string)
		if !ok {
			return nil, t.typeError(f, "a string", e)
		}
		if strings.IndexByte(s, 0) >= 0 {
			return nil, t.errorf(f, ErrValue, "value contains a NUL byte")
		}
		out[k] = s
	}
	return out, nil
}

// network checks network_mode, allowed_hosts and, in [environment]
// (baseline), allow_internet. Only no network is offered; every request for
// more is ErrUnsupported rather than quietly denied.
func (t table) network(baseline bool) (string, []string, error) {
	if baseline {
		if b, ok, err := t.boolean("allow_internet"); err != nil {
			return "", nil, err
		} else if ok && b {
			return "", nil, t.errorf("allow_internet", ErrUnsupported,
				"network access is not supported yet (a later release); remove it or set network_mode = %q", NetworkNone)
		}
	}
	mode, ok, err := t.str("network_mode")
	if err != nil {
		return "", nil, err
	}
	switch {
	case !ok || mode == NetworkNone:
		mode = NetworkNone
	case mode == NetworkAllowlist:
		return "", nil, t.errorf("network_mode", ErrUnsupported, "allow-list egress is not supported yet (a later release)")
	case mode == "public":
		return "", nil, t.errorf("network_mode", ErrUnsupported, "public network access is not supported yet (a later release) (want %q)", NetworkNone)
	default:
		return "", nil, t.errorf("network_mode", ErrUnknownValue, "unknown value %q (want %q; %q is not supported yet)", mode, NetworkNone, NetworkAllowlist)
	}
	hosts, _, err := t.strings("allowed_hosts")
	if err != nil {
		return "", nil, err
	}
	if len(hosts) > 0 {
		return "", nil, t.errorf("allowed_hosts", ErrUnsupported, "allow-list egress is not supported yet (a later release)")
	}
	return mode, nil, nil
}

// quoteKey writes a TOML key as TOML would: bare when it can be.
func quoteKey(k string) string {
	if k == "" {
		return `""`
	}
	for _, r := range k {
		if !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return strconv.Quote(k)
		}
	}
	return k
}

// describe names a decoded TOML value's type, with the value when short.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		if len(x) > 40 {
			return "a string"
		}
		return fmt.Sprintf("string %q", x)
	case int64:
		return fmt.Sprintf("integer %d", x)
	case float64:
		return "float " + fmtFloat(x)
	case bool:
		return fmt.Sprintf("boolean %t", x)
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	case time.Time:
		return "an offset date-time"
	case toml.LocalDateTime:
		return "a local date-time"
	case toml.LocalDate:
		return "a local date"
	case toml.LocalTime:
		return "a local time"
	}
	return fmt.Sprintf("a %T", v)
}

func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

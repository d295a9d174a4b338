package task

import (
	"errors"
	"fmt"
	"github.com/proctor-sandbox/proctor/internal/netpolicy"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
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

// Values of network_mode: no network, or egress through the allow-list
// proxy (in [environment] and [agent]; the grader never has network).
const (
	NetworkNone      = "no-network"
	NetworkAllowlist = "allowlist"
	// NetworkPublic is Harbor's open network: a task may ask for it
	// (EnvironmentConfig.Internet); only the operator grants it.
	NetworkPublic = "public"
)

// RootfsHost is the ProctorConfig.Rootfs value meaning "a read-only view of
// the host's root", the default.
const RootfsHost = "host"

// RootfsImage is the ProctorConfig.Rootfs value meaning "the container
// image [environment].docker_image names": the default for a task that
// sets docker_image and no [proctor].rootfs.
const RootfsImage = "image"

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
//     network_mode = "public"). Proctor defaults to no network. A task that
//     asks for the internet (every published Terminal-Bench 2 task does)
//     is recorded as asking (Internet); what its agent gets is the
//     operator's policy: a task may only make the sandbox stricter.
const (
	DefaultAgentTimeout    = 600 * time.Second
	DefaultVerifierTimeout = 600 * time.Second
	DefaultBuildTimeout    = 600 * time.Second // [environment].build_timeout_sec, Harbor's default
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
	// SolutionEnv is [solution.env]: what solve.sh runs with when the
	// solution is the agent (validate, the oracle); never nil.
	SolutionEnv map[string]string
	// Artifacts are the paths Harbor collects from the agent's
	// environment after its phase (the top-level artifacts array).
	Artifacts []Artifact
	Raw       map[string]any // the whole decoded task.toml, unknown tables and keys included
}

// Artifact is one entry of the artifacts array: a path in the agent's
// environment (a file or a directory) to copy out, under Destination (a
// relative path, default the source's base name), less what Exclude's
// globs match.
type Artifact struct {
	Source      string
	Destination string
	Exclude     []string
}

// InternetRequested reports whether the task asks for open network access
// for its agent ([environment] allow_internet = true or network_mode =
// "public", or [agent] network_mode = "public").
func (t *Task) InternetRequested() bool {
	if t.Agent.NetworkMode != "" {
		return t.Agent.Internet
	}
	return t.Environment.Internet
}

// AgentConfig is the [agent] table.
type AgentConfig struct {
	Timeout time.Duration // timeout_sec; DefaultAgentTimeout when unset
	// NetworkMode and AllowedHosts override the environment's for the
	// agent phase when network_mode is set here ("" when not).
	NetworkMode  string
	AllowedHosts []string
	// Internet: network_mode = "public" here (NetworkMode is then
	// NetworkNone until the operator grants more).
	Internet bool
}

// AgentNetwork is the network of the agent phase: [agent]'s when it sets
// network_mode, else [environment]'s.
func (t *Task) AgentNetwork() (mode string, hosts []string) {
	if t.Agent.NetworkMode != "" {
		return t.Agent.NetworkMode, t.Agent.AllowedHosts
	}
	return t.Environment.NetworkMode, t.Environment.AllowedHosts
}

// DigestOptions are the options under which the task's directory is
// digested (DigestTree): fifos, sockets and devices are allowed in its
// rootfs directory, but not in a workspace inside it, and nowhere else
// (tests/, solution/, the workspace refuse them, naming the path); the
// rootfs's own digest, the environment's, comes from the same walk
// (Subtrees[RootfsRel]).
func (t *Task) DigestOptions(cache *HashCache) DigestOptions {
	o := DigestOptions{Cache: cache}
	if rel, ok := t.RootfsRel(); ok {
		o.Special = []string{rel}
		o.Subtrees = []string{rel}
		if t.Proctor.Workspace != "" {
			if ws, err := filepath.Rel(t.Dir, t.Proctor.Workspace); err == nil {
				o.SpecialExcept = []string{filepath.ToSlash(ws)}
			}
		}
	}
	return o
}

// RootfsRel returns the rootfs directory relative to Dir (slash-separated),
// when the environment is one.
func (t *Task) RootfsRel() (string, bool) {
	if t.Proctor.Rootfs == RootfsHost || t.Proctor.Rootfs == RootfsImage || t.Proctor.Rootfs == "" {
		return "", false
	}
	rel, err := filepath.Rel(t.Dir, t.Proctor.Rootfs)
	if err != nil {
		return "", false
	}
	return filepath.ToSlash(rel), true
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
	NetworkMode  string            // NetworkNone or NetworkAllowlist
	AllowedHosts []string          // with NetworkAllowlist: netpolicy rules
	Internet     bool              // allow_internet = true or network_mode = "public": asked for, not granted
	GPUs         int64             // gpus: always 0 (more is refused)
	Env          map[string]string // env, as written; never nil
	DockerImage  string            // docker_image, "" when unset
	// Dockerfile is the absolute path of environment/Dockerfile when the
	// environment is built from it (no docker_image, no [proctor].rootfs
	// other than "image"), else "".
	Dockerfile string
	// BuildTimeout is build_timeout_sec: how long building the
	// environment may take; DefaultBuildTimeout when unset.
	BuildTimeout time.Duration
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
	// Results is the format of the grader's structured report
	// (ResultsJUnit), "" when the reward file decides; Expected is then
	// what the report must show (read from tests/expected.json).
	Results  string
	Expected *Expected
	// VerifierHosts are hosts the verifier fetches its tools from, let
	// through (with the operator's) while its fetches are recorded on the
	// pristine environment; a trial's grader only gets the recording.
	VerifierHosts []string
	// PinnedEnv are variables the task pins in every phase, on top of the
	// harness's pinned defaults (TZ, LANG, LC_ALL), e.g. PYTHONHASHSEED;
	// never nil. They are recorded in the verdict.
	PinnedEnv map[string]string
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
	sol, err := top.table("solution")
	if err != nil {
		return nil, err
	}
	if t.SolutionEnv, err = sol.env("env"); err != nil {
		return nil, err
	}
	if t.Artifacts, err = artifacts(top); err != nil {
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
	mode, hosts, internet, set, err := tb.network(false, true)
	if err != nil {
		return c, err
	}
	if set {
		c.NetworkMode, c.AllowedHosts, c.Internet = mode, hosts, internet
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
	if _, _, _, _, err := tb.network(false, false); err != nil {
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
	if c.NetworkMode, c.AllowedHosts, c.Internet, _, err = tb.network(true, true); err != nil {
		return c, err
	}
	if n, ok, err := tb.integer("gpus"); err != nil {
		return c, err
	} else if ok && n < 0 {
		return c, tb.errorf("gpus", ErrValue, "must not be negative, got %d", n)
	} else if ok && n > 0 {
		return c, tb.errorf("gpus", ErrUnsupported, "%d GPUs asked for: Proctor's sandboxes have no GPUs", n)
	}
	if v, ok := tb.m["mcp_servers"]; ok {
		a, isArray := v.([]any)
		switch {
		case !isArray:
			return c, tb.typeError("mcp_servers", "an array", v)
		case len(a) > 0:
			return c, tb.errorf("mcp_servers", ErrUnsupported, "%d MCP server(s) asked for: Proctor does not start MCP servers for the agent", len(a))
		}
	}
	if c.Env, err = tb.env("env"); err != nil {
		return c, err
	}
	if c.DockerImage, _, err = tb.str("docker_image"); err != nil {
		return c, err
	}
	if c.BuildTimeout, err = tb.timeout("build_timeout_sec", DefaultBuildTimeout); err != nil {
		return c, err
	}
	if img := c.DockerImage; img != "" && (len(img) > 512 || strings.IndexFunc(img, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0) {
		return c, tb.errorf("docker_image", ErrValue, "%q is not an image reference", img)
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

// proctorKeys are the keys of the [proctor] table.
var proctorKeys = map[string]bool{"rootfs": true, "workspace": true, "git_base": true, "grading": true, "protected": true, "pass_threshold": true, "results": true, "expected": true, "pinned_env": true, "verifier_hosts": true}

func (l *loader) proctor(top table, t *Task) (ProctorConfig, error) {
	tb, err := top.table("proctor")
	if err != nil {
		return ProctorConfig{}, err
	}
	// Proctor's own table is strict: a misspelt key (protect = [...]) would
	// otherwise leave a task silently weaker than its author meant.
	for k := range tb.m {
		if !proctorKeys[k] {
			return ProctorConfig{}, tb.errorf(quoteKey(k), ErrUnknownValue, "unknown key (want one of rootfs, workspace, git_base, grading, protected, pass_threshold, results, expected, pinned_env, verifier_hosts)")
		}
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
	} else if ok && v != RootfsHost && v != RootfsImage {
		if c.Rootfs, err = l.dirField(tb, "rootfs", v, hidden); err != nil {
			return c, err
		}
	} else if ok && v == RootfsImage && t.Environment.DockerImage == "" {
		if t.Environment.Dockerfile, err = l.builtEnvironment(); err != nil {
			return c, err
		} else if t.Environment.Dockerfile == "" {
			return c, tb.errorf("rootfs", ErrValue, "%q, but [environment] sets no docker_image and there is no environment/Dockerfile", RootfsImage)
		}
		c.Rootfs = RootfsImage
	} else if !ok && t.Environment.DockerImage != "" {
		// The image is the environment, as in Harbor: resolved in the
		// image store when the trial runs.
		c.Rootfs = RootfsImage
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

	if _, ok := tb.m["rootfs"]; !ok && t.Environment.DockerImage == "" {
		// An environment declared only by a Dockerfile is built (build.go);
		// one declared by a compose file is refused: neither silently
		// becomes this machine's, unless the task asks for the host by
		// name.
		if t.Environment.Dockerfile, err = l.builtEnvironment(); err != nil {
			return c, err
		} else if t.Environment.Dockerfile != "" {
			c.Rootfs = RootfsImage
		}
	}

	if c.GitBase, _, err = tb.str("git_base"); err != nil {
		return c, err
	}
	hasGit := false
	if c.Workspace != "" {
		hasGit = l.isGitRepo(relTo(t.Dir, c.Workspace))
	}
	switch {
	case c.GitBase != "" && c.Workspace == "":
		return c, tb.errorf("git_base", ErrNotGitRepo, "set, but the task has no workspace")
	case c.GitBase != "" && !hasGit:
		return c, tb.errorf("git_base", ErrNotGitRepo, "workspace %q is not a git repository (no .git directory or file, not a bare repository)", relTo(t.Dir, c.Workspace))
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
	} else if c.Rootfs == RootfsImage {
		// A Terminal-Bench task is graded in the container the agent
		// left, as Harbor does.
		c.Grading = GradingState
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
	if c.PinnedEnv, err = tb.env("pinned_env"); err != nil {
		return c, err
	}
	for k := range c.PinnedEnv {
		if strings.HasPrefix(k, "PROCTOR_") {
			return c, tb.errorf("pinned_env."+quoteKey(k), ErrValue, "PROCTOR_ variables are the harness's")
		}
	}
	if err := l.results(tb, &c); err != nil {
		return c, err
	}
	if c.VerifierHosts, _, err = tb.strings("verifier_hosts"); err != nil {
		return c, err
	}
	for i, h := range c.VerifierHosts {
		if _, err := netpolicy.ParseRule(h); err != nil {
			return c, tb.errorf(fmt.Sprintf("verifier_hosts[%d]", i), ErrValue, "%v", err)
		}
	}
	return c, nil
}

// isGitRepo reports whether the directory rel holds a git repository: a
// .git directory, a .git file naming the git directory elsewhere (a linked
// worktree, --separate-git-dir), or a bare repository.
func (l *loader) isGitRepo(rel string) bool {
	if fi, err := l.root.Lstat(filepath.Join(rel, ".git")); err == nil && fi.IsDir() {
		return true
	} else if err == nil && fi.Mode().IsRegular() && fi.Size() < 4096 {
		b, err := l.root.ReadFile(filepath.Join(rel, ".git"))
		return err == nil && strings.HasPrefix(string(b), "gitdir:")
	}
	head, err1 := l.root.Lstat(filepath.Join(rel, "HEAD"))
	objects, err2 := l.root.Lstat(filepath.Join(rel, "objects"))
	refs, err3 := l.root.Lstat(filepath.Join(rel, "refs"))
	return err1 == nil && err2 == nil && err3 == nil && head.Mode().IsRegular() && objects.IsDir() && refs.IsDir()
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

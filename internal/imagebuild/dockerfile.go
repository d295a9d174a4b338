package imagebuild

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"
)

// MaxDockerfileSize is the largest Dockerfile read.
const MaxDockerfileSize = 1 << 20

// Dockerfile is a parsed and checked Dockerfile: BuildKit's own parser and
// instruction types, every instruction and flag in it one this package
// builds.
type Dockerfile struct {
	Name     string // how messages name the file ("environment/Dockerfile")
	Escape   rune
	MetaArgs []instructions.ArgCommand // ARGs before the first FROM
	Stages   []instructions.Stage
}

// Parse reads a Dockerfile with BuildKit's parser and instruction
// packages and refuses, naming the line, whatever this package does not
// build (see the package documentation).
func Parse(name string, r io.Reader) (*Dockerfile, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxDockerfileSize+1))
	if err != nil {
		return nil, &LineError{File: name, Err: err}
	}
	if len(b) > MaxDockerfileSize {
		return nil, &LineError{File: name, Err: fmt.Errorf("larger than %d bytes", MaxDockerfileSize)}
	}
	res, err := parser.Parse(bytes.NewReader(b))
	if err != nil {
		return nil, locate(name, err)
	}
	stages, meta, err := instructions.Parse(res.AST, nil)
	if err != nil {
		return nil, locate(name, err)
	}
	if len(stages) == 0 {
		return nil, &LineError{File: name, Err: errors.New("no FROM instruction")}
	}
	d := &Dockerfile{Name: name, Escape: res.EscapeToken, MetaArgs: meta, Stages: stages}
	for _, st := range stages {
		if err := d.check(st); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// locate turns a BuildKit error carrying a source location into a
// LineError naming the first line.
func locate(name string, err error) error {
	var le *parser.LocationError
	if errors.As(err, &le) && len(le.Locations) > 0 && len(le.Locations[0]) > 0 {
		return &LineError{File: name, Line: le.Locations[0][0].Start.Line, Err: errors.Unwrap(le)}
	}
	return &LineError{File: name, Err: err}
}

// line is the first line of a command.
func line(c instructions.Command) int {
	if loc := c.Location(); len(loc) > 0 {
		return loc[0].Start.Line
	}
	return 0
}

func stageLine(st instructions.Stage) int {
	if len(st.Location) > 0 {
		return st.Location[0].Start.Line
	}
	return 0
}

// check refuses what the builder does not do, naming the line: fail
// closed, never a silently different image.
func (d *Dockerfile) check(st instructions.Stage) error {
	at := func(c instructions.Command, err error) error {
		return &LineError{File: d.Name, Line: line(c), Err: err}
	}
	for _, c := range st.Commands {
		switch c := c.(type) {
		case *instructions.RunCommand:
			for _, f := range c.FlagsUsed {
				return at(c, unsupported("RUN --%s (mounts, network modes, security modes and devices)", f))
			}
			if len(c.Files) > 0 {
				if _, err := heredocScript(c); err != nil {
					return at(c, err)
				}
			}
		case *instructions.CopyCommand:
			if c.Parents {
				return at(c, unsupported("COPY --parents"))
			}
			if err := checkChmod(c.Chmod); err != nil {
				return at(c, err)
			}
		case *instructions.AddCommand:
			if c.KeepGitDir != nil {
				return at(c, unsupported("ADD --keep-git-dir (git sources)"))
			}
			if c.Unpack != nil && *c.Unpack {
				return at(c, unsupported("ADD --unpack=true (unpacking archives)"))
			}
			if err := checkChmod(c.Chmod); err != nil {
				return at(c, err)
			}
		case *instructions.EnvCommand, *instructions.ArgCommand, *instructions.WorkdirCommand,
			*instructions.UserCommand, *instructions.LabelCommand, *instructions.ShellCommand,
			*instructions.CmdCommand, *instructions.EntrypointCommand, *instructions.ExposeCommand,
			*instructions.HealthCheckCommand, *instructions.VolumeCommand, *instructions.StopSignalCommand,
			*instructions.MaintainerCommand, *instructions.OnbuildCommand:
		default:
			return at(c, unsupported("instruction %s", strings.ToUpper(c.Name())))
		}
	}
	return nil
}

// checkChmod accepts an octal --chmod (BuildKit's symbolic modes are not
// supported).
func checkChmod(s string) error {
	if s == "" || strings.Contains(s, "$") {
		return nil // checked again once expanded
	}
	if _, err := parseChmod(s); err != nil {
		return err
	}
	return nil
}

func parseChmod(s string) (uint32, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o7777 {
		return 0, unsupported("--chmod=%s (only an octal mode up to 7777)", s)
	}
	return uint32(m), nil
}

// heredocScript returns the shell command line of a RUN with here-documents,
// as BuildKit forms it: a lone here-document is the script itself; in any
// other form the documents follow the command line for the shell to read.
// A lone here-document starting with "#!" (run as its own interpreter's
// script) is not supported.
func heredocScript(c *instructions.RunCommand) (string, error) {
	args := c.CmdLine
	if len(args) != 1 || !c.PrependShell {
		return "", unsupported("RUN with here-documents in exec form")
	}
	if h := parser.MustParseHeredoc(args[0]); h != nil {
		data := c.Files[0].Data
		if c.Files[0].Chomp {
			data = parser.ChompHeredocContent(data)
		}
		if strings.HasPrefix(data, "#!") {
			return "", unsupported("RUN <<%s with a #! line (a script run by its own interpreter)", c.Files[0].Name)
		}
		return data, nil
	}
	var b strings.Builder
	b.WriteString(args[0])
	for _, f := range c.Files {
		b.WriteByte('\n')
		b.WriteString(f.Data)
		b.WriteString(f.Name)
	}
	return b.String(), nil
}

// platformArgs are the platform build arguments BuildKit defines in the
// global scope: this builder builds for the host's platform only.
func platformArgs() map[string]string {
	p := "linux/" + runtime.GOARCH
	return map[string]string{
		"TARGETPLATFORM": p, "TARGETOS": "linux", "TARGETARCH": runtime.GOARCH, "TARGETVARIANT": "",
		"BUILDPLATFORM": p, "BUILDOS": "linux", "BUILDARCH": runtime.GOARCH, "BUILDVARIANT": "",
	}
}

// envList is an ordered environment (later keys replace earlier ones in
// place), the shell lexer's EnvGetter.
type envList struct {
	keys []string
	vals map[string]string
}

func newEnvList() *envList { return &envList{vals: map[string]string{}} }

func (e *envList) clone() *envList {
	n := &envList{keys: append([]string(nil), e.keys...), vals: make(map[string]string, len(e.vals))}
	for k, v := range e.vals {
		n.vals[k] = v
	}
	return n
}

func (e *envList) set(k, v string) {
	if _, ok := e.vals[k]; !ok {
		e.keys = append(e.keys, k)
	}
	e.vals[k] = v
}

// Get and Keys make an envList a shell.EnvGetter.
func (e *envList) Get(k string) (string, bool) { v, ok := e.vals[k]; return v, ok }

// Keys returns the names in order.
func (e *envList) Keys() []string { return e.keys }

// list returns K=V in order.
func (e *envList) list() []string {
	out := make([]string, 0, len(e.keys))
	for _, k := range e.keys {
		out = append(out, k+"="+e.vals[k])
	}
	return out
}

func envFromList(kvs []string) *envList {
	e := newEnvList()
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		if k != "" {
			e.set(k, v)
		}
	}
	return e
}

var _ shell.EnvGetter = (*envList)(nil)

package task

import (
	"fmt"
	"path"
	"strings"
	"unicode"

	"github.com/bmatcuk/doublestar/v4"
)

// maxArtifacts bounds the artifacts array.
const maxArtifacts = 64

// artifactRefused are where an artifact may not come from: what the
// harness mounts, and the hidden material.
var artifactRefused = []string{"/proc", "/sys", "/dev", "/tests", "/solution", "/proctor"}

// artifacts reads the top-level artifacts array, as Harbor writes it:
// each entry a container path, or a table with source, destination,
// exclude (and service, which only "main", the agent's environment, may
// name).
func artifacts(top table) ([]Artifact, error) {
	v, ok := top.m["artifacts"]
	if !ok {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, top.typeError("artifacts", "an array", v)
	}
	if len(list) > maxArtifacts {
		return nil, top.errorf("artifacts", ErrValue, "%d entries, more than %d", len(list), maxArtifacts)
	}
	var out []Artifact
	dests := map[string]int{}
	for i, e := range list {
		key := fmt.Sprintf("artifacts[%d]", i)
		var a Artifact
		switch x := e.(type) {
		case string:
			a.Source = x
		case map[string]any:
			tb := table{file: top.file, name: key, m: x, elem: true}
			for k := range x {
				switch k {
				case "source", "destination", "exclude", "service":
				default:
					return nil, tb.errorf(quoteKey(k), ErrUnknownValue, "unknown key (want source, destination, exclude or service)")
				}
			}
			src, ok, err := tb.str("source")
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, tb.errorf("source", ErrMissing, "required")
			}
			a.Source = src
			if a.Destination, _, err = tb.str("destination"); err != nil {
				return nil, err
			}
			if a.Exclude, _, err = tb.strings("exclude"); err != nil {
				return nil, err
			}
			for j, g := range a.Exclude {
				if !doublestar.ValidatePattern(g) {
					return nil, tb.errorf(fmt.Sprintf("exclude[%d]", j), ErrValue, "%q is not a valid glob", g)
				}
			}
			if svc, ok, err := tb.str("service"); err != nil {
				return nil, err
			} else if ok && svc != "" && svc != "main" {
				return nil, tb.errorf("service", ErrUnsupported, "%q: only the agent's own environment (\"main\") is collected; Proctor runs no compose services", svc)
			}
		default:
			return nil, top.typeError(key, "a path or a table", e)
		}
		if err := checkArtifactSource(a.Source); err != nil {
			return nil, top.wrap(key, err)
		}
		if a.Destination == "" {
			a.Destination = path.Base(a.Source)
		}
		if err := checkRelative(a.Destination); err != nil {
			return nil, top.wrap(key+".destination", err)
		}
		if j, dup := dests[a.Destination]; dup {
			return nil, top.errorf(key, ErrValue, "destination %q is also artifacts[%d]'s", a.Destination, j)
		}
		dests[a.Destination] = i
		out = append(out, a)
	}
	return out, nil
}

func checkArtifactSource(s string) error {
	switch {
	case s == "":
		return errorf(ErrValue, "empty source")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return errorf(ErrValue, "source %q has control characters", s)
	case !path.IsAbs(s) || path.Clean(s) != s || s == "/":
		return errorf(ErrValue, "source %q is not a clean absolute path below /", s)
	}
	for _, r := range artifactRefused {
		if s == r || strings.HasPrefix(s, r+"/") {
			return errorf(ErrValue, "source %q is under %s, which is not the agent's", s, r)
		}
	}
	return nil
}

// checkRelative checks a path that must stay below a directory.
func checkRelative(s string) error {
	switch {
	case s == "" || s == ".":
		return errorf(ErrValue, "empty destination")
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return errorf(ErrValue, "destination %q has control characters", s)
	case path.IsAbs(s) || path.Clean(s) != s || s == ".." || strings.HasPrefix(s, "../"):
		return errorf(ErrValue, "destination %q is not a clean relative path below the output", s)
	}
	return nil
}

package dataset

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"time"
)

// DefaultRegistry is Harbor's public registry, the one `harbor run -d
// NAME@VERSION` reads.
const DefaultRegistry = "https://raw.githubusercontent.com/laude-institute/harbor/main/registry.json"

// MaxRegistrySize caps what is read of a registry (Harbor's is a few MB).
const MaxRegistrySize = 64 << 20

// Ref names a dataset: NAME@VERSION.
type Ref struct {
	Name, Version string
}

func (r Ref) String() string { return r.Name + "@" + r.Version }

// ParseRef parses NAME@VERSION; the version follows the last "@".
func ParseRef(s string) (Ref, error) {
	i := strings.LastIndexByte(s, '@')
	if i <= 0 || i == len(s)-1 {
		return Ref{}, fmt.Errorf("%q: %w", s, ErrRef)
	}
	r := Ref{Name: s[:i], Version: s[i+1:]}
	if !printable(r.Name) || !printable(r.Version) {
		return Ref{}, fmt.Errorf("%q: %w (printable, no spaces)", s, ErrRef)
	}
	return r, nil
}

// printable: non-empty, no control characters or spaces.
func printable(s string) bool {
	if s == "" || len(s) > 255 {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// Registry is a parsed registry: a plain value.
type Registry struct {
	Source   string // where it was read from
	Datasets []Dataset
}

// Dataset is one NAME@VERSION entry of a registry.
type Dataset struct {
	Name, Version, Description string
	Tasks                      []TaskSpec
	index                      int // its place in the registry, for errors
}

// Ref is the dataset's NAME@VERSION.
func (d *Dataset) Ref() Ref { return Ref{Name: d.Name, Version: d.Version} }

// TaskSpec is where a registry says one task is: Path inside the
// repository GitURL at Commit ("" when the registry names none: the
// repository's default branch, pinned at pull).
type TaskSpec struct {
	Name   string
	GitURL string
	Commit string
	Path   string // slash-separated, relative, clean; "." for the whole repository
}

// registryDataset and registryTask are the JSON form (Harbor's DatasetSpec
// and RegistryTaskId); keys Harbor's models do not name are ignored, as
// pydantic ignores them.
type registryDataset struct {
	Name        *string           `json:"name"`
	Version     *string           `json:"version"`
	Description *string           `json:"description"`
	Tasks       []json.RawMessage `json:"tasks"`
	Metrics     []json.RawMessage `json:"metrics"`
}

type registryTask struct {
	Name      *string `json:"name"`
	GitURL    *string `json:"git_url"`
	GitCommit *string `json:"git_commit_id"`
	Path      *string `json:"path"`
}

var (
	taskName   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+=,-]{0,254}$`)
	commitID   = regexp.MustCompile(`^([0-9a-f]{40}|[0-9a-f]{64})$`)
	urlSchemes = []string{"https", "http", "ssh", "git", "file"}
)

// ParseRegistry parses a registry in Harbor's format; source names it in
// errors. Every dataset is checked, whichever is wanted: a registry with a
// bad entry is a bad registry.
func ParseRegistry(source string, data []byte) (*Registry, error) {
	rerr := func(field string, format string, a ...any) error {
		return &RegistryError{Source: source, Field: field, Err: fmt.Errorf(format, a...)}
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, rerr("", "not a JSON array of datasets: %v", err)
	}
	reg := &Registry{Source: source}
	seen := map[Ref]int{}
	for i, r := range raw {
		at := fmt.Sprintf("[%d]", i)
		var rd registryDataset
		dec := json.NewDecoder(bytes.NewReader(r))
		if err := dec.Decode(&rd); err != nil {
			return nil, rerr(at, "want a dataset object: %v", err)
		}
		d := Dataset{index: i}
		if rd.Name == nil {
			return nil, rerr(at+".name", "missing")
		}
		if rd.Version == nil {
			return nil, rerr(at+".version", "missing")
		}
		d.Name, d.Version = *rd.Name, *rd.Version
		if !printable(d.Name) || strings.Contains(d.Name, "@") {
			return nil, rerr(at+".name", "%q: want printable text without spaces or @", d.Name)
		}
		if !printable(d.Version) {
			return nil, rerr(at+".version", "%q: want printable text without spaces", d.Version)
		}
		if rd.Description != nil {
			d.Description = *rd.Description
		}
		if j, dup := seen[d.Ref()]; dup {
			return nil, rerr(at, "%s is listed twice (also [%d])", d.Ref(), j)
		}
		seen[d.Ref()] = i
		if rd.Tasks == nil {
			return nil, rerr(at+".tasks", "missing")
		}
		names := map[string]int{}
		for k, tr := range rd.Tasks {
			tat := fmt.Sprintf("%s.tasks[%d]", at, k)
			t, field, err := parseTask(tr)
			if err != nil {
				return nil, rerr(tat+field, "%v", err)
			}
			if j, dup := names[t.Name]; dup {
				return nil, rerr(tat+".name", "%q is also tasks[%d]: a dataset's task names must differ", t.Name, j)
			}
			names[t.Name] = k
			d.Tasks = append(d.Tasks, t)
		}
		reg.Datasets = append(reg.Datasets, d)
	}
	return reg, nil
}

// parseTask checks one registry task; field is the part of its JSON path
// at fault.
func parseTask(raw json.RawMessage) (TaskSpec, string, error) {
	var rt registryTask
	if err := json.Unmarshal(raw, &rt); err != nil {
		return TaskSpec{}, "", fmt.Errorf("want a task object: %v", err)
	}
	var t TaskSpec
	if rt.Name == nil {
		return t, ".name", fmt.Errorf("missing")
	}
	t.Name = *rt.Name
	if !taskName.MatchString(t.Name) {
		return t, ".name", fmt.Errorf("%q: want letters, digits and . _ + = , - (it names the task's directory)", t.Name)
	}
	if rt.GitURL == nil || *rt.GitURL == "" {
		return t, ".git_url", fmt.Errorf("missing: only tasks in a git repository can be pinned (a local task path is not supported)")
	}
	t.GitURL = *rt.GitURL
	if err := checkGitURL(t.GitURL); err != nil {
		return t, ".git_url", err
	}
	if rt.GitCommit != nil && *rt.GitCommit != "" {
		t.Commit = strings.ToLower(*rt.GitCommit)
		if !commitID.MatchString(t.Commit) {
			return t, ".git_commit_id", fmt.Errorf("%q: want a full commit id (40 or 64 hex digits)", *rt.GitCommit)
		}
	}
	if rt.Path == nil {
		return t, ".path", fmt.Errorf("missing")
	}
	p, err := cleanTaskPath(*rt.Path)
	if err != nil {
		return t, ".path", err
	}
	t.Path = p
	return t, "", nil
}

// checkGitURL accepts URLs of the transports git may use here; anything
// else (a remote helper's "ext::…", an option "-…", a bare path) is refused.
func checkGitURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || strings.HasPrefix(s, "-") || strings.Contains(s, "::") || strings.ContainsAny(s, "\x00\n\r") {
		return fmt.Errorf("%q: want an https://, http://, ssh://, git:// or file:// URL", s)
	}
	for _, sc := range urlSchemes {
		if u.Scheme == sc && (u.Host != "" || sc == "file") && u.Path != "" {
			return nil
		}
	}
	return fmt.Errorf("%q: want an https://, http://, ssh://, git:// or file:// URL", s)
}

// cleanTaskPath checks a task's path inside its repository: relative, no
// "..", no ".git", no empty or "." part but a lone "."; trailing slashes
// are dropped.
func cleanTaskPath(p string) (string, error) {
	q := strings.TrimRight(p, "/")
	if q == "" || q == "." {
		if p == "" {
			return "", fmt.Errorf("empty")
		}
		return ".", nil
	}
	if strings.HasPrefix(q, "/") || strings.ContainsAny(q, "\x00\\") {
		return "", fmt.Errorf("%q: want a relative path inside the repository", p)
	}
	for _, part := range strings.Split(q, "/") {
		switch {
		case part == "..":
			return "", fmt.Errorf("%q: leaves the repository", p)
		case part == "" || part == ".":
			return "", fmt.Errorf("%q: want a clean path (no empty or . parts)", p)
		case strings.EqualFold(part, ".git"):
			return "", fmt.Errorf("%q: names .git", p)
		}
	}
	return path.Clean(q), nil
}

// Find returns the dataset ref names. An unknown name or version is an
// error that lists what the registry has.
func (r *Registry) Find(ref Ref) (*Dataset, error) {
	var versions []string
	for i := range r.Datasets {
		d := &r.Datasets[i]
		if d.Name != ref.Name {
			continue
		}
		if d.Version == ref.Version {
			return d, nil
		}
		versions = append(versions, d.Version)
	}
	if versions == nil {
		return nil, fmt.Errorf("registry %s: %q: %w", r.Source, ref.Name, ErrUnknownDataset)
	}
	return nil, fmt.Errorf("registry %s: %s has no version %q (it has %s): %w", r.Source, ref.Name, ref.Version, strings.Join(versions, ", "), ErrUnknownVersion)
}

// LoadRegistry reads the registry at location: an http:// or https:// URL
// (fetched with client, nil for a default with a one-minute timeout), a
// file:// URL or a file path.
func LoadRegistry(ctx context.Context, location string, client *http.Client) (*Registry, error) {
	var data []byte
	switch {
	case strings.HasPrefix(location, "https://") || strings.HasPrefix(location, "http://"):
		if client == nil {
			client = &http.Client{Timeout: time.Minute}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, location, nil)
		if err != nil {
			return nil, &RegistryError{Source: location, Err: err}
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, &RegistryError{Source: location, Err: fmt.Errorf("fetching: %w", err)}
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, &RegistryError{Source: location, Err: fmt.Errorf("fetching: HTTP %s", resp.Status)}
		}
		if data, err = readCapped(resp.Body); err != nil {
			return nil, &RegistryError{Source: location, Err: err}
		}
	default:
		p := strings.TrimPrefix(location, "file://")
		f, err := os.Open(p)
		if err != nil {
			return nil, &RegistryError{Source: location, Err: err}
		}
		defer f.Close()
		if data, err = readCapped(f); err != nil {
			return nil, &RegistryError{Source: location, Err: err}
		}
	}
	return ParseRegistry(location, data)
}

func readCapped(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxRegistrySize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxRegistrySize {
		return nil, fmt.Errorf("larger than %d bytes", MaxRegistrySize)
	}
	return data, nil
}

package swebench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
)

// Instance is one SWE-bench instance, with the dataset's field names.
type Instance struct {
	InstanceID       string     `json:"instance_id"`
	ProblemStatement string     `json:"problem_statement"` // the instruction
	Repo             string     `json:"repo"`
	BaseCommit       string     `json:"base_commit"`
	Patch            string     `json:"patch"`      // the gold patch: the oracle
	TestPatch        string     `json:"test_patch"` // applied by the grader
	FailToPass       stringList `json:"FAIL_TO_PASS"`
	PassToPass       stringList `json:"PASS_TO_PASS"`
}

// stringList is a list of test ids, written in the datasets either as a
// JSON array or as a string holding one.
type stringList []string

func (s *stringList) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*s = list
		return nil
	}
	var str string
	if err := json.Unmarshal(b, &str); err != nil {
		return fmt.Errorf("want a list of test ids")
	}
	if err := json.Unmarshal([]byte(str), &list); err != nil {
		return fmt.Errorf("want a list of test ids (a string holding one: %v)", err)
	}
	*s = list
	return nil
}

var (
	idPattern   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$`) })
	repoPattern = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$`)
	})
	commitPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{40}$`) })
)

// maxLine bounds one instance (patches can be large).
const maxLine = 64 << 20

// ReadInstances reads instances, one JSON object a line (blank lines
// skipped); an error names the line and the field.
func ReadInstances(r io.Reader, name string) ([]Instance, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var out []Instance
	seen := map[string]int{}
	for line := 1; ; line++ {
		b, err := readLine(br)
		if err == io.EOF && len(b) == 0 {
			break
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var in Instance
		dec := json.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&in); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		if err := in.check(); err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, line, err)
		}
		if prev, ok := seen[in.InstanceID]; ok {
			return nil, fmt.Errorf("%s:%d: instance_id %q: also on line %d", name, line, in.InstanceID, prev)
		}
		seen[in.InstanceID] = line
		out = append(out, in)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no instances", name)
	}
	return out, nil
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var b []byte
	for {
		chunk, isPrefix, err := br.ReadLine()
		b = append(b, chunk...)
		if len(b) > maxLine {
			return nil, fmt.Errorf("a line longer than %d bytes", maxLine)
		}
		if err != nil {
			return b, err
		}
		if !isPrefix {
			return b, nil
		}
	}
}

func (in *Instance) check() error {
	switch {
	case !idPattern().MatchString(in.InstanceID):
		return fmt.Errorf("instance_id %q: want 1-200 of letters, digits, '.', '_', '-'", in.InstanceID)
	case !repoPattern().MatchString(in.Repo):
		return fmt.Errorf("%s: repo %q: want OWNER/NAME", in.InstanceID, in.Repo)
	case !commitPattern().MatchString(in.BaseCommit):
		return fmt.Errorf("%s: base_commit %q: want 40 lowercase hex digits", in.InstanceID, in.BaseCommit)
	case strings.TrimSpace(in.ProblemStatement) == "":
		return fmt.Errorf("%s: problem_statement: empty", in.InstanceID)
	case strings.TrimSpace(in.TestPatch) == "":
		return fmt.Errorf("%s: test_patch: empty", in.InstanceID)
	case strings.TrimSpace(in.Patch) == "":
		return fmt.Errorf("%s: patch: empty (the gold patch is the oracle)", in.InstanceID)
	case len(in.FailToPass) == 0:
		return fmt.Errorf("%s: FAIL_TO_PASS: empty", in.InstanceID)
	}
	for _, id := range append(append([]string(nil), in.FailToPass...), in.PassToPass...) {
		if strings.TrimSpace(id) == "" || strings.ContainsAny(id, "\x00\n") {
			return fmt.Errorf("%s: a test id is empty or holds a NUL or a newline", in.InstanceID)
		}
	}
	files, err := patchFiles(in.TestPatch)
	if err != nil {
		return fmt.Errorf("%s: test_patch: %v", in.InstanceID, err)
	}
	if _, _, err := runnerOf(files); err != nil {
		return fmt.Errorf("%s: test_patch: %v", in.InstanceID, err)
	}
	return nil
}

// patchFiles lists the files a unified git diff touches (new names), each a
// clean relative path.
func patchFiles(patch string) ([]string, error) {
	var files []string
	seen := map[string]bool{}
	for _, line := range strings.Split(patch, "\n") {
		rest, ok := strings.CutPrefix(line, "+++ ")
		if !ok {
			continue
		}
		rest = strings.TrimSpace(rest)
		if rest == "/dev/null" {
			continue
		}
		p, ok := strings.CutPrefix(rest, "b/")
		if !ok {
			return nil, fmt.Errorf("%q: want a git diff (b/PATH)", line)
		}
		if i := strings.IndexByte(p, '\t'); i >= 0 {
			p = p[:i]
		}
		if p == "" || strings.HasPrefix(p, "/") || strings.Contains("/"+p+"/", "/../") || strings.ContainsAny(p, "\x00\"'\\`$*?[") {
			return nil, fmt.Errorf("%q: not a plain relative path", p)
		}
		if !seen[p] {
			seen[p] = true
			files = append(files, p)
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("touches no file")
	}
	return files, nil
}

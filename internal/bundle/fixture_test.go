package bundle

import (
	"archive/tar"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// testKey is a fixed key derived from a label, for reproducible vectors.
func testKey(label string) ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("proctor bundle test vectors: " + label))
	return ed25519.NewKeyFromSeed(seed[:])
}

var (
	signerKey = testKey("signer")
	otherKey  = testKey("other")
)

// fixedStart is the time of the first event of every fixture.
var fixedStart = time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// fixtureArtifacts are the files beside the fixture bundle.
func fixtureArtifacts() map[string][]byte {
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	body := "package hello\n\nfunc Hello() string { return \"hello\" }\n"
	_ = tw.WriteHeader(&tar.Header{Name: "workspace/hello.go", Mode: 0o644, Size: int64(len(body)),
		ModTime: time.Unix(0, 0).UTC(), Typeflag: tar.TypeReg, Format: tar.FormatPAX})
	_, _ = tw.Write([]byte(body))
	_ = tw.Close()
	return map[string][]byte{
		"agent.log":     []byte("agent: reading /proctor/instruction.md\nagent: editing hello.go\nagent: go test ./...\nok\n"),
		"changeset.tar": tarball.Bytes(),
		"grader.log":    []byte("=== RUN   TestHello\n--- PASS: TestHello (0.00s)\nPASS\n"),
		"verdict.json":  []byte("{\"passed\": true}\n"),
	}
}

// fixtureVerdict is shaped like a trial verdict; pad adds per-test results
// until the verdict is about 2 KB, like a typical one.
func fixtureVerdict(pad bool) map[string]any {
	v := map[string]any{
		"schema":         "proctor.verdict/v1",
		"task":           map[string]any{"name": "hello-world", "digest": "sha256:" + digestOf("task")},
		"agent":          map[string]any{"command": "claude -p \"$(cat /proctor/instruction.md)\""},
		"passed":         true,
		"reward":         1,
		"pass_threshold": 1,
		"status":         "clean",
		"violations":     []any{},
		"grading":        "workspace",
		"changeset":      map[string]any{"digest": "sha256:" + digestOf("changeset"), "files": 1, "bytes": 57},
		"timings_ms":     map[string]any{"prepare": 12, "digest": 40, "total": 5210},
		"artifacts":      []any{"agent.log", "changeset.tar", "grader.log"},
		"phases": map[string]any{
			"agent":  map[string]any{"ran": true, "exit_code": 0, "wall_ms": 4100, "limits_hit": []any{}},
			"grader": map[string]any{"ran": true, "exit_code": 0, "wall_ms": 900, "limits_hit": []any{}},
		},
	}
	if pad {
		var tests []any
		for i := 0; i < 16; i++ {
			tests = append(tests, map[string]any{"id": fmt.Sprintf("tests/test_outputs.py::test_case_%02d", i), "outcome": "passed", "ms": 3 + i})
		}
		v["tests"] = tests
	}
	return v
}

// fixtureEvents appends n events (at least 2) to a timeline, at fixed
// times.
func fixtureEvents(n int) *Timeline {
	var tl Timeline
	at := fixedStart
	tl.Append("trial.start", map[string]any{"task": "hello-world", "note": "café ✓ 😀\n<ok>"}, at)
	for i := 1; i < n-1; i++ {
		at = at.Add(1500 * time.Millisecond)
		switch i % 4 {
		case 1:
			tl.Append("phase.start", map[string]any{"phase": "agent"}, at)
		case 2:
			tl.Append("violation", map[string]any{"kind": "protected_path", "path": fmt.Sprintf("tests/test_%d.py", i)}, at)
		case 3:
			tl.Append("proxy.decision", map[string]any{"host": "pypi.org", "allowed": false}, at)
		default:
			tl.Append("phase.end", map[string]any{"phase": "agent", "exit_code": 0, "wall_ms": 4100}, at)
		}
	}
	tl.Append("trial.end", map[string]any{"status": "clean"}, at.Add(time.Second))
	return &tl
}

func fixtureProvenance() Provenance {
	return Provenance{
		TaskDigest:        "sha256:" + digestOf("task"),
		EnvironmentDigest: "host-sha256:" + digestOf("environment"),
		Agent: Agent{
			Command:  "claude -p \"$(cat /proctor/instruction.md)\"",
			EnvNames: []string{"ANTHROPIC_API_KEY", "HOME", "PATH"},
		},
		Proctor: ProctorBuild{Version: "v0.1.0", Revision: "0123456789abcdef0123456789abcdef01234567", Go: "go1.26.8"},
		Host: Host{
			Kernel:    "6.8.0-45-generic",
			Platform:  "linux/amd64",
			Isolation: []string{"cgroup", "mount-namespace", "network-namespace", "pid-namespace", "seccomp", "user-namespace"},
		},
	}
}

// fixturePayload is a complete payload (unsigned) over the given artifacts.
func fixturePayload(tb testing.TB, events int, pad bool, artifacts map[string][]byte) *Payload {
	tb.Helper()
	p := &Payload{Schema: Schema, Timeline: fixtureEvents(events).Events(), Provenance: fixtureProvenance()}
	if err := p.SetVerdict(fixtureVerdict(pad)); err != nil {
		tb.Fatal(err)
	}
	for name, data := range artifacts {
		sum := sha256.Sum256(data)
		p.Manifest = append(p.Manifest, Artifact{Name: name, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data))})
	}
	sortManifest(p.Manifest)
	return p
}

func sortManifest(m []Artifact) {
	sort.Slice(m, func(i, j int) bool { return m[i].Name < m[j].Name })
}

// writeFiles writes name → content under dir.
func writeFiles(tb testing.TB, dir string, files map[string][]byte) {
	tb.Helper()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// signedFixture returns a signed bundle and a directory with its artifacts.
func signedFixture(tb testing.TB) ([]byte, string) {
	tb.Helper()
	arts := fixtureArtifacts()
	dir := tb.TempDir()
	writeFiles(tb, dir, arts)
	data, err := Sign(fixturePayload(tb, 7, false, arts), signerKey)
	if err != nil {
		tb.Fatal(err)
	}
	return data, dir
}

// tree is a bundle decoded for editing: objects are map[string]any,
// numbers json.Number.
func decodeTree(tb testing.TB, data []byte) map[string]any {
	tb.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		tb.Fatal(err)
	}
	return m
}

// at walks a dotted path ("payload.timeline.2.prev") to the container of
// its last element and returns the container and the last key.
func at(tb testing.TB, tree any, path string) (any, string) {
	tb.Helper()
	parts := strings.Split(path, ".")
	cur := tree
	for _, k := range parts[:len(parts)-1] {
		switch c := cur.(type) {
		case map[string]any:
			cur = c[k]
		case []any:
			var i int
			fmt.Sscan(k, &i)
			cur = c[i]
		default:
			tb.Fatalf("path %s: %s is not a container", path, k)
		}
	}
	return cur, parts[len(parts)-1]
}

func get(tb testing.TB, tree any, path string) any {
	tb.Helper()
	c, k := at(tb, tree, path)
	switch c := c.(type) {
	case map[string]any:
		return c[k]
	case []any:
		var i int
		fmt.Sscan(k, &i)
		return c[i]
	}
	tb.Fatalf("path %s not found", path)
	return nil
}

func set(tb testing.TB, tree any, path string, v any) {
	tb.Helper()
	c, k := at(tb, tree, path)
	switch c := c.(type) {
	case map[string]any:
		c[k] = v
	case []any:
		var i int
		fmt.Sscan(k, &i)
		c[i] = v
	default:
		tb.Fatalf("path %s not found", path)
	}
}

func del(tb testing.TB, tree any, path string) {
	tb.Helper()
	c, k := at(tb, tree, path)
	m, ok := c.(map[string]any)
	if !ok {
		tb.Fatalf("path %s: not in an object", path)
	}
	delete(m, k)
}

// encodeTree returns the JCS form of a tree.
func encodeTree(tb testing.TB, tree any) []byte {
	tb.Helper()
	c, err := canonicalJSON(tree)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// resign signs the tree's payload again with priv, as it stands (without
// Sign's checks), and sets its signature.
func resign(tb testing.TB, tree map[string]any, priv ed25519.PrivateKey) {
	tb.Helper()
	canon := encodeTree(tb, tree["payload"])
	tree["signature"] = encodeSig(ed25519.Sign(priv, message(canon)))
}

func encodeSig(sig []byte) string { return base64.StdEncoding.EncodeToString(sig) }

package trial

import (
	"crypto/ed25519"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/task"
)

// Files beside the verdict that the bundle binds.
const (
	BundleFile      = "bundle.json"
	InstructionFile = "instruction.md"
)

// event records one step of the trial on its timeline, now.
func (r *runner) event(kind string, detail map[string]any) {
	if r.audit != nil {
		r.audit.Append(kind, detail)
	}
}

// seal writes OUT/bundle.json: the verdict, the timeline, the manifest of
// the artifacts beside it and the provenance, signed with key.
func (r *runner) seal(key ed25519.PrivateKey) error {
	if key == nil {
		return fmt.Errorf("no signing key")
	}
	if err := copyFile(r.o.Task.Instruction, filepath.Join(r.o.Out, InstructionFile)); err != nil {
		return fmt.Errorf("keeping the instruction beside the bundle: %w", err)
	}
	if err := r.audit.Close(); err != nil {
		return err
	}
	names := append([]string{InstructionFile}, r.v.Artifacts...)
	manifest, err := bundle.HashArtifacts(r.o.Out, names...)
	if err != nil {
		return fmt.Errorf("hashing the artifacts: %w", err)
	}
	p := &bundle.Payload{
		Schema:     bundle.Schema,
		Timeline:   r.audit.Events(),
		Manifest:   manifest,
		Provenance: r.provenance(),
	}
	if err := p.SetVerdict(r.v); err != nil {
		return fmt.Errorf("putting the verdict in the bundle: %w", err)
	}
	data, err := bundle.Sign(p, key)
	if err != nil {
		return fmt.Errorf("signing the bundle: %w", err)
	}
	tmp := filepath.Join(r.o.Out, "."+BundleFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("writing the bundle: %w", err)
	}
	return os.Rename(tmp, filepath.Join(r.o.Out, BundleFile))
}

// provenance is every input of the trial by digest, and what ran it.
func (r *runner) provenance() bundle.Provenance {
	names := []string{"HOME", "PATH", "PROCTOR_INSTRUCTION"}
	for k := range r.o.Task.Environment.Env {
		names = append(names, k)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var uts unix.Utsname
	kernel := "unknown"
	if unix.Uname(&uts) == nil {
		kernel = unix.ByteSliceToString(uts.Release[:])
	}
	return bundle.Provenance{
		TaskDigest:        r.v.Task.Digest,
		EnvironmentDigest: r.v.Environment.Digest,
		Agent:             bundle.Agent{Command: r.o.Agent, DirDigest: r.v.Agent.DirDigest, EnvNames: names, Layer: r.bundleLayer()},
		Proctor:           bundle.ThisBuild(),
		Host:              bundle.Host{Kernel: kernel, Platform: bundle.ThisPlatform(), Isolation: r.isolation()},
	}
}

// isolation names the isolation in force for this trial's sandboxes.
func (r *runner) isolation() []string {
	iso := []string{
		"namespaces:cgroup,ipc,mount,net,pid,user,uts",
		"seccomp", "no_new_privs", "capabilities:docker-default",
		"root:unprivileged-id-range", "network:none",
		"overlay:idmapped-readonly-lowers", "grader:no-attach",
	}
	if cg := r.v.Phases[PhaseAgent].Cgroup; cg != "" {
		iso = append(iso, "cgroup:"+cg)
	}
	if r.env.rootfs == sandbox.RootfsHost {
		iso = append(iso, "host:unreadable-files-masked")
	}
	switch r.v.Network.Mode {
	case task.NetworkAllowlist:
		iso = append(iso, "network:allowlist-proxy")
		iso = slices.DeleteFunc(iso, func(s string) bool { return s == "network:none" })
	case NetworkOpen:
		iso = append(iso, "network:open-egress-proxy")
		iso = slices.DeleteFunc(iso, func(s string) bool { return s == "network:none" })
	}
	if r.v.Models != nil {
		iso = append(iso, "network:model-gateway")
	}
	if r.v.Audit.Hidden != "off" {
		iso = append(iso, "audit:hidden-paths-"+r.v.Audit.Hidden)
	}
	if r.v.Audit.Network != "off" {
		iso = append(iso, "audit:connect-"+r.v.Audit.Network)
	}
	slices.Sort(iso)
	return slices.Compact(iso)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// detail builds an event's detail from key, value pairs (keys are strings).
func detail(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

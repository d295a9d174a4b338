package trial

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/bundle"
	"github.com/proctor-sandbox/proctor/internal/recipe"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/treearchive"
)

// AgentLayer is an installed agent (internal/agentlayer) the agent phase
// mounts read-only at recipe.LayerPath. It is never part of the changeset
// (the mount is the harness's) and the grader never sees it.
type AgentLayer struct {
	Dir string // the layer's tree on the host
	// Recipe, RecipeDigest and Digest name it in the verdict and the
	// bundle's provenance; Packages are "name@version integrity".
	Recipe, RecipeDigest, Digest string
	Packages                     []string
	// Version is the agent's own (its npm package's), for its
	// trajectory.
	Version string
	// Logs are the directories under /tmp where the agent keeps its own
	// logs and sessions: each is collected after the agent phase into
	// OUT/agent-logs/NAME and the bundle's artifact agent-logs-NAME.tree.
	Logs []string
}

// AgentLayerRef is the verdict's record of the agent's layer.
type AgentLayerRef struct {
	Recipe       string   `json:"recipe"`
	RecipeDigest string   `json:"recipe_digest"`
	Digest       string   `json:"digest"`
	Packages     []string `json:"packages"`
}

// AgentLogsDir is where, under OUT, the agent's own logs are unpacked.
const AgentLogsDir = "agent-logs"

func (l *AgentLayer) check() error {
	if l.Dir == "" || !filepath.IsAbs(l.Dir) {
		return fmt.Errorf("agent layer: %q is not an absolute directory", l.Dir)
	}
	if fi, err := os.Stat(l.Dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("agent layer %s: not a directory", l.Dir)
	}
	if !strings.HasPrefix(l.Digest, "sha256:") || !strings.HasPrefix(l.RecipeDigest, "sha256:") || l.Recipe == "" {
		return fmt.Errorf("agent layer %s: recipe, recipe digest and digest are required", l.Dir)
	}
	for _, d := range l.Logs {
		if path.Clean(d) != d || !strings.HasPrefix(d, "/tmp/") {
			return fmt.Errorf("agent layer %s: log directory %q is not under /tmp", l.Dir, d)
		}
	}
	return nil
}

func (l *AgentLayer) ref() *AgentLayerRef {
	if l == nil {
		return nil
	}
	return &AgentLayerRef{Recipe: l.Recipe, RecipeDigest: l.RecipeDigest, Digest: l.Digest, Packages: append([]string{}, l.Packages...)}
}

// bundleLayer is the provenance's record of the layer.
func (r *runner) bundleLayer() *bundle.AgentLayer {
	l := r.o.AgentLayer
	if l == nil {
		return nil
	}
	return &bundle.AgentLayer{Recipe: l.Recipe, RecipeDigest: l.RecipeDigest, Digest: l.Digest}
}

// layerBind is the agent phase's mount of the layer, if any.
func (r *runner) layerBind() []sandbox.Bind {
	if r.o.AgentLayer == nil {
		return nil
	}
	return []sandbox.Bind{{Src: r.o.AgentLayer.Dir, Dst: recipe.LayerPath}}
}

// collectAgentLogs packs each of the layer's log directories as the agent
// left it in its /tmp (on scratch space s) into the bundle's artifact
// agent-logs-NAME.tree and unpacks it under OUT/agent-logs/NAME for
// reading. The tree is the agent's, so hostile: treearchive follows no
// link and makes nothing but directories, files and links beneath OUT;
// the directory itself is reached with no link on its way (the agent
// could make /tmp/proctor-agent a link to a host directory). A directory
// the agent never made is skipped; a failure is recorded in the timeline,
// never the trial's.
func (r *runner) collectAgentLogs(s *scratch) {
	if r.o.AgentLayer == nil || s == nil {
		return
	}
	seen := map[string]int{}
	for _, d := range r.o.AgentLayer.Logs {
		rel := strings.TrimPrefix(d, "/tmp/")
		switch err := dirBeneath(filepath.Join(s.dir, "tmp"), rel); {
		case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
			// A link the agent made on the way: never followed.
			r.event("agent.logs", detail("directory", d, "error", "a symbolic link on its path"))
			continue
		case err != nil:
			continue
		}
		src := filepath.Join(s.dir, "tmp", rel)
		name := path.Base(d)
		if seen[name]++; seen[name] > 1 {
			name = fmt.Sprintf("%s-%d", name, seen[name])
		}
		if err := r.packAgentLog(src, name); err != nil {
			r.event("agent.logs", detail("directory", d, "error", err.Error()))
			r.say("agent logs %s: %v", d, err)
			continue
		}
		r.event("agent.logs", detail("directory", d, "artifact", "agent-logs-"+name+".tree"))
	}
}

// dirBeneath reports whether rel is a directory beneath root with no
// symbolic link on its way (every component is the agent's to replace):
// nil, or the error of openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS.
// The agent's processes are dead, so what it checks stays so while the
// directory is packed.
func dirBeneath(root, rel string) error {
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(rfd)
	fd, err := unix.Openat2(rfd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// Limits of one log directory of the agent's.
var agentLogLimits = treearchive.Limits{MaxEntries: 100_000, MaxBytes: 1 << 30, MaxDepth: 64, MaxPathLen: 4096}

func (r *runner) packAgentLog(src, name string) error {
	art := "agent-logs-" + name + ".tree"
	f, err := os.OpenFile(filepath.Join(r.o.Out, art), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := treearchive.Pack(src, f, agentLogLimits); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	r.v.Artifacts = append(r.v.Artifacts, art)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	dst := filepath.Join(r.o.Out, AgentLogsDir, name)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	// Directories and regular files only: what the agent left is read,
	// never followed or run.
	if _, err := treearchive.Unpack(bufio.NewReader(f), dst, treearchive.UnpackOptions{Limits: agentLogLimits, FilesOnly: true}); err != nil {
		os.RemoveAll(dst)
		return fmt.Errorf("unpacking into %s (the archive %s is kept): %w", dst, art, err)
	}
	return nil
}

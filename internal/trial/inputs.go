package trial

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/task"
)

// inputs are the digests of a trial's inputs, taken before anything runs:
// the walk that takes them is also the last check of their form (a fifo in
// tests/, a file that cannot be read), so a task that fails it fails
// before its agent phase, never after. Once the agent phase is over, a
// second walk, beside freeze and grading, must find the same (runner.recheck).
type inputs struct {
	task     string // the task directory's Merkle digest
	agentDir string // --agent-dir's, or ""
	env      string // a rootfs directory's (part of the task's), or ""
	// special are the rootfs's fifos, sockets and devices, relative to the
	// rootfs: digested, never opened, and hidden from every sandbox.
	special []string
}

// digestInputs digests the task, its rootfs and the agent directory.
func digestInputs(t *task.Task, agentDir string, cache *task.HashCache) (*inputs, error) {
	d, err := task.DigestTree(t.Dir, t.DigestOptions(cache))
	if err != nil {
		return nil, fmt.Errorf("digesting the task: %w", err)
	}
	in := &inputs{task: d.Digest}
	if rel, ok := t.RootfsRel(); ok {
		in.env = d.Subtrees[rel]
		for _, f := range d.Special {
			in.special = append(in.special, strings.TrimPrefix(f.Path, rel+"/"))
		}
	}
	if agentDir != "" {
		if in.agentDir, err = task.DigestCached(agentDir, cache); err != nil {
			return nil, fmt.Errorf("digesting --agent-dir: %w", err)
		}
	}
	return in, nil
}

// same compares the inputs found after the agent phase with those the
// trial started from.
func (in *inputs) same(again *inputs) error {
	switch {
	case again.task != in.task:
		return fmt.Errorf("the task changed while its trial ran: %s at the start, %s during the agent phase", in.task, again.task)
	case again.agentDir != in.agentDir:
		return fmt.Errorf("--agent-dir changed while the trial ran: %s at the start, %s during the agent phase", in.agentDir, again.agentDir)
	}
	return nil
}

// checkInputs digests the inputs before anything runs and records them.
func (r *runner) checkInputs() error {
	start := time.Now()
	cache, err := task.OpenHashCache(filepath.Join(r.o.CacheDir, "hashes"))
	if err != nil {
		return err
	}
	in, err := digestInputs(r.o.Task, r.o.AgentDir, cache)
	if err != nil {
		return err
	}
	if err := cache.Save(); err != nil {
		return err
	}
	r.inputs, r.hashes = in, cache
	r.v.Task.Digest, r.v.Agent.DirDigest = in.task, in.agentDir
	if in.env != "" {
		r.v.Environment.Digest = in.env
	}
	if r.env.rootfs != sandbox.RootfsHost {
		// A rootfs directory or an image's root: its special files hidden,
		// and the workdir made where it lacks one, as Docker does.
		var workdir []string
		if r.ws == "" {
			if workdir, err = missingWorkdir(r.env.rootfs, r.o.Task.Environment.Workdir); err != nil {
				return fmt.Errorf("%s: [environment].workdir %q: %w", filepath.Join(r.o.Task.Dir, "task.toml"), r.o.Task.Environment.Workdir, err)
			}
		}
		if len(in.special) > 0 || len(workdir) > 0 {
			envDigest := in.env
			if envDigest == "" {
				envDigest = r.v.Environment.Digest // an image's
			}
			if r.env.mask, err = cachedMask(r.o.CacheDir, envDigest, r.env.rootfs, in.special, workdir); err != nil {
				return fmt.Errorf("preparing the environment's harness layer: %w", err)
			}
		}
	}
	r.v.TimingsMS["inputs"] = time.Since(start).Milliseconds()
	return nil
}

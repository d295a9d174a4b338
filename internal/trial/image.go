package trial

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/proctor-sandbox/proctor/internal/image"
	"github.com/proctor-sandbox/proctor/internal/imagebuild"
)

// ImageStoreDir is where, under the cache directory, container images are
// unpacked (proctor image import / pull).
const ImageStoreDir = "images"

// BuildCacheDir is where, under the cache directory, the steps of images
// built from Dockerfiles are kept (proctor image build, and the trials of
// tasks whose environment is an environment/Dockerfile).
const BuildCacheDir = "build"

// BuildOptions are how a trial builds a task's environment from its
// environment/Dockerfile.
type BuildOptions struct {
	// AllowHosts is the build's allow-list: RUN steps and ADD URLs reach
	// these hosts through the build's egress proxy. None: no network.
	AllowHosts []string
	// Resolve replaces the build proxy's DNS (tests).
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
}

// resolveImage finds the task's docker_image in the image store, or
// builds its environment/Dockerfile into it (each step cached by its
// content, so that only the first trial builds): the image's unpacked
// root is the environment's read-only lower layer, its manifest digest
// the environment digest.
func (r *runner) resolveImage(ctx context.Context) error {
	t := r.o.Task
	st, err := image.Open(filepath.Join(r.o.CacheDir, ImageStoreDir))
	if err != nil {
		return err
	}
	if t.Environment.Dockerfile != "" {
		return r.buildImage(ctx, st)
	}
	img, err := st.Resolve(t.Environment.DockerImage)
	if errors.Is(err, image.ErrNotFound) {
		return fmt.Errorf("%s: [environment].docker_image: %q is not in the image store (proctor image pull %s, or proctor image import FILE)",
			filepath.Join(t.Dir, "task.toml"), t.Environment.DockerImage, t.Environment.DockerImage)
	}
	if err != nil {
		return fmt.Errorf("%s: [environment].docker_image: %w", filepath.Join(t.Dir, "task.toml"), err)
	}
	r.image = img
	r.env.rootfs = img.Rootfs
	r.v.Environment.Image = t.Environment.DockerImage
	r.v.Environment.Digest = img.Digest
	return nil
}

// buildImage builds the task's environment/Dockerfile, its directory the
// build context, within [environment].build_timeout_sec.
func (r *runner) buildImage(ctx context.Context, st *image.Store) error {
	t := r.o.Task
	name := t.Environment.Dockerfile
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, name); err == nil && filepath.IsLocal(rel) {
			name = rel
		}
	}
	r.say("building %s", name)
	res, err := imagebuild.Build(ctx, imagebuild.Options{
		Context:    filepath.Dir(t.Environment.Dockerfile),
		Dockerfile: t.Environment.Dockerfile,
		Name:       name,
		AllowHosts: r.o.Build.AllowHosts,
		Resolve:    r.o.Build.Resolve,
		Timeout:    t.Environment.BuildTimeout,
		Store:      st,
		CacheDir:   filepath.Join(r.o.CacheDir, BuildCacheDir),
		Progress:   r.o.Progress,
	})
	if err != nil {
		return fmt.Errorf("building the environment: %w", err)
	}
	img := res.Image
	r.image = img
	r.env.rootfs = img.Rootfs
	rel, _ := filepath.Rel(t.Dir, t.Environment.Dockerfile)
	r.v.Environment.Dockerfile = filepath.ToSlash(rel)
	r.v.Environment.ContextDigest = res.ContextDigest
	r.v.Environment.Digest = img.Digest
	r.say("built %s: %s (%d of %d steps cached, build log %s)", name, img.Digest, res.Cached, res.Steps, res.Log)
	return nil
}

// imageEnv is the image's own environment (ENV), the base of a phase's.
func (r *runner) imageEnv() map[string]string {
	m := map[string]string{}
	if r.image == nil {
		return m
	}
	for _, kv := range r.image.Config.Env {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

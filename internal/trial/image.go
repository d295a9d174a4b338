package trial

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/proctor-sandbox/proctor/internal/image"
)

// ImageStoreDir is where, under the cache directory, container images are
// unpacked (proctor image import / pull).
const ImageStoreDir = "images"

// resolveImage finds the task's docker_image in the image store: its
// unpacked root is the environment's read-only lower layer, its digest the
// environment digest.
func (r *runner) resolveImage() error {
	t := r.o.Task
	st, err := image.Open(filepath.Join(r.o.CacheDir, ImageStoreDir))
	if err != nil {
		return err
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

package task

import (
	"errors"
	"path/filepath"
)

// composeFiles are the files by which a Harbor task declares an
// environment of several containers.
var composeFiles = []string{"environment/docker-compose.yaml", "environment/docker-compose.yml", "environment/compose.yaml", "environment/compose.yml"}

// dockerfile is the file from which a Harbor task's environment is built.
const dockerfile = "environment/Dockerfile"

// builtEnvironment returns the absolute path of the task's
// environment/Dockerfile, the environment Proctor builds when the task
// names no image, or "" when there is none. A compose file is refused,
// naming it: Proctor runs one container, and a task meant for several
// must not silently run in one.
func (l *loader) builtEnvironment() (string, error) {
	for _, f := range composeFiles {
		if _, _, err := l.resolve(f); err == nil {
			return "", &Error{File: filepath.Join(l.dir, filepath.FromSlash(f)), Err: errorf(ErrUnsupported,
				"docker compose environments are not supported: set [environment] docker_image to a prebuilt image (proctor image pull or import), or give the task an environment/Dockerfile and no compose file")}
		}
	}
	res, fi, err := l.resolve(dockerfile)
	if errors.Is(err, ErrMissing) {
		return "", nil
	}
	if err != nil {
		return "", l.pathError(dockerfile, err)
	}
	if !fi.Mode().IsRegular() {
		return "", &Error{File: filepath.Join(l.dir, filepath.FromSlash(dockerfile)), Err: ErrNotRegular}
	}
	return filepath.Join(l.dir, res), nil
}

package imagebuild

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestBuildBasics builds a Dockerfile with every common instruction over a
// base pulled from a registry and checks the image, its config and its
// files.
func TestBuildBasics(t *testing.T) {
	f := newFixture(t)
	base := f.busybox(t)
	df := `ARG BASE=` + base + `
FROM $BASE
ARG GREETING=hello
ENV APP=/app NAME="the app"
WORKDIR $APP
COPY --chown=1000:1000 --chmod=640 hello.txt ./
COPY dir/ /opt/dir/
COPY link.txt /opt/
RUN echo "$GREETING world" > /app/out.txt && rm /etc/group && mkdir -p /tmp/x && echo t > /tmp/x/f
RUN ["/bin/sh", "-c", "echo exec form > /app/exec.txt"]
SHELL ["/bin/sh", "-ec"]
RUN test "$NAME" = "the app"; echo shell > /app/shell.txt
USER app
RUN id -u > /tmp/uid; id -G > /tmp/groups
USER root
LABEL org.example.k="v"
EXPOSE 8080
ENTRYPOINT ["/bin/sh"]
CMD echo hi
HEALTHCHECK CMD true
`
	res := f.mustBuild(t, df, map[string]string{
		"hello.txt": "hi\n", "dir/a": "A", "dir/sub/b": "B", "target.txt": "T", "link.txt": "->target.txt",
	}, Options{Args: map[string]string{"GREETING": "bonjour"}})
	img := res.Image
	if got := read(t, img, "app/out.txt"); got != "bonjour world\n" {
		t.Errorf("out.txt = %q", got)
	}
	if got := read(t, img, "app/exec.txt"); got != "exec form\n" {
		t.Errorf("exec.txt = %q", got)
	}
	read(t, img, "app/shell.txt")
	if got := read(t, img, "opt/dir/sub/b"); got != "B" {
		t.Errorf("dir/sub/b = %q", got)
	}
	if got := read(t, img, "opt/link.txt"); got != "T" {
		t.Errorf("link.txt = %q (a source symlink is followed)", got)
	}
	if fi := stat(t, img, "opt/link.txt"); fi.Mode()&os.ModeSymlink != 0 {
		t.Errorf("link.txt copied as a symlink")
	}
	fi := stat(t, img, "app/hello.txt")
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 1000 || st.Gid != 1000 || fi.Mode().Perm() != 0o640 {
		t.Errorf("hello.txt: %d:%d %v, want 1000:1000 -rw-r-----", st.Uid, st.Gid, fi.Mode())
	}
	if _, err := os.Lstat(img.Rootfs + "/etc/group"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("/etc/group removed by RUN is still in the image: %v", err)
	}
	if got := read(t, img, "tmp/x/f"); got != "t\n" {
		t.Errorf("/tmp written by RUN: %q", got)
	}
	if got := read(t, img, "tmp/uid"); got != "1000\n" {
		t.Errorf("RUN as USER app: uid %q", got)
	}
	if st := stat(t, img, "tmp/uid").Sys().(*syscall.Stat_t); st.Uid != 1000 {
		t.Errorf("a file made by USER app is owned by %d", st.Uid)
	}
	c := img.Config
	if c.WorkingDir != "/app" || c.User != "root" || strings.Join(c.Entrypoint, " ") != "/bin/sh" || strings.Join(c.Cmd, " ") != "/bin/sh -ec echo hi" {
		t.Errorf("config: %+v", c)
	}
	env := strings.Join(c.Env, "\n")
	if !strings.Contains(env, "APP=/app") || !strings.Contains(env, "NAME=the app") || strings.Contains(env, "GREETING") {
		t.Errorf("config env: %v (ARG values are not kept)", c.Env)
	}
	if img.Build == nil || img.Build.Dockerfile != "environment/Dockerfile" || img.Build.ContextDigest != res.ContextDigest || !strings.HasPrefix(res.ContextDigest, "sha256:") {
		t.Errorf("provenance: %+v (context %s)", img.Build, res.ContextDigest)
	}
	if res.Ran != 4 || res.Cached != 0 {
		t.Errorf("ran %d, cached %d", res.Ran, res.Cached)
	}
}

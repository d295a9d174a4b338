package imagebuild

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
)

func owner(t *testing.T, fi os.FileInfo) (uint32, uint32) {
	t.Helper()
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

// COPY and ADD from the context, --chown by number and by name, --chmod,
// --exclude, here-documents, .dockerignore, a multi-stage build with
// --from a stage (by name and by index) and --from an image, WORKDIR made
// as the stage's user; an unused stage is not built.
func TestBuildCopyAddStages(t *testing.T) {
	f := newFixture(t)
	base := f.busybox(t)
	df := `FROM ` + base + ` AS build
WORKDIR /src
COPY --chown=app:staff src/ ./
COPY --chmod=750 run.sh /usr/local/bin/
ADD --chown=1000 notes.txt /notes/
COPY --exclude=*.tmp assets /assets
COPY <<EOF /etc/motd
hello from $HOSTNAME_IS_NOT_SET
EOF
RUN cat main.c > /out.txt && echo built >> /out.txt

FROM ` + base + ` AS unused
RUN exit 1

FROM ` + base + `
USER app
WORKDIR /home/app/work
USER root
COPY --from=build /out.txt /app/
COPY --from=0 /etc/motd /app/motd
COPY --from=` + base + ` /etc/passwd /app/passwd
ADD --unpack=false archive.tar.gz /app/
COPY ignored.txt* /app/
`
	ctx := map[string]string{
		"src/main.c": "int main;\n", "src/sub/util.c": "util\n", "run.sh": "#!/bin/sh\n", "notes.txt": "n",
		"assets/a.png": "png", "assets/b.tmp": "tmp", "assets/deep/c.tmp": "tmp",
		"archive.tar.gz": "\x1f\x8b not really", "ignored.txt": "secret", ".dockerignore": "ignored.txt\n",
	}
	res := f.mustBuild(t, df, ctx, Options{})
	img := res.Image
	if got := read(t, img, "app/out.txt"); got != "int main;\nbuilt\n" {
		t.Errorf("out.txt = %q", got)
	}
	if got := read(t, img, "app/motd"); got != "hello from \n" {
		t.Errorf("motd = %q (a here-document, expanded)", got)
	}
	if !strings.Contains(read(t, img, "app/passwd"), "app:x:1000") {
		t.Errorf("COPY --from an image")
	}
	if _, err := os.Lstat(img.Rootfs + "/app/ignored.txt"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file .dockerignore excludes was copied: %v", err)
	}
	read(t, img, "app/archive.tar.gz")
	if uid, gid := owner(t, stat(t, img, "home/app/work")); uid != 1000 || gid != 1000 {
		t.Errorf("WORKDIR made as USER app: %d:%d", uid, gid)
	}
	if res.Ran != 1 {
		t.Errorf("%d RUN steps ran: the unused stage was built", res.Ran)
	}

	// The build stage, as its own target.
	res = f.mustBuild(t, df, ctx, Options{Target: "build", Tags: []string{"example/build:1"}})
	img = res.Image
	if uid, gid := owner(t, stat(t, img, "src/sub/util.c")); uid != 1000 || gid != 50 {
		t.Errorf("--chown=app:staff: %d:%d", uid, gid)
	}
	if fi := stat(t, img, "usr/local/bin/run.sh"); fi.Mode().Perm() != 0o750 {
		t.Errorf("--chmod=750: %v", fi.Mode())
	}
	if uid, gid := owner(t, stat(t, img, "notes/notes.txt")); uid != 1000 || gid != 1000 {
		t.Errorf("--chown=1000 (gid = uid): %d:%d", uid, gid)
	}
	read(t, img, "assets/a.png")
	read(t, img, "assets/deep/c.tmp") // patterns are .dockerignore's: *.tmp is the top level only
	if _, err := os.Lstat(img.Rootfs + "/assets/b.tmp"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("--exclude=*.tmp copied assets/b.tmp")
	}
	if len(img.Refs) != 1 || img.Refs[0] != "docker.io/example/build:1" || img.Build.Target != "build" {
		t.Errorf("refs %v, build %+v", img.Refs, img.Build)
	}

	// ADD of a local archive would unpack it: refused, naming the line.
	_, err := f.build(t, "FROM "+base+"\nADD archive.tar.gz /app/\n", ctx, Options{})
	if !errors.Is(err, ErrUnsupported) || !strings.HasPrefix(err.Error(), "environment/Dockerfile:2: ") {
		t.Errorf("ADD of a local archive: %v", err)
	}
}

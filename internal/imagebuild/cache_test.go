package imagebuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A second build of an unchanged context runs nothing and gives the same
// image; editing a copied file rebuilds from that COPY on (the RUN before
// it stays cached, the RUN after it runs again); a changed build argument
// reruns the RUN that sees it; --no-cache runs everything.
func TestBuildCache(t *testing.T) {
	f := newFixture(t)
	base := f.busybox(t)
	df := `FROM ` + base + `
ARG V=1
RUN echo first > /first && date +%s%N > /stamp1
COPY app.txt /app/
RUN cat /app/app.txt > /second && date +%s%N > /stamp2
RUN echo "v=$V" > /v
`
	ctx := map[string]string{"app.txt": "one\n"}
	first := f.mustBuild(t, df, ctx, Options{})
	if first.Ran != 3 || first.Cached != 0 {
		t.Fatalf("first build: ran %d, cached %d", first.Ran, first.Cached)
	}
	stamp1 := read(t, first.Image, "stamp1")

	again := f.mustBuild(t, df, ctx, Options{})
	if again.Ran != 0 || again.Cached != again.Steps {
		t.Errorf("second build: ran %d RUN steps, %d of %d cached", again.Ran, again.Cached, again.Steps)
	}
	if again.Image.Digest != first.Image.Digest {
		t.Errorf("the same build gave %s, then %s", first.Image.Digest, again.Image.Digest)
	}

	// An edit to the copied file (the context is rewritten in place).
	edited := f.mustBuild(t, df, map[string]string{"app.txt": "two\n"}, Options{})
	if edited.Ran != 2 || edited.Cached != 1 {
		t.Errorf("after an edit: ran %d, cached %d (want the first RUN cached, COPY and the two RUNs after it rebuilt)", edited.Ran, edited.Cached)
	}
	if read(t, edited.Image, "second") != "two\n" || read(t, edited.Image, "stamp1") != stamp1 {
		t.Errorf("after an edit: second %q, stamp1 changed: %v", read(t, edited.Image, "second"), read(t, edited.Image, "stamp1") != stamp1)
	}
	if edited.Image.Digest == first.Image.Digest {
		t.Errorf("an edited context gave the same image")
	}

	// A touch without a change keeps everything cached.
	ctxDir := filepath.Join(f.dir, "ctx")
	if err := os.Chtimes(filepath.Join(ctxDir, "app.txt"), first.Image.Created, first.Image.Created); err != nil {
		t.Fatal(err)
	}
	touched := f.mustBuild(t, "", nil, Options{Context: ctxDir})
	if touched.Ran != 0 {
		t.Errorf("a touched file reran %d steps", touched.Ran)
	}

	withArg := f.mustBuild(t, "", nil, Options{Context: ctxDir, Args: map[string]string{"V": "2"}})
	if withArg.Ran != 3 || read(t, withArg.Image, "v") != "v=2\n" {
		// ARG V is in the environment of every RUN after it.
		t.Errorf("a build argument: ran %d, /v %q", withArg.Ran, read(t, withArg.Image, "v"))
	}

	nocache := f.mustBuild(t, "", nil, Options{Context: ctxDir, NoCache: true})
	if nocache.Ran != 3 || nocache.Cached != 0 {
		t.Errorf("--no-cache: ran %d, cached %d", nocache.Ran, nocache.Cached)
	}
	log, _ := os.ReadFile(again.Log)
	if strings.Count(string(log), "cached") != again.Steps {
		t.Errorf("the log of a cached build:\n%s", log)
	}
}

package imagebuild

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/proctor-sandbox/proctor/internal/testcorpus"
)

// A Debian base image (an mmdebstrap root made into an image, pulled from
// a registry on loopback) and a RUN step that installs a package with apt
// through the build's egress proxy to the mirror the root's apt sources
// name; without the allow-list the same step has no network and fails,
// naming its line and apt's error.
func TestBuildDebianApt(t *testing.T) {
	f := newFixture(t)
	root := testcorpus.TrixieGit(t)
	archive := testcorpus.DebianImage(t, root, "debian:trixie", "/")
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := f.push(t, "debian:trixie", img)
	hosts := testcorpus.AptHosts(t, root)

	df := `FROM ` + base + `
RUN apt-get update -q && apt-get install -y -q --no-install-recommends hello && rm -rf /var/lib/apt/lists/*
RUN hello > /greeting
`
	_, err = f.build(t, df, nil, Options{})
	if !errors.Is(err, ErrStepFailed) || !strings.HasPrefix(err.Error(), "environment/Dockerfile:2: RUN exited 100: ") ||
		!strings.Contains(err.Error(), "hello") {
		t.Errorf("apt without the network: %v", err)
	}

	res := f.mustBuild(t, df, nil, Options{AllowHosts: hosts})
	if got := read(t, res.Image, "greeting"); got != "Hello, world!\n" {
		t.Errorf("/greeting = %q", got)
	}
	log, _ := os.ReadFile(res.Log)
	if res.ProxyAllowed == 0 || !strings.Contains(string(log), "proxy allow GET "+hosts[0]) && !strings.Contains(string(log), "proxy allow GET "+hosts[len(hosts)-1]) {
		t.Errorf("no proxy decision in the log (%d allowed):\n%s", res.ProxyAllowed, log)
	}
	if _, err := os.Stat(filepath.Join(res.Image.Rootfs, "usr/bin/hello")); err != nil {
		t.Errorf("hello is not in the image: %v", err)
	}
	// The base's files are the image's too (a cloned rootfs), and its
	// digest is that of a manifest over the base's layers and the new ones.
	if _, err := os.Stat(filepath.Join(res.Image.Rootfs, "usr/bin/git")); err != nil {
		t.Errorf("the base's files: %v", err)
	}

	again := f.mustBuild(t, df, nil, Options{AllowHosts: hosts})
	if again.Ran != 0 || again.Image.Digest != res.Image.Digest || again.ProxyAllowed != 0 {
		t.Errorf("the second build: ran %d, %d proxy requests, digest %s then %s", again.Ran, again.ProxyAllowed, res.Image.Digest, again.Image.Digest)
	}
}

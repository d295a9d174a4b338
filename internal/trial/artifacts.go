package trial

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

// ArtifactsDir is where, under OUT, the task's artifacts are collected;
// ArtifactsArchive holds the same, as the bundle's artifact (a tar of the
// directories and regular files collected, in order, without owners or
// times).
const (
	ArtifactsDir     = "artifacts"
	ArtifactsArchive = "artifacts.tar"
)

// Limits of one trial's artifacts.
const (
	maxArtifactBytes   = 1 << 30
	maxArtifactEntries = 100_000
	artifactTimeout    = 2 * time.Minute
)

// CollectedRef is what became of one entry of the task's artifacts array.
type CollectedRef struct {
	Source      string `json:"source"`
	Destination string `json:"destination"` // under OUT/artifacts
	Files       int    `json:"files"`
	Bytes       int64  `json:"bytes"`
	// Skipped counts entries not copied: links, devices, fifos (never
	// made on the host), and what the exclude globs matched.
	Skipped int    `json:"skipped"`
	Error   string `json:"error,omitempty"` // why it was not (wholly) collected
}

// collectArtifacts copies the task's artifacts out of the agent's
// environment as the agent left it, as Harbor collects them after the
// agent phase. tar runs in a sandbox over the agent's layers (its uppers
// as read-only lowers, fresh uppers of its own, so the changeset is not
// touched) and writes one archive to the host, which reads it as hostile
// input: only directories and regular files are made, beneath OUT, none
// through a link, within size and count limits. A failure is recorded
// against its artifact, never the trial's.
func (r *runner) collectArtifacts(ctx context.Context, l *layout, s *scratch) error {
	arts := r.o.Task.Artifacts
	if len(arts) == 0 {
		return nil
	}
	start := time.Now()
	defer func() { r.v.TimingsMS["artifacts"] = time.Since(start).Milliseconds() }()
	refs := make([]CollectedRef, len(arts))
	for i, a := range arts {
		refs[i] = CollectedRef{Source: a.Source, Destination: a.Destination}
	}
	r.v.Collected = refs
	var overlays []sandbox.Overlay
	for i, ly := range l.layers {
		base := filepath.Join(s.dir, fmt.Sprintf("collect%d", i))
		up, work := filepath.Join(base, "upper"), filepath.Join(base, "work")
		for _, d := range []string{base, up, work} {
			if err := os.Mkdir(d, 0o755); err != nil {
				return fmt.Errorf("collecting artifacts: %w", err)
			}
		}
		for _, d := range []string{up, work} {
			if err := os.Chown(d, sandbox.RootID(), sandbox.RootID()); err != nil {
				return fmt.Errorf("collecting artifacts: %w", err)
			}
		}
		lower := []string{ly.upper}
		if ly.mask != "" {
			lower = append(lower, ly.mask)
		}
		overlays = append(overlays, sandbox.Overlay{Dst: ly.dst, Lower: append(lower, ly.lower), Upper: up, Work: work})
	}
	outDir := filepath.Join(r.o.Out, ArtifactsDir)
	if err := os.Mkdir(outDir, 0o755); err != nil {
		return fmt.Errorf("collecting artifacts: %w", err)
	}
	af, err := os.OpenFile(filepath.Join(r.o.Out, ArtifactsArchive), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("collecting artifacts: %w", err)
	}
	defer af.Close()
	tw := tar.NewWriter(af)
	for i, a := range arts {
		ref := &refs[i]
		var errOut bytes.Buffer
		pr, pw := io.Pipe()
		done := make(chan error, 1)
		go func() {
			err := unpackArtifact(pr, tw, outDir, a.Source, a.Destination, a.Exclude, ref)
			pr.CloseWithError(err)
			done <- err
		}()
		res, err := sandbox.Run(ctx, sandbox.Spec{
			Overlays: overlays,
			Masks:    l.masks,
			Workdir:  "/",
			Env:      r.envList(nil),
			// tar stores links as links and never opens a device or a
			// fifo; a path given as a link is stored as the link.
			Args:     []string{"tar", "-C", "/", "-cf", "-", "--", strings.TrimPrefix(a.Source, "/")},
			Limits:   sandbox.Limits{Timeout: artifactTimeout, OutputBytes: maxArtifactBytes + 1<<20, Pids: defaultPids},
			Stdout:   pw,
			Stderr:   &errOut,
			NoAttach: true,
		})
		pw.Close()
		uerr := <-done
		switch {
		case err != nil:
			ref.Error = "collecting: " + err.Error()
		case uerr != nil:
			ref.Error = uerr.Error()
		case res.ExitCode != 0:
			ref.Error = fmt.Sprintf("tar exited %d%s: %s", res.ExitCode, limitNote(res), firstLine(errOut.String()))
		}
		if ref.Error != "" {
			r.say("artifact %s: %s", a.Source, ref.Error)
		}
		r.event("artifact", detail("source", a.Source, "destination", a.Destination, "files", ref.Files, "bytes", ref.Bytes,
			"skipped", ref.Skipped, "error", ref.Error))
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", ArtifactsArchive, err)
	}
	if err := af.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", ArtifactsArchive, err)
	}
	r.v.Artifacts = append(r.v.Artifacts, ArtifactsArchive)
	return nil
}

// unpackArtifact reads the collector's archive of src into outDir/dest,
// and into tw under the same names: directories and regular files only,
// each beneath outDir (no path of the archive's is trusted), the excluded
// left out, the limits kept.
func unpackArtifact(rd io.Reader, tw *tar.Writer, outDir, src, dest string, exclude []string, ref *CollectedRef) error {
	root, err := os.OpenRoot(outDir)
	if err != nil {
		return err
	}
	defer root.Close()
	srcRel := strings.TrimPrefix(src, "/")
	tr := tar.NewReader(rd)
	entries := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if entries == 0 {
				return fmt.Errorf("%s: not in the agent's environment", src)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the collected archive: %w", err)
		}
		if entries++; entries > maxArtifactEntries {
			return fmt.Errorf("more than %d entries: the rest not collected", maxArtifactEntries)
		}
		name := path.Clean(strings.TrimSuffix(h.Name, "/"))
		rel, ok := strings.CutPrefix(name, srcRel)
		if !ok || rel != "" && rel[0] != '/' {
			return fmt.Errorf("the archive names %q, outside %s", h.Name, src)
		}
		rel = strings.TrimPrefix(rel, "/")
		if rel != "" && excluded(rel, exclude) {
			ref.Skipped++
			continue
		}
		target := path.Join(dest, rel)
		if strings.HasPrefix(target, "../") || target == ".." || path.IsAbs(target) {
			return fmt.Errorf("the archive names %q, outside the artifact", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := mkdirAllIn(root, target); err != nil {
				return fmt.Errorf("%s: %w", target, err)
			}
			if err := tw.WriteHeader(&tar.Header{Name: target + "/", Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX}); err != nil {
				return err
			}
		case tar.TypeReg:
			if ref.Bytes+h.Size > maxArtifactBytes {
				return fmt.Errorf("more than %d bytes: the rest not collected", maxArtifactBytes)
			}
			if err := mkdirAllIn(root, path.Dir(target)); err != nil {
				return fmt.Errorf("%s: %w", target, err)
			}
			f, err := root.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o644)
			if err != nil {
				return fmt.Errorf("%s: %w", target, err)
			}
			if err := tw.WriteHeader(&tar.Header{Name: target, Typeflag: tar.TypeReg, Mode: 0o644, Size: h.Size, Format: tar.FormatPAX}); err != nil {
				f.Close()
				return err
			}
			n, err := io.Copy(io.MultiWriter(f, tw), io.LimitReader(tr, h.Size))
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err == nil && n != h.Size {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				return fmt.Errorf("%s: %w", target, err)
			}
			ref.Files++
			ref.Bytes += n
		default:
			ref.Skipped++ // links, devices, fifos: never made on the host
		}
	}
}

// excluded reports whether rel (a path below the artifact's source)
// matches one of the exclude globs, or lies below a directory that does.
func excluded(rel string, globs []string) bool {
	for q := rel; q != "." && q != "/" && q != ""; q = path.Dir(q) {
		for _, g := range globs {
			if ok, _ := doublestar.Match(g, q); ok {
				return true
			}
			if ok, _ := doublestar.Match(g, path.Base(q)); ok {
				return true
			}
		}
	}
	return false
}

// mkdirAllIn makes dir and its parents beneath root (os.Root never leaves
// it, nor follows a link out of it).
func mkdirAllIn(root *os.Root, dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	if err := mkdirAllIn(root, path.Dir(dir)); err != nil {
		return err
	}
	if err := root.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, err := root.Lstat(dir)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	return nil
}

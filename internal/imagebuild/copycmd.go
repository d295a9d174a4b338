package imagebuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/patternmatcher"
	"golang.org/x/sys/unix"
)

// copyCmd is a COPY or an ADD, expanded.
type copyCmd struct {
	name     string // "COPY" or "ADD"
	sd       instructions.SourcesAndDest
	from     string
	chown    string
	chmod    string
	exclude  []string
	checksum string
	unpack   *bool
	add      bool
	line     int
}

// urlSource is an ADD URL: downloaded before the key is made, or, with
// --checksum, only when the step is not cached.
type urlSource struct {
	url  string
	name string
	file string // the download, once fetched
	sum  string // "sha256:…" of the download, or the --checksum
	mt   time.Time
}

// copy is a COPY or ADD step.
func (b *builder) copy(ctx context.Context, s *stageState, c copyCmd) error {
	var mode *uint32
	if c.chmod != "" {
		m, err := parseChmod(c.chmod)
		if err != nil {
			return err
		}
		mode = &m
	}
	var excl *patternmatcher.PatternMatcher
	if len(c.exclude) > 0 {
		var err error
		if excl, err = patternmatcher.New(c.exclude); err != nil {
			return fmt.Errorf("%s --exclude: %w", c.name, err)
		}
	}
	dest := c.sd.DestPath
	destDir := strings.HasSuffix(dest, "/") || dest == "." || strings.HasSuffix(dest, "/.") ||
		len(c.sd.SourcePaths)+len(c.sd.SourceContents) > 1
	if !path.IsAbs(dest) {
		wd := s.cfg.WorkingDir
		if wd == "" {
			wd = "/"
		}
		dest = path.Join(wd, dest)
	}
	dest = path.Clean(dest)

	// The tree the sources come from.
	var t tree = b.bctx
	srcKey := "context"
	if c.from != "" {
		if j, ok := b.stageByName(c.from, s.index); ok {
			from, err := b.stage(ctx, j)
			if err != nil {
				return err
			}
			empty := b.cache.path("empty")
			view, err := mountView(from.lowers(empty), "", "", empty)
			if err != nil {
				return err
			}
			defer closeFD(view)
			t, srcKey = &dirTree{root: view, label: "stage " + c.from}, "stage "+from.key
		} else {
			img, err := b.fromImage(ctx, c.from)
			if err != nil {
				return fmt.Errorf("COPY --from=%s: %w", c.from, err)
			}
			if img == nil {
				return fmt.Errorf("COPY --from=%s: an empty image has nothing to copy", c.from)
			}
			fd, err := unix.Open(img.Rootfs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			defer closeFD(fd)
			t, srcKey = &dirTree{root: fd, label: "image " + c.from}, "image "+img.Digest
		}
	}

	var items []*entry
	var names []string
	var urls []*urlSource
	for _, src := range c.sd.SourcePaths {
		switch {
		case c.add && isGit(src):
			return unsupported("ADD %s (git sources)", src)
		case isURL(src) && !c.add:
			return fmt.Errorf("COPY %s: COPY does not fetch URLs (ADD does)", src)
		case isURL(src):
			if c.from != "" {
				return fmt.Errorf("ADD %s: a URL with --from", src)
			}
			urls = append(urls, &urlSource{url: src, name: urlName(src)})
			continue
		}
		rel, err := cleanSource(src)
		if err != nil {
			return fmt.Errorf("%s %s: %w", c.name, src, err)
		}
		if hasWildcards(rel) {
			destDir = true
			ms, err := glob(t, rel)
			if err != nil {
				return fmt.Errorf("%s %s: %w", c.name, src, err)
			}
			for _, m := range ms {
				e, err := resolve(t, m.rel)
				if err != nil {
					return b.sourceErr(c, src, t, err)
				}
				items, names = append(items, e), append(names, path.Base(m.rel))
			}
			continue
		}
		e, err := resolve(t, rel)
		if err == nil && e == nil {
			err = fmt.Errorf("%q: %w", rel, os.ErrNotExist)
		}
		if err != nil {
			return b.sourceErr(c, src, t, err)
		}
		items, names = append(items, e), append(names, path.Base(rel))
	}
	if len(urls) > 0 && len(c.sd.SourcePaths) > 1 {
		destDir = true
	}
	if c.checksum != "" && (len(urls) != 1 || len(c.sd.SourcePaths) != 1) {
		return errors.New("ADD --checksum: only with a single URL source")
	}

	parts := []string{srcKey}
	for i, e := range items {
		if !e.isDir() && !e.isReg() {
			return unsupported("%s %s: a %s", c.name, e.rel, typeName(e.mode))
		}
		if t == tree(b.bctx) {
			parts = append(parts, names[i], b.bctx.treeDigest(e.rel, true))
		} else {
			parts = append(parts, names[i], e.rel)
		}
		if c.add && e.isReg() && (c.unpack == nil || *c.unpack) {
			if kind, err := sniffArchive(t, e); err != nil {
				return err
			} else if kind != "" {
				return unsupported("ADD %s: a local %s archive, which ADD would unpack (use COPY, or ADD --unpack=false)", e.rel, kind)
			}
		}
	}
	var inline []inlineFile
	for _, sc := range c.sd.SourceContents {
		data := sc.Data
		if sc.Expand {
			var err error
			if data, _, err = b.lex.ProcessWord(data, s.env); err != nil {
				return err
			}
		}
		inline = append(inline, inlineFile{name: path.Base(sc.Path), data: strings.NewReader(data), mode: 0o644})
		parts = append(parts, "inline", sc.Path, data)
	}
	for _, u := range urls {
		if c.checksum != "" {
			if !strings.HasPrefix(c.checksum, "sha256:") || len(c.checksum) != 71 {
				return fmt.Errorf("ADD --checksum=%s: want sha256:<64 hex digits>", c.checksum)
			}
			u.sum = c.checksum
		} else if err := b.download(ctx, u); err != nil {
			return err
		}
		parts = append(parts, "url", u.url, u.name, u.sum)
	}
	defer func() {
		for _, u := range urls {
			if u.file != "" {
				os.Remove(u.file)
			}
		}
	}()

	text := c.name
	if c.from != "" {
		text += " --from=" + c.from
	}
	if c.chown != "" {
		text += " --chown=" + c.chown
	}
	if c.chmod != "" {
		text += " --chmod=" + c.chmod
	}
	for _, x := range c.exclude {
		text += " --exclude=" + x
	}
	text = strings.TrimPrefix(text, c.name+"")
	text = strings.TrimSpace(text + " " + strings.Join(append(append([]string{}, c.sd.SourcePaths...), inlineNames(c.sd.SourceContents)...), " ") + " " + c.sd.DestPath)
	key := keyOf(append([]string{s.key, c.name, text, dest, strconv.FormatBool(destDir), c.chown, c.chmod, strings.Join(c.exclude, "\x00")}, parts...)...)

	return b.fileStep(s, c.name, text, c.line, key, func(root int) error {
		uid, gid, err := chownIDs(root, c.chown)
		if err != nil {
			return err
		}
		for _, u := range urls {
			if u.file == "" {
				if err := b.download(ctx, u); err != nil {
					return err
				}
				if u.sum != c.checksum {
					return fmt.Errorf("ADD %s: the download's digest is %s, --checksum says %s", u.url, u.sum, c.checksum)
				}
			}
			f, err := os.Open(u.file)
			if err != nil {
				return err
			}
			defer f.Close()
			mt := unix.NsecToTimespec(u.mt.UnixNano())
			if u.mt.IsZero() {
				mt = unix.Timespec{}
			}
			inline = append(inline, inlineFile{name: u.name, data: f, mode: 0o600, mtime: mt})
		}
		return copyInto(root, &copySpec{src: t, items: items, names: names, inline: inline, dest: dest, destDir: destDir,
			uid: uid, gid: gid, chmod: mode, exclude: excl, verify: t == tree(b.bctx)})
	})
}

// sourceErr explains a source that cannot be copied.
func (b *builder) sourceErr(c copyCmd, src string, t tree, err error) error {
	if errors.Is(err, os.ErrNotExist) {
		why := "not found in " + t.name()
		if t == tree(b.bctx) {
			if rel, cerr := cleanSource(src); cerr == nil {
				if ign, _ := b.bctx.ignored.MatchesOrParentMatches(rel); ign {
					why += " (excluded by .dockerignore)"
				}
			}
		}
		return fmt.Errorf("%s %s: %s", c.name, src, why)
	}
	return fmt.Errorf("%s %s: %w", c.name, src, err)
}

func inlineNames(scs []instructions.SourceContent) []string {
	var out []string
	for _, sc := range scs {
		out = append(out, "<<"+sc.Path)
	}
	return out
}

// download fetches u into a file of the build cache's tmp and hashes it.
func (b *builder) download(ctx context.Context, u *urlSource) error {
	f, err := os.CreateTemp(b.cache.path("tmp"), "add-*")
	if err != nil {
		return err
	}
	u.file = f.Name()
	defer f.Close()
	b.log("fetching %s", u.url)
	mt, err := b.net.fetch(ctx, u.url, f)
	if err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	u.sum, u.mt = "sha256:"+hex.EncodeToString(h.Sum(nil)), mt
	return nil
}

// chownIDs resolves a --chown value: numbers as they are, names through
// the image's /etc/passwd and /etc/group; a user without a group gets
// the group with the user's number, as Docker documents.
func chownIDs(root int, spec string) (int, int, error) {
	if spec == "" {
		return 0, 0, nil
	}
	us, gs, hasGroup := strings.Cut(spec, ":")
	uid, err := strconv.ParseUint(us, 10, 32)
	if err != nil {
		u, lerr := lookupUser(root, us)
		if lerr != nil {
			return 0, 0, fmt.Errorf("--chown=%s: %w", spec, lerr)
		}
		uid = uint64(u.UID)
	}
	gid := uid
	if hasGroup {
		if gid, err = strconv.ParseUint(gs, 10, 32); err != nil {
			u, lerr := lookupUser(root, "0:"+gs)
			if lerr != nil {
				return 0, 0, fmt.Errorf("--chown=%s: %w", spec, lerr)
			}
			gid = uint64(u.GID)
		}
	}
	if uid >= 1<<16 || gid >= 1<<16 {
		return 0, 0, fmt.Errorf("--chown=%s: ids above 65535 are outside the sandbox's", spec)
	}
	return int(uid), int(gid), nil
}

// sniffArchive reports the kind of archive ADD would unpack e as, or "".
func sniffArchive(t tree, e *entry) (string, error) {
	f, err := t.open(e)
	if err != nil {
		return "", err
	}
	defer f.Close()
	buf := make([]byte, 512)
	n, _ := io.ReadFull(f, buf)
	buf = buf[:n]
	switch {
	case bytes.HasPrefix(buf, []byte{0x1f, 0x8b}):
		return "gzip", nil
	case bytes.HasPrefix(buf, []byte("BZh")):
		return "bzip2", nil
	case bytes.HasPrefix(buf, []byte{0xfd, '7', 'z', 'X', 'Z', 0}):
		return "xz", nil
	case bytes.HasPrefix(buf, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return "zstd", nil
	case n >= 262 && bytes.Equal(buf[257:262], []byte("ustar")):
		return "tar", nil
	}
	return "", nil
}

package trial

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/workspace"
)

// Paths inside the sandboxes that belong to the harness.
const (
	InstructionPath = "/proctor/instruction.md"
	AgentDirPath    = "/agent"
	SolutionPath    = "/solution"
	TestsPath       = "/tests"
	VerifierLogs    = "/logs/verifier"
)

// harnessMounts are mount points the harness provides in every sandbox; a
// layer never reads them (what is there is not the agent's change).
var harnessMounts = []string{"/proc", "/dev", "/sys", "/tmp", "/proctor", AgentDirPath, SolutionPath}

// skeletonDirs are the empty directories of a "host" root: the usual top of
// a Linux tree, writable copy-on-write like everything else.
var skeletonDirs = []struct {
	path string
	mode os.FileMode
}{
	{"root", 0o700}, {"home", 0o755}, {"opt", 0o755}, {"srv", 0o755}, {"mnt", 0o755},
	{"run", 0o755}, {"var", 0o755}, {"var/tmp", 0o1777}, {"var/cache", 0o755}, {"var/lib", 0o755},
	{"var/log", 0o755}, {"proc", 0o555}, {"dev", 0o755}, {"sys", 0o555}, {"tmp", 0o1777},
	{"proctor", 0o755}, {"logs", 0o755},
}

// layer is one copy-on-write overlay of a sandbox and the pristine directory
// under it.
type layer struct {
	dst   string
	lower string
	// mask, when set, is a lower directory of whiteouts above lower: the
	// special files of lower it names do not exist in the sandbox (nor,
	// for the policy, in the pristine environment).
	mask  string
	upper string
	work  string
	hide  []string
}

// layout is the filesystem of one sandbox: overlays, and what to mask.
type layout struct {
	layers []layer
	masks  []string
}

// environment is the read-only root every sandbox of a trial starts from.
type environment struct {
	rootfs string // sandbox.RootfsHost or an absolute directory
	// mask, when set, is a layer of whiteouts over the rootfs directory
	// that hides each of its fifos, sockets and devices from every
	// sandbox, whose /dev is the harness's own (mask.go).
	mask string
}

// buildLayout makes the layers of a sandbox in s: the root (the rootfs
// directory, or for "host" a skeleton with the host's system directories as
// their own layers) and, when wsLower is set, the workspace at workdir.
func buildLayout(s *scratch, env environment, workdir, wsLower string, hostMasks []string) (*layout, error) {
	l := &layout{}
	rootLower := env.rootfs
	if env.rootfs == sandbox.RootfsHost {
		skel := filepath.Join(s.dir, "skeleton")
		subs, err := makeSkeleton(skel, workdir)
		if err != nil {
			return nil, err
		}
		rootLower = skel
		for _, d := range subs {
			l.layers = append(l.layers, layer{dst: d, lower: d})
		}
		l.masks = append(sandbox.HostMaskPaths(), hostMasks...)
	}
	l.layers = append([]layer{{dst: "/", lower: rootLower, mask: env.mask}}, l.layers...)
	if wsLower != "" {
		l.layers = append(l.layers, layer{dst: workdir, lower: wsLower})
	}
	for i := range l.layers {
		ly := &l.layers[i]
		base := filepath.Join(s.dir, fmt.Sprintf("layer%d", i))
		ly.upper, ly.work = filepath.Join(base, "upper"), filepath.Join(base, "work")
		for _, d := range []string{base, ly.upper, ly.work} {
			if err := os.Mkdir(d, 0o755); err != nil {
				return nil, fmt.Errorf("creating layer directories: %w", err)
			}
		}
		for _, d := range []string{ly.upper, ly.work} {
			if err := os.Chown(d, sandbox.RootID(), sandbox.RootID()); err != nil {
				return nil, fmt.Errorf("creating layer directories: %w", err)
			}
		}
		// What lies below this layer's mount points is not its change.
		for _, h := range harnessMounts {
			if under(h, ly.dst) && h != ly.dst {
				ly.hide = append(ly.hide, h)
			}
		}
		for _, o := range l.layers {
			if o.dst != ly.dst && under(o.dst, ly.dst) {
				ly.hide = append(ly.hide, o.dst)
			}
		}
	}
	return l, nil
}

// makeSkeleton builds the root of a "host" environment: the usual empty
// directories, the workdir, and the host's system directories (symlinks are
// copied; directories become mount points, returned as the layers to add).
func makeSkeleton(skel, workdir string) ([]string, error) {
	if err := os.Mkdir(skel, 0o755); err != nil {
		return nil, fmt.Errorf("creating the root skeleton: %w", err)
	}
	for _, d := range skeletonDirs {
		p := filepath.Join(skel, d.path)
		if err := os.Mkdir(p, d.mode); err != nil {
			return nil, fmt.Errorf("creating the root skeleton: %w", err)
		}
		if err := os.Chmod(p, d.mode); err != nil { // past the umask
			return nil, fmt.Errorf("creating the root skeleton: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Join(skel, workdir), 0o755); err != nil {
		return nil, fmt.Errorf("creating the workdir %s: %w", workdir, err)
	}
	var subs []string
	for _, d := range sandbox.HostDirs {
		fi, err := os.Lstat(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("looking at the host's %s: %w", d, err)
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(d)
			if err != nil {
				return nil, err
			}
			if err := os.Symlink(target, filepath.Join(skel, d)); err != nil {
				return nil, fmt.Errorf("creating the root skeleton: %w", err)
			}
		case fi.IsDir():
			if err := os.Mkdir(filepath.Join(skel, d), 0o755); err != nil {
				return nil, fmt.Errorf("creating the root skeleton: %w", err)
			}
			subs = append(subs, d)
		}
	}
	return subs, nil
}

// overlays returns the sandbox overlays of the layout.
func (l *layout) overlays() []sandbox.Overlay {
	var os []sandbox.Overlay
	for _, ly := range l.layers {
		lower := []string{ly.lower}
		if ly.mask != "" {
			lower = []string{ly.mask, ly.lower} // uppermost first
		}
		os = append(os, sandbox.Overlay{Dst: ly.dst, Lower: lower, Upper: ly.upper, Work: ly.work})
	}
	return os
}

// workspaceLayers returns the layers as the changeset code sees them.
func (l *layout) workspaceLayers() []workspace.Layer {
	var ws []workspace.Layer
	for _, ly := range l.layers {
		ws = append(ws, workspace.Layer{Dst: ly.dst, Upper: ly.upper, Hide: ly.hide})
	}
	return ws
}

// layerFor returns the layer a sandbox path belongs to: the one with the
// longest destination above it.
func (l *layout) layerFor(p string) *layer {
	var best *layer
	for i := range l.layers {
		ly := &l.layers[i]
		if under(p, ly.dst) && (best == nil || len(ly.dst) > len(best.dst)) {
			best = ly
		}
	}
	return best
}

// pristineKind is what a path is in the pristine environment.
type pristineKind int

const (
	pristineAbsent pristineKind = iota
	pristineDir
	pristineOther // a file, a symlink (as the last component) or anything else
)

// maxLinkHops bounds symlink resolution in the pristine view, as the
// kernel's own limit does.
const maxLinkHops = 40

// pristine tells what p (a sandbox path from the agent's changeset:
// untrusted) is in the pristine environment, resolving symlinks in its
// directories (not in its last component) across the layers as the sandbox
// would: /bin/sh on a host root is /usr/bin/sh in the /usr layer. Every
// lookup stays inside a layer's lower directory.
func (l *layout) pristine(p string) (pristineKind, error) {
	cur := "/"
	rest := strings.Split(strings.Trim(path.Clean(p), "/"), "/")
	hops := 0
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		if name == "" || name == "." {
			continue
		}
		if name == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, name)
		st, link, err := l.lstatLower(next)
		if err != nil {
			return pristineAbsent, err
		}
		switch {
		case st == pristineAbsent:
			return pristineAbsent, nil
		case len(rest) == 0:
			return st, nil
		case link != "":
			if hops++; hops > maxLinkHops {
				return pristineAbsent, nil
			}
			if path.IsAbs(link) {
				cur = "/"
			}
			rest = append(strings.Split(strings.Trim(link, "/"), "/"), rest...)
		case st == pristineDir:
			cur = next
		default:
			return pristineAbsent, nil // a file in the middle of a path
		}
	}
	return pristineDir, nil // "/"
}

// maxPristineWalk bounds how many pristine entries one check may visit;
// past it the caller must assume the worst.
const maxPristineWalk = 200_000

// errWalkTooLarge means a pristine directory held more than maxPristineWalk
// entries.
var errWalkTooLarge = errors.New("too many entries to check")

// pristineDescendants calls visit with the path of every entry beneath the
// pristine directory p (untrusted, resolved as pristine resolves it), in no
// particular order, without following symlinks, until visit returns true.
func (l *layout) pristineDescendants(p string, visit func(string) bool) error {
	ly := l.layerFor(p)
	if ly == nil {
		return nil
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, ly.dst), "/")
	if rel == "" {
		rel = "."
	}
	root, err := unix.Open(ly.lower, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(root)
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
		return nil
	}
	if err != nil {
		return err
	}
	seen := 0
	var walk func(fd int, dir string) (bool, error)
	walk = func(fd int, dir string) (bool, error) {
		f := os.NewFile(uintptr(fd), dir)
		defer f.Close()
		des, err := f.ReadDir(-1)
		if err != nil {
			return false, err
		}
		for _, de := range des {
			if seen++; seen > maxPristineWalk {
				return false, errWalkTooLarge
			}
			sub := path.Join(dir, de.Name())
			if visit(sub) {
				return true, nil
			}
			if !de.IsDir() {
				continue
			}
			cfd, err := unix.Openat(int(f.Fd()), de.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return false, err
			}
			if stop, err := walk(cfd, sub); stop || err != nil {
				return stop, err
			}
		}
		return false, nil
	}
	_, err = walk(fd, path.Clean(p))
	return err
}

// lstatLower looks at one path in the lower of the layer it belongs to,
// without following a symlink at its end; for a symlink it returns the
// target.
func (l *layout) lstatLower(p string) (pristineKind, string, error) {
	ly := l.layerFor(p)
	if ly == nil {
		return pristineAbsent, "", nil
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(p, ly.dst), "/")
	if rel == "" {
		return pristineDir, "", nil
	}
	dfd, err := unix.Open(ly.lower, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return pristineAbsent, "", err
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat2(dfd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	switch {
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ENOTDIR):
		return pristineAbsent, "", nil
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		// A symlink inside the layer's part of the path: pristine() walks
		// component by component, so this cannot be reached; be strict.
		return pristineAbsent, "", fmt.Errorf("pristine lookup of %q crossed a symlink", p)
	case err != nil:
		return pristineAbsent, "", err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return pristineAbsent, "", err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFCHR, unix.S_IFBLK, unix.S_IFIFO, unix.S_IFSOCK:
		var wh unix.Stat_t
		if ly.mask != "" && unix.Lstat(filepath.Join(ly.mask, filepath.FromSlash(rel)), &wh) == nil &&
			wh.Mode&unix.S_IFMT == unix.S_IFCHR && wh.Rdev == 0 {
			return pristineAbsent, "", nil // whited out by the mask: never in a sandbox
		}
	case unix.S_IFDIR:
		return pristineDir, "", nil
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(fd, "", buf)
		if err != nil {
			return pristineAbsent, "", err
		}
		return pristineOther, string(buf[:n]), nil
	}
	return pristineOther, "", nil
}

// under reports whether p is base or lies below it.
func under(p, base string) bool {
	if base == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == base || strings.HasPrefix(p, base+"/")
}

package trial

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// The mask is the harness's layer over a rootfs directory or an image's
// root: a whiteout for each of its fifos, sockets and devices, and the
// workdir where the environment lacks it (as Docker makes a WORKDIR or -w
// directory that is not there). It lies below the agent's upper layer, so
// nothing in it is ever part of a changeset.

// missingWorkdir returns the components of workdir (absolute, clean) that
// root lacks, from the first missing one down (nil when it is there). A
// component that is a file, or anything but a directory or a symlink
// (followed inside the sandbox, as Docker follows it), is an error: the
// task cannot run there.
func missingWorkdir(root, workdir string) ([]string, error) {
	p := "."
	for _, c := range strings.Split(strings.TrimPrefix(workdir, "/"), "/") {
		p = path.Join(p, c)
		var st unix.Stat_t
		err := unix.Lstat(filepath.Join(root, filepath.FromSlash(p)), &st)
		switch {
		case errors.Is(err, unix.ENOENT):
			return workdirChain(p, workdir), nil
		case err != nil:
			return nil, err
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return nil, nil // followed inside, where it leads
		case st.Mode&unix.S_IFMT != unix.S_IFDIR:
			return nil, fmt.Errorf("/%s is not a directory in the environment", p)
		}
	}
	return nil, nil
}

// workdirChain lists first and its descendants on the way to workdir.
func workdirChain(first, workdir string) []string {
	chain := []string{first}
	rel := strings.TrimPrefix(workdir, "/")
	for p := first; p != rel; {
		next := rel[len(p)+1:]
		if i := strings.IndexByte(next, '/'); i >= 0 {
			next = next[:i]
		}
		p = path.Join(p, next)
		chain = append(chain, p)
	}
	return chain
}

// cachedMask returns the mask of the environment root whose digest is
// envDigest, building it under cacheDir/masks the first time: in a
// temporary directory renamed into place whole, so that concurrent trials
// and crashed builds never see half of one. It lives beside the other lower
// layers (not on a sandbox's scratch tmpfs), where they can be idmapped
// alike. workdir lists the workdir's missing components (missingWorkdir).
func cachedMask(cacheDir, envDigest, root string, special, workdir []string) (string, error) {
	dir := filepath.Join(cacheDir, "masks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	key, err := maskKey(envDigest, root, special, workdir)
	if err != nil {
		return "", err
	}
	final := filepath.Join(dir, key)
	if fi, err := os.Lstat(final); err == nil && fi.IsDir() {
		return final, nil
	}
	tmp, err := os.MkdirTemp(dir, "tmp-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	m := filepath.Join(tmp, "m")
	if err := makeMask(m, root, special, workdir); err != nil {
		return "", err
	}
	if err := os.Rename(m, final); err != nil {
		if errors.Is(err, os.ErrExist) || errors.Is(err, unix.ENOTEMPTY) {
			return final, nil // built by another trial meanwhile
		}
		return "", err
	}
	return final, nil
}

// maskKey names the mask of root: its digest, what the mask holds, and
// the owners, modes and times of the directories it copies from root
// (which the digest does not cover).
func maskKey(envDigest, root string, special, workdir []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "proctor-mask-v2\x00%s\x00%q\x00%q\x00", envDigest, special, workdir)
	for _, p := range copiedDirs(special, workdir) {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(root, filepath.FromSlash(p)), &st); err != nil {
			return "", err
		}
		fmt.Fprintf(h, "d %q %d %d %o %d.%d\x00", p, st.Uid, st.Gid, st.Mode, st.Mtim.Sec, st.Mtim.Nsec)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// copiedDirs are the directories of root a mask holding special and
// workdir copies (their attributes included): the parents of each special
// file and of the workdir's first missing component, and the root ".",
// sorted deepest first.
func copiedDirs(special, workdir []string) []string {
	seen := map[string]bool{".": true}
	dirs := []string{"."}
	add := func(p string) {
		for q := path.Dir(p); !seen[q]; q = path.Dir(q) {
			seen[q] = true
			dirs = append(dirs, q)
		}
	}
	for _, rel := range special {
		add(rel)
	}
	if len(workdir) > 0 {
		add(workdir[0])
	}
	sort.SliceStable(dirs, func(i, j int) bool { return depthOf(dirs[i]) > depthOf(dirs[j]) })
	return dirs
}

func depthOf(p string) int {
	if p == "." {
		return 0
	}
	return strings.Count(p, "/") + 1
}

// makeMask builds at dir a lower layer that hides the special files of the
// directory root named by special (paths relative to root, as the digest
// found them: no symlink on the way), with an overlay whiteout (a 0:0
// character device) for each, and holds the missing components of the
// workdir (root-owned, 0755). The directories on their way are copies of
// root's, with the owner, mode and times they have there, since the
// uppermost layer holding a directory gives the merged directory its
// attributes. Nothing is read from the special files themselves.
func makeMask(dir, root string, special, workdir []string) error {
	for _, rel := range append(slices.Clone(special), workdir...) {
		if rel == "" || path.IsAbs(rel) || path.Clean(rel) != rel || rel == ".." || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("%q: not a path inside the environment", rel)
		}
	}
	copied := copiedDirs(special, workdir)
	// Shallowest first to make them; their attributes are set last.
	for i := len(copied) - 1; i >= 0; i-- {
		if err := os.Mkdir(filepath.Join(dir, filepath.FromSlash(copied[i])), 0o700); err != nil {
			return err
		}
	}
	for _, rel := range special {
		if err := unix.Mknod(filepath.Join(dir, filepath.FromSlash(rel)), unix.S_IFCHR|0o000, 0); err != nil {
			return fmt.Errorf("whiteout for %s: %w", rel, err)
		}
	}
	for _, p := range workdir {
		d := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(d, 0o755); err != nil { // past the umask
			return err
		}
	}
	// Deepest first: making a child moves its directory's times.
	for _, p := range copied {
		if err := copyDirAttrs(filepath.Join(root, filepath.FromSlash(p)), filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			return err
		}
	}
	return nil
}

// copyDirAttrs gives the directory dst the owner, mode and times of the
// directory src, which must be one (not a symlink to one).
func copyDirAttrs(src, dst string) error {
	var st unix.Stat_t
	if err := unix.Lstat(src, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s: not a directory", src)
	}
	if err := unix.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if err := unix.Chmod(dst, st.Mode&0o7777); err != nil { // after chown, which clears set-id bits
		return err
	}
	return unix.UtimesNanoAt(unix.AT_FDCWD, dst, []unix.Timespec{st.Atim, st.Mtim}, unix.AT_SYMLINK_NOFOLLOW)
}

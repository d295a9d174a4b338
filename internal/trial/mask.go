package trial

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// cachedMask returns the mask of the rootfs whose digest is envDigest,
// building it under cacheDir/masks the first time: in a temporary
// directory renamed into place whole, so that concurrent trials and
// crashed builds never see half of one. It lives beside the other lower
// layers (not on a sandbox's scratch tmpfs), where they can be idmapped
// alike.
func cachedMask(cacheDir, envDigest, root string, special []string) (string, error) {
	dir := filepath.Join(cacheDir, "masks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	key, err := maskKey(envDigest, root, special)
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
	if err := makeMask(m, root, special); err != nil {
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

// maskKey names the mask of root: its digest, the special files, and the
// owners, modes and times of the directories the mask copies (which the
// digest does not cover).
func maskKey(envDigest, root string, special []string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "proctor-mask-v1\x00%s\x00", envDigest)
	seen := map[string]bool{}
	for _, rel := range special {
		fmt.Fprintf(h, "f %q\x00", rel)
		for p := path.Dir(rel); ; p = path.Dir(p) {
			if !seen[p] {
				seen[p] = true
				var st unix.Stat_t
				if err := unix.Lstat(filepath.Join(root, filepath.FromSlash(p)), &st); err != nil {
					return "", err
				}
				fmt.Fprintf(h, "d %q %d %d %o %d.%d\x00", p, st.Uid, st.Gid, st.Mode, st.Mtim.Sec, st.Mtim.Nsec)
			}
			if p == "." {
				break
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// makeMask builds at dir a lower layer that hides the special files of the
// directory root named by special (paths relative to root, as the digest
// found them: no symlink on the way): an overlay whiteout (a 0:0 character
// device) for each, under copies of its directories with the owner, mode
// and times they have in root, since the uppermost layer holding a
// directory gives the merged directory its attributes. Nothing is read
// from the special files themselves.
func makeMask(dir, root string, special []string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	made := map[string]bool{".": true}
	for _, rel := range special {
		if rel == "" || path.IsAbs(rel) || path.Clean(rel) != rel || strings.HasPrefix(rel, "../") {
			return fmt.Errorf("special file %q: not a path inside the rootfs", rel)
		}
		parent := path.Dir(rel)
		var chain []string
		for p := parent; !made[p]; p = path.Dir(p) {
			chain = append(chain, p)
		}
		for i := len(chain) - 1; i >= 0; i-- {
			p := chain[i]
			dst := filepath.Join(dir, filepath.FromSlash(p))
			if err := os.Mkdir(dst, 0o700); err != nil {
				return err
			}
			made[p] = true
		}
		if err := unix.Mknod(filepath.Join(dir, filepath.FromSlash(rel)), unix.S_IFCHR|0o000, 0); err != nil {
			return fmt.Errorf("whiteout for %s: %w", rel, err)
		}
	}
	// Attributes last, deepest first: making a child moves its directory's
	// times.
	var dirs []string
	for p := range made {
		if p != "." {
			dirs = append(dirs, p)
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	for _, p := range dirs {
		if err := copyDirAttrs(filepath.Join(root, filepath.FromSlash(p)), filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			return err
		}
	}
	return copyDirAttrs(root, dir)
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

package gitbase

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// srcRepo is the source repository as found on disk. It is read with plain
// file reads only: finding it runs no git command in src, and nothing here
// writes to src.
type srcRepo struct {
	path      string // the working tree (or bare repository) as given, absolute
	gitDir    string // HEAD and per-worktree refs
	commonDir string // refs, packed-refs, config, shallow; equal to gitDir except in linked worktrees
	objects   string // commonDir/objects
	format    string // "sha1" or "sha256"
	hexLen    int    // 40 or 64
	reftable  bool   // refs are in a reftable stack (reftable.go), not files
}

// maxSmallFile bounds what is read from a ref, gitfile, commondir or config
// file: they are small, and a FIFO or a huge file must not hang or bloat us.
const maxSmallFile = 1 << 20

func openSrc(src string) (*srcRepo, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return nil, fmt.Errorf("gitbase: %s: %w", src, err)
	}
	r := &srcRepo{path: abs}
	notRepo := func(cause error) error {
		if cause != nil {
			return fmt.Errorf("gitbase: %s: %w (%v)", abs, ErrNotRepository, cause)
		}
		return fmt.Errorf("gitbase: %s: %w", abs, ErrNotRepository)
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, notRepo(errors.Unwrap(err))
	}
	if !st.IsDir() {
		return nil, notRepo(errors.New("not a directory"))
	}
	dotgit := filepath.Join(abs, ".git")
	st, err = os.Stat(dotgit)
	switch {
	case err == nil && st.IsDir():
		r.gitDir = dotgit
	case err == nil && st.Mode().IsRegular():
		// A linked worktree or a submodule: ".git" is a file naming the git dir.
		b, err := readSmall(dotgit)
		if err != nil {
			return nil, notRepo(err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		dir, ok := strings.CutPrefix(strings.TrimSpace(line), "gitdir:")
		if !ok {
			return nil, notRepo(errors.New(".git is a file without a gitdir line"))
		}
		dir = strings.TrimSpace(dir)
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(abs, dir)
		}
		r.gitDir = filepath.Clean(dir)
	case err == nil:
		return nil, notRepo(errors.New(".git is neither a directory nor a file"))
	case errors.Is(err, fs.ErrNotExist):
		r.gitDir = abs // perhaps a bare repository
	default:
		return nil, notRepo(err)
	}

	r.commonDir = r.gitDir
	if b, err := readSmall(filepath.Join(r.gitDir, "commondir")); err == nil {
		dir := strings.TrimSpace(string(b))
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(r.gitDir, dir)
		}
		r.commonDir = filepath.Clean(dir)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, notRepo(err)
	}
	r.objects = filepath.Join(r.commonDir, "objects")
	if !isFile(filepath.Join(r.gitDir, "HEAD")) || !isDir(r.objects) || !isDir(filepath.Join(r.commonDir, "refs")) {
		return nil, notRepo(nil)
	}

	format, refStorage, err := readExtensions(filepath.Join(r.commonDir, "config"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("gitbase: %s: reading config: %w", abs, err)
	}
	switch format {
	case "", "sha1":
		r.format, r.hexLen = "sha1", 40
	case "sha256":
		r.format, r.hexLen = "sha256", 64
	default:
		return nil, fmt.Errorf("gitbase: %s: %w: object format %q", abs, ErrUnsupported, format)
	}
	switch {
	case refStorage == "reftable":
		r.reftable = true
	case refStorage != "" && refStorage != "files":
		return nil, fmt.Errorf("gitbase: %s: %w: ref storage %q", abs, ErrUnsupported, refStorage)
	case isDir(filepath.Join(r.commonDir, "reftable")):
		return nil, fmt.Errorf("gitbase: %s: %w: a reftable directory, but extensions.refStorage does not say reftable", abs, ErrUnsupported)
	}
	return r, nil
}

// readExtensions returns extensions.objectFormat and extensions.refStorage
// from a git config file. It is a data read of the two keys that decide how
// the repository's files are to be read; no other setting of src is used.
func readExtensions(path string) (objectFormat, refStorage string, err error) {
	b, err := readSmall(path)
	if err != nil {
		return "", "", err
	}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			if end < 0 {
				continue
			}
			name, _, _ := strings.Cut(strings.TrimSpace(line[1:end]), " ")
			section = strings.ToLower(name)
			line = strings.TrimSpace(line[end+1:])
			if line == "" {
				continue
			}
		}
		if section != "extensions" {
			continue
		}
		key, val, _ := strings.Cut(line, "=")
		val, _, _ = strings.Cut(val, "#")
		val, _, _ = strings.Cut(val, ";")
		val = strings.ToLower(strings.Trim(strings.TrimSpace(val), `"`))
		switch strings.ToLower(strings.TrimSpace(key)) {
		case "objectformat":
			objectFormat = val
		case "refstorage":
			refStorage = val
		}
	}
	return objectFormat, refStorage, nil
}

// shallow returns the contents of src's shallow file, or nil when src is a
// complete repository.
func (r *srcRepo) shallow() ([]byte, error) {
	b, err := readSmallLimit(filepath.Join(r.commonDir, "shallow"), 64<<20)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, err
	}
	return b, err
}

// dwimRules are git's rules for completing a short ref name, in git's order
// (refs.c ref_rev_parse_rules): the first that names an existing ref wins.
var dwimRules = []string{"%s", "refs/%s", "refs/tags/%s", "refs/heads/%s", "refs/remotes/%s", "refs/remotes/%s/HEAD"}

// resolveName resolves a short or full ref name as git does, to an object
// id. ok is false when no ref matches, or when a matching ref cannot be read
// here; the caller then asks git, which can only do better or fail.
func (r *srcRepo) resolveName(name string) (oid string, ok bool) {
	if name == "@" {
		name = "HEAD"
	}
	for _, rule := range dwimRules {
		full := strings.Replace(rule, "%s", name, 1)
		if rule == "%s" && !strings.HasPrefix(full, "refs/") && !isRootRefSyntax(full) {
			continue
		}
		if !validRefName(full) {
			continue
		}
		oid, found, err := r.readRef(full)
		if err != nil {
			return "", false
		}
		if found {
			return oid, true
		}
	}
	return "", false
}

// readRef reads one full ref name, following symbolic refs. found is false
// when there is no such ref (or it is a dangling symbolic ref).
func (r *srcRepo) readRef(name string) (oid string, found bool, err error) {
	if r.reftable && name != "FETCH_HEAD" && name != "MERGE_HEAD" {
		// Of the refs, only these pseudorefs stay files in a reftable
		// repository; HEAD's file is a placeholder.
		return r.readReftableRef(name)
	}
	for range 5 { // git's SYMREF_MAXDEPTH
		b, err := readSmall(r.refPath(name))
		switch {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR), isDir(r.refPath(name)):
			if !strings.HasPrefix(name, "refs/") {
				return "", false, nil
			}
			return r.packedRef(name)
		default:
			return "", false, err
		}
		s := string(b)
		if target, ok := strings.CutPrefix(s, "ref:"); ok {
			target = strings.TrimSpace(target)
			if !validRefName(target) || (!strings.HasPrefix(target, "refs/") && !isRootRefSyntax(target)) {
				return "", false, fmt.Errorf("ref %s: bad symbolic ref target %q", name, target)
			}
			name = target
			continue
		}
		// A plain ref, or FETCH_HEAD whose first line starts with an id.
		if len(s) >= r.hexLen && isHex(s[:r.hexLen]) && (len(s) == r.hexLen || isSpace(s[r.hexLen])) {
			return strings.ToLower(s[:r.hexLen]), true, nil
		}
		return "", false, fmt.Errorf("ref %s: malformed", name)
	}
	return "", false, fmt.Errorf("ref %s: symbolic refs nested too deep", name)
}

// refPath is where the loose file of a full ref name lives: root refs and
// per-worktree refs in the worktree's git dir, the rest in the common dir.
func (r *srcRepo) refPath(name string) string {
	dir := r.commonDir
	if !strings.Contains(name, "/") ||
		strings.HasPrefix(name, "refs/bisect/") ||
		strings.HasPrefix(name, "refs/worktree/") ||
		strings.HasPrefix(name, "refs/rewritten/") {
		dir = r.gitDir
	}
	return filepath.Join(dir, filepath.FromSlash(name))
}

// packedRef looks name up in packed-refs, streaming it: a packed-refs file
// of tens of thousands of tags is read once, without holding it in memory.
func (r *srcRepo) packedRef(name string) (oid string, found bool, err error) {
	f, err := os.Open(filepath.Join(r.commonDir, "packed-refs"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<10)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) < r.hexLen+2 || line[r.hexLen] != ' ' {
			continue // header, peeled line or garbage
		}
		if string(line[r.hexLen+1:]) == name {
			id := string(line[:r.hexLen])
			if !isHex(id) {
				return "", false, fmt.Errorf("packed-refs: %s: malformed", name)
			}
			return strings.ToLower(id), true, nil
		}
	}
	return "", false, sc.Err()
}

// validRefName approximates git's check_refname_format with
// REFNAME_ALLOW_ONELEVEL. Names it accepts are also safe to join to a
// directory: no component is empty or starts with a dot, so none is "..".
func validRefName(name string) bool {
	if name == "" || name == "@" || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") ||
		strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.HasPrefix(name, "-") {
		return false
	}
	for _, c := range []byte(name) {
		if c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return false
		}
	}
	for _, comp := range strings.Split(name, "/") {
		if comp == "" || comp[0] == '.' || strings.HasSuffix(comp, ".lock") {
			return false
		}
	}
	return true
}

// isRootRefSyntax reports whether name looks like HEAD, FETCH_HEAD and the
// like: git reads a top-level name from the git dir only if it is all
// capitals and underscores.
func isRootRefSyntax(name string) bool {
	for _, c := range []byte(name) {
		if (c < 'A' || c > 'Z') && c != '_' && c != '-' {
			return false
		}
	}
	return name != ""
}

// splitRev splits a revision into its leading name and the rest: "main~2"
// gives "main" and "~2"; ":/msg" gives "" and ":/msg".
func splitRev(rev string) (name, rest string) {
	i := strings.IndexAny(rev, "~^:")
	if j := strings.Index(rev, "@{"); j >= 0 && (i < 0 || j < i) {
		i = j
	}
	if i < 0 {
		return rev, ""
	}
	return rev[:i], rev[i:]
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') {
			return false
		}
	}
	return s != ""
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func readSmall(path string) ([]byte, error) { return readSmallLimit(path, maxSmallFile) }

// readSmallLimit reads a regular file of at most limit bytes. It refuses
// anything else (a FIFO would block, a device could be endless).
func readSmallLimit(path string, limit int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO must not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: errors.New("not a regular file")}
	}
	if st.Size() > limit {
		return nil, &fs.PathError{Op: "read", Path: path, Err: errors.New("file too large")}
	}
	return io.ReadAll(io.LimitReader(f, limit))
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

package dataset

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// git runs the ordinary git client on the cache's bare repositories.
type git struct {
	env []string // added to the environment (tests set protocol.version this way)
}

// run runs git in dir and returns its standard output; a failure is an
// error holding git's last line of standard error.
func (g *git) run(ctx context.Context, dir string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(),
		"GIT_TERMINAL_PROMPT=0",                      // never wait for a password
		"GIT_ALLOW_PROTOCOL=file:git:http:https:ssh", // no remote helpers (ext::)
		"GIT_NO_REPLACE_OBJECTS=1",
		"LC_ALL=C")
	cmd.Env = append(cmd.Env, g.env...)
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("git %s: %s", args[0], msg)
	}
	return out.Bytes(), nil
}

// repoDir is the bare repository that holds what was fetched from url.
func repoDir(cacheDir, url string) string {
	sum := sha256.Sum256([]byte(url))
	return filepath.Join(cacheDir, "git", hex.EncodeToString(sum[:16]))
}

// ensureRepo makes the bare repository dir if it is not there.
func (g *git) ensureRepo(ctx context.Context, dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "objects")); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	_, err := g.run(ctx, dir, nil, "init", "-q", "--bare")
	return err
}

func (g *git) hasCommit(ctx context.Context, repo, commit string) bool {
	_, err := g.run(ctx, repo, nil, "cat-file", "-e", commit+"^{commit}")
	return err == nil
}

// fetch makes commit present in repo, fetching it from url: by its id,
// one commit deep, and where the server refuses a request for an id it
// does not advertise, every branch and tag. With commit "", it fetches the
// default branch's head and returns its id. A commit fetched gets a ref of
// its own, so that no gc takes it away.
func (g *git) fetch(ctx context.Context, repo, url, commit string) (string, error) {
	if commit != "" && g.hasCommit(ctx, repo, commit) {
		return commit, nil
	}
	if commit == "" {
		if _, err := g.run(ctx, repo, nil, "fetch", "-q", "--depth", "1", "--no-tags", url, "HEAD"); err != nil {
			return "", err
		}
		out, err := g.run(ctx, repo, nil, "rev-parse", "--verify", "FETCH_HEAD^{commit}")
		if err != nil {
			return "", err
		}
		commit = strings.TrimSpace(string(out))
	} else if _, err := g.run(ctx, repo, nil, "fetch", "-q", "--depth", "1", "--no-tags", url, commit); err != nil {
		if _, ferr := g.run(ctx, repo, nil, "fetch", "-q", "--no-tags", url,
			"+refs/heads/*:refs/proctor/heads/*", "+refs/tags/*:refs/proctor/tags/*"); ferr != nil {
			return "", fmt.Errorf("%v; fetching every branch: %v", err, ferr)
		}
		if !g.hasCommit(ctx, repo, commit) {
			return "", fmt.Errorf("commit %s: %w %s", commit, ErrNoCommit, url)
		}
	}
	if _, err := g.run(ctx, repo, nil, "update-ref", "refs/proctor/commits/"+commit, commit); err != nil {
		return "", err
	}
	return commit, nil
}

// entry is one file of a task's tree.
type entry struct {
	mode string // git's: 100644, 100755, 120000
	oid  string
	size int64
	name string // relative to the task, slash-separated
}

// Limits a task's tree must keep.
type limits struct {
	bytes int64
	files int
}

// listTree lists the files under taskPath at commit, checking each name
// and kind and the totals against lim.
func (g *git) listTree(ctx context.Context, repo, commit, taskPath string, lim limits) ([]entry, error) {
	treeish := commit + ":" + taskPath
	if taskPath == "." {
		treeish = commit + "^{tree}"
	}
	kind, err := g.run(ctx, repo, nil, "cat-file", "-t", treeish)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w at commit %s", taskPath, ErrNoCommit, commit)
	}
	if k := strings.TrimSpace(string(kind)); k != "tree" {
		return nil, fmt.Errorf("path %q: a %s at commit %s, not a directory: %w", taskPath, k, commit, ErrUnsafe)
	}
	out, err := g.run(ctx, repo, nil, "ls-tree", "-r", "-z", "-l", treeish)
	if err != nil {
		return nil, err
	}
	var es []entry
	var total int64
	for _, rec := range bytes.Split(out, []byte{0}) {
		if len(rec) == 0 {
			continue
		}
		meta, name, ok := bytes.Cut(rec, []byte{'\t'})
		f := strings.Fields(string(meta))
		if !ok || len(f) != 4 {
			return nil, fmt.Errorf("git ls-tree: unexpected output %q", rec)
		}
		e := entry{mode: f[0], oid: f[2], name: string(name)}
		if err := checkName(e.name); err != nil {
			return nil, err
		}
		switch e.mode {
		case "100644", "100664", "100755", "120000":
		case "160000":
			return nil, fmt.Errorf("%s: a submodule (git commit %s), which is not fetched: %w", e.name, e.oid, ErrUnsafe)
		default:
			return nil, fmt.Errorf("%s: git mode %s: %w", e.name, e.mode, ErrUnsafe)
		}
		if e.size, err = strconv.ParseInt(f[3], 10, 64); err != nil || e.size < 0 {
			return nil, fmt.Errorf("git ls-tree: unexpected size %q", f[3])
		}
		total += e.size
		es = append(es, e)
		if len(es) > lim.files {
			return nil, fmt.Errorf("more than %d files: %w", lim.files, ErrTooLarge)
		}
		if total > lim.bytes {
			return nil, fmt.Errorf("more than %d bytes: %w", lim.bytes, ErrTooLarge)
		}
	}
	return es, nil
}

// checkName refuses a name git would not check out: an empty, ".", ".."
// or ".git" part.
func checkName(name string) error {
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." || strings.EqualFold(part, ".git") || len(part) > 255 {
			return fmt.Errorf("the name %q: %w", name, ErrUnsafe)
		}
	}
	return nil
}

// extract writes es (from repo) under dir, which must be new and empty:
// files with git's modes, then, once every symlink is known to resolve
// inside dir, the symlinks.
func (g *git) extract(ctx context.Context, repo string, es []entry, dir string) error {
	var in bytes.Buffer
	for _, e := range es {
		in.WriteString(e.oid + "\n")
	}
	cmd := exec.CommandContext(ctx, "git", "-C", repo, "cat-file", "--batch")
	cmd.Env = append(os.Environ(), "LC_ALL=C", "GIT_NO_REPLACE_OBJECTS=1")
	cmd.Env = append(cmd.Env, g.env...)
	cmd.Stdin = &in
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	br := bufio.NewReaderSize(stdout, 1<<16)
	links := map[string]string{}
	werr := func() error {
		for _, e := range es {
			hdr, err := br.ReadString('\n')
			if err != nil {
				return fmt.Errorf("git cat-file: %w", err)
			}
			f := strings.Fields(hdr)
			if len(f) != 3 || f[0] != e.oid || f[1] != "blob" || f[2] != strconv.FormatInt(e.size, 10) {
				return fmt.Errorf("git cat-file: unexpected %q for %s", strings.TrimSpace(hdr), e.name)
			}
			body := io.LimitReader(br, e.size)
			if e.mode == "120000" {
				t, err := io.ReadAll(io.LimitReader(body, 4096))
				if err != nil {
					return err
				}
				if int64(len(t)) != e.size {
					return fmt.Errorf("%s: a symlink target of %d bytes: %w", e.name, e.size, ErrUnsafe)
				}
				links[e.name] = string(t)
			} else if err := writeFile(dir, e, body); err != nil {
				return err
			}
			if _, err := br.Discard(1); err != nil { // the newline after each object
				return err
			}
		}
		return nil
	}()
	io.Copy(io.Discard, br)
	if err := cmd.Wait(); err != nil && werr == nil {
		werr = fmt.Errorf("git cat-file: %s", strings.TrimSpace(errb.String()))
	}
	if werr != nil {
		return werr
	}
	for name, target := range links {
		if err := insideLink(links, name, target); err != nil {
			return err
		}
	}
	for name, target := range links {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(target, p); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes one regular file of e under dir.
func writeFile(dir string, e entry, body io.Reader) error {
	p := filepath.Join(dir, filepath.FromSlash(e.name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if e.mode == "100755" {
		mode = 0o755
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	n, err := io.Copy(f, body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != e.size {
		err = fmt.Errorf("%s: %d of %d bytes", e.name, n, e.size)
	}
	if err == nil {
		err = os.Chmod(p, mode) // whatever the umask
	}
	return err
}

// maxLinkHops bounds the symlinks one resolution may follow, as the
// kernel's MAXSYMLINKS does.
const maxLinkHops = 40

// insideLink refuses the symlink name (relative to the task) with target
// unless it resolves inside the task, following the task's other symlinks
// (links) as the kernel would: "s/.." where s is a link to "." leaves the
// task though it looks as if it stays.
func insideLink(links map[string]string, name, target string) error {
	refuse := func(why string) error {
		return fmt.Errorf("%s: a symlink to %q, which %s: %w", name, target, why, ErrUnsafe)
	}
	if strings.HasPrefix(target, "/") {
		return refuse("is absolute")
	}
	if target == "" || strings.IndexByte(target, 0) >= 0 {
		return refuse("is empty or holds a NUL byte")
	}
	var cur []string
	if d := path.Dir(name); d != "." {
		cur = strings.Split(d, "/")
	}
	queue := strings.Split(target, "/")
	hops := 0
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return refuse("leaves the task")
			}
			cur = cur[:len(cur)-1]
			continue
		}
		p := strings.Join(append(append([]string(nil), cur...), c), "/")
		if t, ok := links[p]; ok {
			if hops++; hops > maxLinkHops {
				return refuse("loops through symlinks")
			}
			if strings.HasPrefix(t, "/") {
				return refuse(fmt.Sprintf("goes through %s, a symlink to an absolute path", p))
			}
			queue = append(strings.Split(t, "/"), queue...)
			continue
		}
		cur = append(cur, c)
	}
	return nil
}

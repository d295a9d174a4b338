package agentlayer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/netpolicy"
	"github.com/proctor-sandbox/proctor/internal/recipe"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
	"github.com/proctor-sandbox/proctor/internal/task"
)

// proxyAddr is where the install finds its egress proxy, on the sandbox's
// own loopback.
const proxyAddr = "127.0.0.1:3128"

// Options are an install's settings.
type Options struct {
	CacheDir string
	// Registry is the registry's URL; "" asks the host's npm
	// (npm config get registry), so a mirror set up for npm is used.
	Registry string
	// Timeout bounds the install (default 15 minutes).
	Timeout time.Duration
	// Log receives npm's output and the proxy's decisions; nil discards.
	Log io.Writer
	// Installing, if set, is called once an install is to begin (the
	// cache had no layer for the recipe), for a line of progress.
	Installing func()
}

// Ensure returns r's layer, installing it first when it is not in the
// cache. Concurrent callers for the same recipe wait for one install.
func Ensure(ctx context.Context, r *recipe.Recipe, o Options) (*Layer, error) {
	if l, err := Lookup(o.CacheDir, r); l != nil || err != nil {
		return l, err
	}
	dir := Dir(o.CacheDir, r)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return nil, fmt.Errorf("locking %s: %w", dir+".lock", err)
	}
	if l, err := Lookup(o.CacheDir, r); l != nil || err != nil {
		return l, err // installed while we waited
	}
	if o.Installing != nil {
		o.Installing()
	}
	return install(ctx, r, o, dir)
}

func install(ctx context.Context, r *recipe.Recipe, o Options, dir string) (*Layer, error) {
	if err := r.Usable(); err != nil {
		return nil, err
	}
	npm, err := exec.LookPath("npm")
	if err != nil || !underHostDirs(npm) {
		return nil, fmt.Errorf("%w: agent layers are installed with the host's npm under /usr (hint: apt-get install npm)", ErrNoNPM)
	}
	reg, err := registry(ctx, o.Registry)
	if err != nil {
		return nil, err
	}
	// npm's stdout and stderr and the proxy's decisions are written from
	// goroutines of their own: one lock for the log and the tail.
	var tail bytes.Buffer
	out := o.Log
	if out == nil {
		out = io.Discard
	}
	var logMu sync.Mutex
	logw := &lockedWriter{mu: &logMu, w: out}
	both := &lockedWriter{mu: &logMu, w: io.MultiWriter(out, &tail)}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".install-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	layer, cache := filepath.Join(tmp, "layer"), filepath.Join(tmp, "npm-cache")
	for _, d := range []string{layer, cache} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
		if err := os.Chown(d, sandbox.RootID(), sandbox.RootID()); err != nil {
			return nil, err
		}
	}

	port := reg.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[reg.Scheme]
	}
	list, err := netpolicy.ParseAllowList([]string{reg.Hostname() + ":" + port})
	if err != nil {
		return nil, fmt.Errorf("the registry %s: %w", reg.Redacted(), err)
	}
	var mu sync.Mutex
	var denied []string
	proxy, err := netpolicy.New(netpolicy.Options{Allow: list, Record: func(d netpolicy.Decision) {
		verdict := "allow"
		if !d.Allowed {
			verdict = "deny"
			mu.Lock()
			denied = append(denied, fmt.Sprintf("%s:%d (%s)", d.Host, d.Port, d.Reason))
			mu.Unlock()
		}
		fmt.Fprintf(logw, "proxy %s %s %s:%d reason=%q up=%d down=%d\n", verdict, d.Method, d.Host, d.Port, d.Reason, d.BytesUp, d.BytesDown)
	}})
	if err != nil {
		return nil, fmt.Errorf("starting the install's egress proxy: %w", err)
	}
	defer proxy.Close()
	var ls []net.Listener
	proxyURL := "http://" + proxyAddr
	timeout := o.Timeout
	if timeout == 0 {
		timeout = 15 * time.Minute
	}
	args := append([]string{npm, "install",
		"--prefix", "/layer", "--cache", "/npm-cache",
		"--registry", reg.String(),
		"--ignore-scripts", "--no-audit", "--no-fund", "--no-update-notifier",
		"--save-exact", "--no-progress", "--loglevel", "warn",
	}, r.Specs()...)
	env := []string{"HOME=/tmp", "npm_config_userconfig=/dev/null", "npm_config_update_notifier=false",
		"npm_config_fetch_retries=2",
		"HTTPS_PROXY=" + proxyURL, "https_proxy=" + proxyURL, "HTTP_PROXY=" + proxyURL, "http_proxy=" + proxyURL,
		"NO_PROXY=", "no_proxy="}
	if ca := hostCAFile(ctx); ca != "" {
		// npm's cafile is not applied to connections through a proxy;
		// Node's own extra roots are.
		env = append(env, "NODE_EXTRA_CA_CERTS="+ca)
	}
	spec := sandbox.Spec{
		Rootfs: sandbox.RootfsHost,
		Binds: []sandbox.Bind{
			{Src: layer, Dst: "/layer", Writable: true},
			{Src: cache, Dst: "/npm-cache", Writable: true},
		},
		Workdir:  "/layer",
		Hostname: "proctor-agent-install",
		Env:      env,
		Args:     args,
		Limits:   sandbox.Limits{Pids: 4096, Timeout: timeout, OutputBytes: 16 << 20},
		Stdout:   both,
		Stderr:   both,
		Listen:   []string{proxyAddr},
		Serve: func(l []net.Listener) {
			mu.Lock()
			ls = append(ls, l...)
			mu.Unlock()
			for _, x := range l {
				go func() { _ = proxy.Serve(x) }()
			}
		},
	}
	res, err := sandbox.Run(ctx, spec)
	mu.Lock()
	for _, l := range ls {
		l.Close()
	}
	mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("installing %s: %w", strings.Join(r.Specs(), " "), err)
	}
	if res.ExitCode != 0 || res.TimedOut {
		logMu.Lock()
		msg := lastLine(tail.Bytes())
		logMu.Unlock()
		mu.Lock()
		if len(denied) > 0 {
			msg += "; the proxy refused " + strings.Join(denied, ", ")
		}
		mu.Unlock()
		return nil, fmt.Errorf("installing %s: npm exited %d (limit %q): %s", strings.Join(r.Specs(), " "), res.ExitCode, res.Limit, msg)
	}
	lock, err := os.ReadFile(filepath.Join(layer, "package-lock.json"))
	if err != nil {
		return nil, fmt.Errorf("installing %s: %w", r.Name, err)
	}
	pkgs, err := packagesOf(lock, r, func(p string) bool {
		fi, err := os.Lstat(filepath.Join(layer, filepath.FromSlash(p)))
		return err == nil && fi.IsDir()
	})
	if err != nil {
		return nil, err
	}
	fi, err := os.Lstat(filepath.Join(layer, r.Package.Bin))
	if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("%w: %s: the recipe's executable %s is not an executable file in the installed package", ErrLayer, r.Name, r.Package.Bin)
	}
	if err := readOnly(layer); err != nil {
		return nil, err
	}
	digest, err := task.Digest(layer)
	if err != nil {
		return nil, fmt.Errorf("digesting the layer: %w", err)
	}
	l := &Layer{Schema: Schema, Recipe: r.Name, Package: r.Package.NPM, Version: r.Package.Version, RecipeDigest: r.Digest(), Digest: digest, Registry: reg.Redacted(),
		Packages: pkgs, Logs: r.Logs, ReplayIgnore: r.ReplayIgnore, Installed: time.Now().UTC().Format(time.RFC3339), Spec: r}
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(tmp, "layer.json"), append(data, '\n'), 0o444); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(cache); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(dir); err != nil { // a layer the lookup refused
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, err
	}
	l.Dir = filepath.Join(dir, "layer")
	return l, nil
}

// registry is the URL to install from: the caller's, else the host npm's.
func registry(ctx context.Context, given string) (*url.URL, error) {
	raw := given
	if raw == "" {
		out, err := exec.CommandContext(ctx, "npm", "config", "get", "registry").Output()
		if err != nil {
			return nil, fmt.Errorf("asking the host's npm for its registry: %w", err)
		}
		raw = strings.TrimSpace(string(out))
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("the npm registry %q: want an http or https URL without credentials", raw)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// hostCAFile is the extra roots the host's Node and npm trust
// (NODE_EXTRA_CA_CERTS, else npm's cafile), when the file lies where the
// install's sandbox sees it; else "".
func hostCAFile(ctx context.Context) string {
	ca := os.Getenv("NODE_EXTRA_CA_CERTS")
	if ca == "" {
		out, err := exec.CommandContext(ctx, "npm", "config", "get", "cafile").Output()
		if err == nil {
			ca = strings.TrimSpace(string(out))
		}
	}
	if ca == "" || ca == "null" || ca == "undefined" || !filepath.IsAbs(ca) || !underHostDirs(ca) {
		return ""
	}
	return ca
}

// readOnly takes write permission from everything in dir (the sandbox
// mounts it read-only as well; this keeps the host's own tools honest).
func readOnly(dir string) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&os.ModeSymlink != 0 {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		return os.Chmod(p, fi.Mode().Perm()&^0o222)
	})
}

func underHostDirs(p string) bool {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	for _, d := range sandbox.HostDirs {
		if strings.HasPrefix(real, d+"/") {
			return true
		}
	}
	return false
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	s := strings.TrimSpace(lines[len(lines)-1])
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		return "no output"
	}
	return s
}

// Remove deletes r's installed layer, if any.
func Remove(cacheDir string, r *recipe.Recipe) error {
	dir := Dir(cacheDir, r)
	if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755)
		}
		return nil
	}); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.RemoveAll(dir)
}

// lockedWriter serialises writes to w under mu (shared by writers of the
// same underlying writers).
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

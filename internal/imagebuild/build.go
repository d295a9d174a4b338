package imagebuild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/proctor-sandbox/proctor/internal/image"
)

// Options configure one build. Context, Store and CacheDir are required.
type Options struct {
	Context    string            // the build context directory
	Dockerfile string            // the Dockerfile; default Context/Dockerfile
	Name       string            // how messages name the Dockerfile; default its path
	Tags       []string          // names for the image in the store
	Args       map[string]string // build arguments (--build-arg)
	Target     string            // the stage to build; default the last
	// AllowHosts are netpolicy rules: RUN steps and ADD URLs reach these
	// hosts through the build's egress proxy. Empty: no network at all.
	AllowHosts []string
	Pull       bool          // pull a FROM image named by tag even when the store has it
	NoCache    bool          // build every step again (the results still replace the cache's)
	Timeout    time.Duration // the whole build; 0 for none
	// MemoryBytes limits each RUN step (0: none); AllowDegraded lets a
	// step run on a host that cannot enforce it.
	MemoryBytes   int64
	AllowDegraded bool
	Store         *image.Store
	CacheDir      string    // the build cache
	LogFile       string    // the build log; default CacheDir/logs/<time>-<n>.log
	Progress      io.Writer // one line per step; nil for none
	// Resolve replaces the proxy's DNS (tests); Remote is added to every
	// pull of a FROM image.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	Remote  []remote.Option
}

// Result is a finished build.
type Result struct {
	Image            *image.Image
	ContextDigest    string
	DockerfileDigest string
	Log              string // the build log
	Steps            int    // instructions that make layers or run (RUN, COPY, ADD, WORKDIR)
	Cached           int    // of them, answered from the cache
	Ran              int    // RUN steps run
	ProxyAllowed     int
	ProxyDenied      int
}

// Build builds the Dockerfile in o.Context and stores the image in
// o.Store. Every error that is about the Dockerfile is a *LineError
// naming its line.
func Build(ctx context.Context, o Options) (*Result, error) {
	if o.Context == "" || o.Store == nil || o.CacheDir == "" {
		return nil, errors.New("imagebuild: Context, Store and CacheDir are required")
	}
	if o.Dockerfile == "" {
		o.Dockerfile = filepath.Join(o.Context, "Dockerfile")
	}
	if o.Name == "" {
		o.Name = o.Dockerfile
	}
	raw, err := readDockerfile(o.Dockerfile)
	if err != nil {
		return nil, &LineError{File: o.Name, Err: err}
	}
	df, err := Parse(o.Name, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c, err := openCache(o.CacheDir)
	if err != nil {
		return nil, err
	}
	b := &builder{o: o, df: df, cache: c, lex: shell.NewLex(df.Escape), froms: map[string]*image.Image{}}
	sum := sha256.Sum256(raw)
	b.res.DockerfileDigest = "sha256:" + hex.EncodeToString(sum[:])
	b.runCtx = ctx
	if o.Timeout > 0 {
		b.deadline = time.Now().Add(o.Timeout)
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, b.deadline)
		defer cancel()
	}
	if err := b.openLog(); err != nil {
		return nil, err
	}
	defer b.logf.Close()
	b.res.Log = b.logf.Name()
	b.log("build %s (context %s)", o.Name, o.Context)
	if b.net, err = newBuildNet(o.AllowHosts, o.Resolve, b.log); err != nil {
		return nil, err
	}
	defer b.net.close()
	if len(o.AllowHosts) > 0 {
		b.log("network: through the egress proxy, allow-list %s", strings.Join(o.AllowHosts, ", "))
	} else {
		b.log("network: none")
	}
	if b.bctx, err = openContext(o.Context, o.Dockerfile); err != nil {
		return nil, err
	}
	defer b.bctx.close()
	b.res.ContextDigest = b.bctx.digest
	b.log("context digest %s", b.bctx.digest)

	img, err := b.build(ctx)
	b.net.mu.Lock()
	b.res.ProxyAllowed, b.res.ProxyDenied = b.net.allowed, b.net.denied
	b.net.mu.Unlock()
	if err != nil {
		if !b.deadline.IsZero() && !time.Now().Before(b.deadline) {
			err = fmt.Errorf("%w (the build's timeout of %s)", err, o.Timeout)
		}
		b.log("error: %v", err)
		return &b.res, err
	}
	b.res.Image = img
	b.log("built %s", img.Digest)
	return &b.res, nil
}

func readDockerfile(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, MaxDockerfileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxDockerfileSize {
		return nil, fmt.Errorf("larger than %d bytes", MaxDockerfileSize)
	}
	return b, nil
}

// builder is one build. It is used by one goroutine.
type builder struct {
	o        Options
	df       *Dockerfile
	bctx     *buildContext
	cache    *cache
	net      *buildNet
	lex      *shell.Lex
	logf     *os.File
	logw     io.Writer
	deadline time.Time
	runCtx   context.Context // the caller's: a RUN step ends at the deadline by its own timeout
	global   *envList
	stages   []*stageState
	froms    map[string]*image.Image // FROM and --from images already resolved
	res      Result
	n        int // steps so far, for the log
}

func (b *builder) openLog() error {
	p := b.o.LogFile
	if p == "" {
		dir := b.cache.path("logs")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		f, err := os.CreateTemp(dir, time.Now().UTC().Format("20060102T150405Z")+"-*.log")
		if err != nil {
			return fmt.Errorf("creating the build log: %w", err)
		}
		b.logf = f
	} else {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
		if err != nil {
			return fmt.Errorf("creating the build log: %w", err)
		}
		b.logf = f
	}
	b.logw = b.logf
	return nil
}

// log writes a line of the build's own to the log.
func (b *builder) log(format string, args ...any) {
	fmt.Fprintf(b.logw, "proctor: "+format+"\n", args...)
}

func (b *builder) progress(format string, args ...any) {
	if b.o.Progress != nil {
		fmt.Fprintf(b.o.Progress, format+"\n", args...)
	}
}

// build resolves the global arguments and builds the target stage.
func (b *builder) build(ctx context.Context) (*image.Image, error) {
	b.global = newEnvList()
	for k, v := range platformArgs() {
		b.global.set(k, v)
	}
	for _, a := range b.df.MetaArgs {
		for _, kv := range a.Args {
			if v, ok := b.o.Args[kv.Key]; ok {
				b.global.set(kv.Key, v)
				continue
			}
			if kv.Value != nil {
				v, _, err := b.lex.ProcessWord(*kv.Value, b.global)
				if err != nil {
					return nil, &LineError{File: b.df.Name, Line: line(&a), Err: err}
				}
				b.global.set(kv.Key, v)
			}
		}
	}
	for i, st := range b.df.Stages {
		b.stages = append(b.stages, &stageState{st: st, index: i})
	}
	target := len(b.stages) - 1
	if b.o.Target != "" {
		target = -1
		for i, s := range b.stages {
			if strings.EqualFold(s.st.Name, b.o.Target) {
				target = i
			}
		}
		if target < 0 {
			return nil, &LineError{File: b.df.Name, Err: fmt.Errorf("no stage named %q (--target)", b.o.Target)}
		}
	}
	s, err := b.stage(ctx, target)
	if err != nil {
		return nil, err
	}
	img, err := b.compose(s)
	if err != nil {
		return nil, fmt.Errorf("composing the image: %w", err)
	}
	info := &image.BuildInfo{Dockerfile: b.o.Name, ContextDigest: b.bctx.digest, DockerfileDigest: b.res.DockerfileDigest}
	if b.o.Target != "" {
		info.Target = b.o.Target
	}
	stored, err := b.o.Store.Add(img, b.o.Tags, s.base, info)
	if err != nil {
		return nil, fmt.Errorf("storing the built image: %w", err)
	}
	return stored, nil
}

// stageByName finds an earlier stage by name or index, as FROM and
// COPY --from name them.
func (b *builder) stageByName(name string, before int) (int, bool) {
	for i := range before {
		if b.stages[i].st.Name != "" && strings.EqualFold(b.stages[i].st.Name, name) {
			return i, true
		}
	}
	if n, err := strconv.Atoi(name); err == nil && n >= 0 && n < before {
		return n, true
	}
	return 0, false
}

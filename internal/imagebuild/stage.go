package imagebuild

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"

	"github.com/proctor-sandbox/proctor/internal/image"
	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

// defaultPath is the PATH BuildKit gives an image whose config has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// stageState is a stage being built: its base, the layers it made so
// far, its image config and its build environment.
type stageState struct {
	st    instructions.Stage
	index int
	built bool
	busy  bool

	base         *image.Image // the stored image under it; nil for scratch
	baseManifest *v1.Manifest
	baseConfig   *v1.ConfigFile
	layers       []*step // in order
	key          string  // the cache key of its last step
	cfg          v1.Config
	author       string
	history      []v1.History
	env          *envList // ENV and ARG values: expansion and RUN's environment
}

// lowers are the stage's layers as overlay lower directories, topmost
// first, ending with the base's rootfs (or an empty directory).
func (s *stageState) lowers(empty string) []string {
	var ls []string
	for i := len(s.layers) - 1; i >= 0; i-- {
		ls = append(ls, s.layers[i].layerDir())
	}
	if s.base != nil {
		return append(ls, s.base.Rootfs)
	}
	return append(ls, empty)
}

// stage builds stage i (and the stages it needs) once.
func (b *builder) stage(ctx context.Context, i int) (*stageState, error) {
	s := b.stages[i]
	if s.built {
		return s, nil
	}
	if s.busy {
		return nil, &LineError{File: b.df.Name, Line: stageLine(s.st), Err: errors.New("stage depends on itself")}
	}
	s.busy = true
	defer func() { s.busy = false }()
	at := func(err error) error { return &LineError{File: b.df.Name, Line: stageLine(s.st), Err: err} }

	baseName, _, err := b.lex.ProcessWord(s.st.BaseName, b.global)
	if err != nil {
		return nil, at(err)
	}
	if baseName == "" {
		return nil, at(fmt.Errorf("FROM %s: the base name is empty", s.st.BaseName))
	}
	if p := s.st.Platform; p != "" {
		plat, _, err := b.lex.ProcessWord(p, b.global)
		if err != nil {
			return nil, at(err)
		}
		if want, _ := platformArgs()["TARGETPLATFORM"]; plat != want {
			return nil, at(unsupported("FROM --platform=%s (this builder builds %s only)", plat, want))
		}
	}
	b.progress("[stage %d] FROM %s", i, baseName)
	b.log("stage %d: FROM %s", i, baseName)
	if j, ok := b.stageByName(baseName, i); ok && !strings.Contains(baseName, "/") {
		from, err := b.stage(ctx, j)
		if err != nil {
			return nil, err
		}
		s.base, s.baseManifest, s.baseConfig = from.base, from.baseManifest, from.baseConfig
		s.layers = append([]*step(nil), from.layers...)
		s.key, s.cfg, s.author = from.key, from.cfg, from.author
		s.cfg.Env = append([]string(nil), from.cfg.Env...)
		s.cfg.Labels = cloneMap(from.cfg.Labels)
		s.history = append([]v1.History(nil), from.history...)
	} else {
		img, err := b.fromImage(ctx, baseName)
		if err != nil {
			return nil, at(err)
		}
		if err := b.setBase(s, img); err != nil {
			return nil, at(err)
		}
	}
	s.env = envFromList(s.cfg.Env)
	for _, c := range s.st.Commands {
		if err := b.dispatch(ctx, s, c); err != nil {
			var le *LineError
			if errors.As(err, &le) {
				return nil, err
			}
			return nil, &LineError{File: b.df.Name, Line: line(c), Err: err}
		}
	}
	s.built = true
	return s, nil
}

// fromImage resolves an image named by FROM or COPY --from: from the
// store (by digest, or by tag unless Options.Pull), else pulled through
// it. The base must be stored with its manifest and config.
func (b *builder) fromImage(ctx context.Context, ref string) (*image.Image, error) {
	if strings.EqualFold(ref, "scratch") {
		return nil, nil
	}
	if img, ok := b.froms[ref]; ok {
		return img, nil
	}
	var img *image.Image
	var err error
	pinned := strings.Contains(ref, "@sha256:")
	if pinned || !b.o.Pull {
		img, err = b.o.Store.Resolve(ref)
		if err == nil {
			if _, _, rerr := b.o.Store.Raw(img); rerr != nil {
				img = nil // stored by an earlier version: pull again for its manifest
			}
		} else if !errors.Is(err, image.ErrNotFound) {
			return nil, err
		}
	}
	if img == nil {
		b.log("pulling %s", ref)
		b.progress("pulling %s", ref)
		if img, err = b.o.Store.Pull(ctx, ref, b.o.Remote...); err != nil {
			return nil, err
		}
	}
	b.log("image %s is %s", ref, img.Digest)
	b.froms[ref] = img
	return img, nil
}

// setBase starts stage s from a stored image (nil: scratch).
func (b *builder) setBase(s *stageState, img *image.Image) error {
	s.base = img
	if img == nil {
		s.key = keyOf("from", "scratch")
		s.cfg = v1.Config{Env: []string{"PATH=" + defaultPath}}
		return nil
	}
	rawM, rawC, err := b.o.Store.Raw(img)
	if err != nil {
		return err
	}
	if s.baseManifest, err = v1.ParseManifest(bytes.NewReader(rawM)); err != nil {
		return fmt.Errorf("image %s: %w", img.Digest, err)
	}
	if s.baseConfig, err = v1.ParseConfigFile(bytes.NewReader(rawC)); err != nil {
		return fmt.Errorf("image %s: %w", img.Digest, err)
	}
	if len(s.baseConfig.Config.OnBuild) > 0 {
		return unsupported("image %s declares ONBUILD triggers (%s), which this builder does not run", img.Digest, strings.Join(s.baseConfig.Config.OnBuild, "; "))
	}
	s.key = keyOf("from", img.Digest)
	s.cfg = s.baseConfig.Config
	s.cfg.Env = append([]string(nil), s.cfg.Env...)
	s.cfg.Labels = cloneMap(s.cfg.Labels)
	if _, ok := envFromList(s.cfg.Env).Get("PATH"); !ok {
		s.cfg.Env = append(s.cfg.Env, "PATH="+defaultPath)
	}
	return nil
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	n := make(map[string]string, len(m))
	for k, v := range m {
		n[k] = v
	}
	return n
}

// commitHistory records an instruction in the image's history.
func (s *stageState) commitHistory(createdBy string, empty bool) {
	s.history = append(s.history, v1.History{CreatedBy: createdBy, EmptyLayer: empty, Comment: "proctor image build"})
}

// dispatch applies one instruction to s.
func (b *builder) dispatch(ctx context.Context, s *stageState, c instructions.Command) error {
	if _, isArg := c.(*instructions.ArgCommand); !isArg {
		if ex, ok := c.(instructions.SupportsSingleWordExpansion); ok {
			if err := ex.Expand(func(w string) (string, error) {
				r, _, err := b.lex.ProcessWord(w, s.env)
				return r, err
			}); err != nil {
				return err
			}
		}
	}
	switch c := c.(type) {
	case *instructions.ArgCommand:
		for _, kv := range c.Args {
			var v *string
			if bv, ok := b.o.Args[kv.Key]; ok {
				v = &bv
			} else if kv.Value != nil {
				r, _, err := b.lex.ProcessWord(*kv.Value, s.env)
				if err != nil {
					return err
				}
				v = &r
			} else if g, ok := b.global.Get(kv.Key); ok {
				v = &g
			}
			if v != nil {
				s.env.set(kv.Key, *v)
			}
		}
		s.commitHistory("ARG "+argsString(c), true)
	case *instructions.EnvCommand:
		env := envFromList(s.cfg.Env)
		for _, kv := range c.Env {
			env.set(kv.Key, kv.Value)
			s.env.set(kv.Key, kv.Value)
		}
		s.cfg.Env = env.list()
		s.commitHistory("ENV "+kvString(c.Env), true)
	case *instructions.LabelCommand:
		if s.cfg.Labels == nil {
			s.cfg.Labels = map[string]string{}
		}
		for _, kv := range c.Labels {
			s.cfg.Labels[kv.Key] = kv.Value
		}
		s.commitHistory("LABEL "+kvString(c.Labels), true)
	case *instructions.WorkdirCommand:
		return b.workdir(s, c)
	case *instructions.UserCommand:
		s.cfg.User = c.User
		s.commitHistory("USER "+c.User, true)
	case *instructions.ShellCommand:
		s.cfg.Shell = append([]string(nil), c.Shell...)
		s.commitHistory(fmt.Sprintf("SHELL %q", c.Shell), true)
	case *instructions.CmdCommand:
		s.cfg.Cmd = s.withShell(c.CmdLine, c.PrependShell)
		s.commitHistory(fmt.Sprintf("CMD %q", s.cfg.Cmd), true)
	case *instructions.EntrypointCommand:
		s.cfg.Entrypoint = s.withShell(c.CmdLine, c.PrependShell)
		s.commitHistory(fmt.Sprintf("ENTRYPOINT %q", s.cfg.Entrypoint), true)
	case *instructions.ExposeCommand:
		if s.cfg.ExposedPorts == nil {
			s.cfg.ExposedPorts = map[string]struct{}{}
		}
		for _, p := range c.Ports {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			s.cfg.ExposedPorts[p] = struct{}{}
		}
		s.commitHistory("EXPOSE "+strings.Join(c.Ports, " "), true)
	case *instructions.HealthCheckCommand:
		h := c.Health
		s.cfg.Healthcheck = &v1.HealthConfig{Test: h.Test, Interval: h.Interval, Timeout: h.Timeout, StartPeriod: h.StartPeriod, Retries: h.Retries}
		s.commitHistory(fmt.Sprintf("HEALTHCHECK %q", h.Test), true)
	case *instructions.VolumeCommand:
		if s.cfg.Volumes == nil {
			s.cfg.Volumes = map[string]struct{}{}
		}
		for _, v := range c.Volumes {
			if v == "" {
				return errors.New("VOLUME: an empty path")
			}
			s.cfg.Volumes[v] = struct{}{}
		}
		s.commitHistory(fmt.Sprintf("VOLUME %q", c.Volumes), true)
	case *instructions.StopSignalCommand:
		s.cfg.StopSignal = c.Signal
		s.commitHistory("STOPSIGNAL "+c.Signal, true)
	case *instructions.MaintainerCommand:
		s.author = c.Maintainer
		s.commitHistory("MAINTAINER "+c.Maintainer, true)
	case *instructions.OnbuildCommand:
		s.cfg.OnBuild = append(s.cfg.OnBuild, c.Expression)
		s.commitHistory("ONBUILD "+c.Expression, true)
	case *instructions.RunCommand:
		return b.run(ctx, s, c)
	case *instructions.CopyCommand:
		return b.copy(ctx, s, copyCmd{name: "COPY", sd: c.SourcesAndDest, from: c.From, chown: c.Chown, chmod: c.Chmod, exclude: c.ExcludePatterns, line: line(c)})
	case *instructions.AddCommand:
		return b.copy(ctx, s, copyCmd{name: "ADD", sd: c.SourcesAndDest, chown: c.Chown, chmod: c.Chmod, exclude: c.ExcludePatterns,
			checksum: c.Checksum, unpack: c.Unpack, add: true, line: line(c)})
	default:
		return unsupported("instruction %s", strings.ToUpper(c.Name()))
	}
	return nil
}

// withShell is a command line in the stage's SHELL (default /bin/sh -c)
// when written in shell form.
func (s *stageState) withShell(args []string, prepend bool) []string {
	if !prepend {
		return append([]string(nil), args...)
	}
	sh := []string{"/bin/sh", "-c"}
	if len(s.cfg.Shell) > 0 {
		sh = append([]string(nil), s.cfg.Shell...)
	}
	return append(sh, strings.Join(args, " "))
}

func argsString(c *instructions.ArgCommand) string {
	var parts []string
	for _, a := range c.Args {
		parts = append(parts, a.String())
	}
	return strings.Join(parts, " ")
}

func kvString(kvs instructions.KeyValuePairs) string {
	var parts []string
	for _, kv := range kvs {
		parts = append(parts, kv.String())
	}
	return strings.Join(parts, " ")
}

// begin logs and announces a step; done reports it.
func (b *builder) begin(kind, text string, ln int) (n int, start time.Time) {
	b.n++
	b.res.Steps++
	b.log("#%d %s:%d %s %s", b.n, b.df.Name, ln, kind, text)
	return b.n, time.Now()
}

func (b *builder) cached(n int, kind, text string) {
	b.res.Cached++
	b.log("#%d cached", n)
	b.progress("#%d %s %s (cached)", n, kind, short(text))
}

func short(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 72 {
		return s[:69] + "..."
	}
	return s
}

// workdir sets the working directory and makes it, as BuildKit does (as
// the stage's user), when the image lacks it.
func (b *builder) workdir(s *stageState, c *instructions.WorkdirCommand) error {
	wd := c.Path
	if !path.IsAbs(wd) {
		cur := s.cfg.WorkingDir
		if cur == "" {
			cur = "/"
		}
		wd = path.Join(cur, wd)
	}
	wd = path.Clean(wd)
	s.cfg.WorkingDir = wd
	if wd == "/" {
		s.commitHistory("WORKDIR /", true)
		return nil
	}
	key := keyOf(s.key, "WORKDIR", wd, s.cfg.User)
	return b.fileStep(s, "WORKDIR", wd, line(c), key, func(root int) error {
		uid, gid := 0, 0
		if s.cfg.User != "" {
			u, err := lookupUser(root, s.cfg.User)
			if err != nil {
				return err
			}
			uid, gid = int(u.UID), int(u.GID)
		}
		fd, err := mkdirAllInRoot(root, wd, uid, gid)
		if err == nil {
			closeFD(fd)
		}
		return err
	})
}

// run is a RUN step: looked up in the cache, else run in a sandbox over
// the stage's layers.
func (b *builder) run(ctx context.Context, s *stageState, c *instructions.RunCommand) error {
	args := c.CmdLine
	if len(c.Files) > 0 {
		script, err := heredocScript(c)
		if err != nil {
			return err
		}
		args = []string{script}
	}
	argv := s.withShell(args, c.PrependShell)
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("RUN: no command")
	}
	env := s.env.list()
	workdir := s.cfg.WorkingDir
	if workdir == "" {
		workdir = "/"
	}
	text := strings.Join(argv, " ")
	av, _ := json.Marshal(argv)
	ev, _ := json.Marshal(env)
	key := keyOf(s.key, "RUN", string(av), string(ev), workdir, s.cfg.User)
	n, start := b.begin("RUN", text, line(c))
	if st, err := b.lookup(key); err != nil {
		return err
	} else if st != nil {
		b.cached(n, "RUN", text)
		s.apply(st, "RUN "+text)
		return nil
	}
	b.progress("#%d RUN %s", n, short(text))
	var user *sandbox.User
	if u := s.cfg.User; u != "" && u != "root" && u != "0" && u != "0:0" && u != "root:root" {
		view, err := mountView(s.lowers(b.cache.path("empty")), "", "", b.cache.path("empty"))
		if err != nil {
			return err
		}
		user, err = lookupUser(view, u)
		closeFD(view)
		if err != nil {
			return err
		}
	}
	w, err := b.cache.begin(lowerOwner())
	if err != nil {
		return err
	}
	res, tail, err := b.runStep(w, s.lowers(b.cache.path("empty")), argv, env, workdir, user)
	b.res.Ran++
	if err != nil {
		w.abandon()
		return fmt.Errorf("RUN: %w", err)
	}
	if res.ExitCode != 0 || res.TimedOut {
		w.abandon()
		se := &StepError{Instruction: "RUN", ExitCode: res.ExitCode, Tail: tail, Log: b.res.Log}
		if res.TimedOut {
			se.Limit = string(sandbox.LimitTimeout)
		} else if res.Signal != 0 && res.Limit != sandbox.LimitNone {
			se.Limit = string(res.Limit)
		}
		b.log("#%d failed: %v", n, se)
		return se
	}
	empty, err := normalize(w.upper(), uint32(lowerOwner()))
	if err != nil {
		w.abandon()
		return fmt.Errorf("RUN: reading its changes: %w", err)
	}
	st, err := b.cache.commit(w, stepMeta{Key: key, CreatedBy: "RUN " + text, Empty: empty})
	if err != nil {
		return err
	}
	b.log("#%d done in %s", n, time.Since(start).Round(time.Millisecond))
	s.apply(st, "RUN "+text)
	return nil
}

// lookup returns the cached step with key unless the build ignores the
// cache.
func (b *builder) lookup(key string) (*step, error) {
	if b.o.NoCache {
		return nil, nil
	}
	return b.cache.get(key)
}

// apply adds a finished step to the stage.
func (s *stageState) apply(st *step, createdBy string) {
	s.key = st.meta.Key
	if !st.meta.Empty {
		s.layers = append(s.layers, st)
	}
	s.commitHistory(createdBy, st.meta.Empty)
}

// fileStep is a step the host does in a writable view of the stage (COPY,
// ADD, WORKDIR): do writes into the view, whose upper becomes the layer.
func (b *builder) fileStep(s *stageState, kind, text string, ln int, key string, do func(root int) error) error {
	n, start := b.begin(kind, text, ln)
	if st, err := b.lookup(key); err != nil {
		return err
	} else if st != nil {
		b.cached(n, kind, text)
		s.apply(st, kind+" "+text)
		return nil
	}
	b.progress("#%d %s %s", n, kind, short(text))
	w, err := b.cache.begin(0)
	if err != nil {
		return err
	}
	view, err := mountView(s.lowers(b.cache.path("empty")), w.upper(), w.ovl(), "")
	if err != nil {
		w.abandon()
		return err
	}
	err = do(view)
	closeFD(view)
	if err != nil {
		w.abandon()
		return err
	}
	empty, err := normalize(w.upper(), 0)
	if err != nil {
		w.abandon()
		return fmt.Errorf("%s: reading its changes: %w", kind, err)
	}
	st, err := b.cache.commit(w, stepMeta{Key: key, CreatedBy: kind + " " + text, Empty: empty})
	if err != nil {
		return err
	}
	b.log("#%d done in %s", n, time.Since(start).Round(time.Millisecond))
	s.apply(st, kind+" "+text)
	return nil
}

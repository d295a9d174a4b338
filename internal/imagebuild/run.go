package imagebuild

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

// Defaults of a RUN step's sandbox.
const (
	defaultPids = 4096
	tailBytes   = 4096
)

// runStep runs argv in a sandbox whose root is an overlay of lowers with
// w's upper as the writable layer, writing its output to the build log.
func (b *builder) runStep(w *work, lowers []string, argv, env []string, workdir string, user *sandbox.User) (*sandbox.Result, string, error) {
	// The last line of stderr names a failure best (apt's "E: …"); else
	// stdout's.
	tailOut, tailErr := &tailWriter{max: tailBytes}, &tailWriter{max: tailBytes}
	spec := sandbox.Spec{
		Overlays: []sandbox.Overlay{{Dst: "/", Lower: lowers, Upper: w.upper(), Work: w.ovl()}},
		Workdir:  workdir,
		Env:      append(append([]string{}, env...), b.net.env()...),
		Hostname: "proctor-build",
		Args:     argv,
		User:     user,
		KeepTmp:  true,
		Limits: sandbox.Limits{
			Pids:        defaultPids,
			MemoryBytes: b.o.MemoryBytes,
			Timeout:     b.remaining(),
		},
		AllowDegraded: b.o.AllowDegraded,
		Stdout:        io.MultiWriter(b.logw, tailOut),
		Stderr:        io.MultiWriter(b.logw, tailErr),
	}
	var ls []net.Listener
	var mu sync.Mutex
	if b.net.on() {
		spec.Listen = []string{ProxyAddr}
		spec.Serve = func(l []net.Listener) {
			mu.Lock()
			ls = append(ls, l...)
			mu.Unlock()
			for _, x := range l {
				go func() { _ = b.net.proxy.Serve(x) }()
			}
		}
	}
	// The caller's context, not the build's deadline: the step's own
	// timeout ends it then, and says so.
	res, err := sandbox.Run(b.runCtx, spec)
	mu.Lock()
	for _, l := range ls {
		l.Close()
	}
	mu.Unlock()
	tail := tailErr.last()
	if tail == "" {
		tail = tailOut.last()
	}
	return res, tail, err
}

// remaining is what is left of the build's deadline for one step (0:
// none).
func (b *builder) remaining() time.Duration {
	if b.deadline.IsZero() {
		return 0
	}
	d := time.Until(b.deadline)
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}

// tailWriter keeps the last bytes written.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(p), nil
}

// last returns the last non-empty line, quoted when it holds anything a
// terminal could act on.
func (t *tailWriter) last() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := bytes.Split(bytes.TrimRight(t.buf, "\r\n\t "), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(string(lines[i]))
		if l == "" {
			continue
		}
		if strconv.Quote(l) != `"`+l+`"` {
			return strconv.Quote(l)
		}
		return l
	}
	return ""
}

// lookupUser resolves a USER value ("name", "uid", "name:group",
// "uid:gid") in the root filesystem open at root, as Docker does: a name
// through /etc/passwd and /etc/group, a number as itself, a user without
// a group in the user's primary group (a bare uid in gid = uid when
// /etc/passwd does not list it). Supplementary groups are those
// /etc/group gives the user by name.
func lookupUser(root int, spec string) (*sandbox.User, error) {
	us, gs, hasGroup := strings.Cut(spec, ":")
	passwd, _ := readSmall(root, "etc/passwd")
	group, _ := readSmall(root, "etc/group")
	u := &sandbox.User{}
	name := ""
	if n, err := strconv.ParseUint(us, 10, 32); err == nil {
		u.UID, u.GID = uint32(n), uint32(n)
		if f := findEntry(passwd, func(f []string) bool { return len(f) > 3 && f[2] == us }); f != nil {
			name = f[0]
			if g, err := strconv.ParseUint(f[3], 10, 32); err == nil {
				u.GID = uint32(g)
			}
		}
	} else {
		f := findEntry(passwd, func(f []string) bool { return len(f) > 3 && f[0] == us })
		if f == nil {
			return nil, fmt.Errorf("USER %s: no such user in /etc/passwd", spec)
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("USER %s: malformed /etc/passwd entry", spec)
		}
		u.UID, u.GID, name = uint32(uid), uint32(gid), us
	}
	if hasGroup {
		if n, err := strconv.ParseUint(gs, 10, 32); err == nil {
			u.GID = uint32(n)
		} else {
			f := findEntry(group, func(f []string) bool { return len(f) > 2 && f[0] == gs })
			if f == nil {
				return nil, fmt.Errorf("USER %s: no such group in /etc/group", spec)
			}
			g, err := strconv.ParseUint(f[2], 10, 32)
			if err != nil {
				return nil, fmt.Errorf("USER %s: malformed /etc/group entry", spec)
			}
			u.GID = uint32(g)
		}
	} else if name != "" {
		for _, l := range strings.Split(string(group), "\n") {
			f := strings.Split(l, ":")
			if len(f) < 4 {
				continue
			}
			for _, m := range strings.Split(f[3], ",") {
				if m == name {
					if g, err := strconv.ParseUint(f[2], 10, 32); err == nil && uint32(g) != u.GID {
						u.Groups = append(u.Groups, uint32(g))
					}
				}
			}
		}
	}
	return u, nil
}

func findEntry(file []byte, match func([]string) bool) []string {
	sc := bufio.NewScanner(bytes.NewReader(file))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if match(f) {
			return f
		}
	}
	return nil
}

// readSmall reads a small file of a root filesystem, as inside it.
func readSmall(root int, rel string) ([]byte, error) {
	fd, err := unix.Openat2(root, rel, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS})
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errors.New(rel + ": not a regular file")
	}
	return io.ReadAll(io.LimitReader(f, 4<<20))
}

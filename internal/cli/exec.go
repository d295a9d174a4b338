package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/proctor-sandbox/proctor/internal/sandbox"
)

func newExecCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var (
		rootfs, workdir, hostname, resultPath string
		binds, tmpfs, masks, env              []string
		memory, outputLimit                   string
		pids                                  int64
		cpus                                  float64
		timeout                               time.Duration
		allowDegraded                         bool
	)
	c := &cobra.Command{
		Use:   "exec [flags] -- COMMAND [ARG...]",
		Short: "Run a command fully isolated, with limits",
		Long: `Run COMMAND in a sandbox: its own user, mount, pid, network, ipc, uts and
cgroup namespaces, a read-only root, no network but lo, a seccomp filter,
Docker's default capabilities at most, limits, and a deadline.

Exit status: the command's own; 128+N when it died by signal N; 125 when
proctor could not set the sandbox up; 2 for a wrong command line.`,
		RunE: func(c *cobra.Command, args []string) error {
			dash := c.ArgsLenAtDash()
			if dash < 0 {
				return &exitError{code: exitUsage, err: fmt.Errorf("exec: missing -- before the command"),
					hint: "proctor exec [flags] -- COMMAND [ARG...]"}
			}
			if dash > 0 {
				return usageErr("exec: unexpected argument %q before --", args[0])
			}
			if len(args) == 0 {
				return usageErr("exec: no command after --")
			}
			spec := sandbox.Spec{
				Rootfs: rootfs, Workdir: workdir, Hostname: hostname, Env: env, Masks: masks,
				Args: args, AllowDegraded: allowDegraded,
				Stdin: stdin, Stdout: stdout, Stderr: stderr,
			}
			if spec.Rootfs != sandbox.RootfsHost && spec.Rootfs != "" {
				abs, err := filepath.Abs(spec.Rootfs)
				if err != nil {
					return err
				}
				spec.Rootfs = abs
			}
			var err error
			if spec.Binds, err = parseBinds(binds); err != nil {
				return err
			}
			if spec.Tmpfs, err = parseTmpfs(tmpfs); err != nil {
				return err
			}
			if spec.Limits.MemoryBytes, err = parseSizeFlag("--memory", memory); err != nil {
				return err
			}
			if spec.Limits.OutputBytes, err = parseSizeFlag("--output-limit", outputLimit); err != nil {
				return err
			}
			if pids < 0 || cpus < 0 || timeout < 0 {
				return usageErr("exec: --pids, --cpus and --timeout must not be negative")
			}
			spec.Limits.Pids, spec.Limits.CPUs, spec.Limits.Timeout = pids, cpus, timeout
			if resultPath != "" {
				// Fail before running anything if the result cannot be written.
				f, err := os.OpenFile(resultPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
				if err != nil {
					return fmt.Errorf("--result: %w", err)
				}
				f.Close()
			}
			res, runErr := sandbox.Run(c.Context(), spec)
			if runErr != nil && res == nil {
				return runErr
			}
			if resultPath != "" {
				b, jerr := json.MarshalIndent(res, "", "  ")
				if jerr != nil {
					return jerr
				}
				if werr := os.WriteFile(resultPath, append(b, '\n'), 0o644); werr != nil {
					return fmt.Errorf("--result: %w", werr)
				}
			}
			if res.Limit != sandbox.LimitNone {
				fmt.Fprintf(stderr, "proctor: limit: %s (the sandbox was stopped or constrained by it)\n", res.Limit)
			}
			if errors.Is(runErr, context.Canceled) {
				return &exitError{code: 130, err: fmt.Errorf("exec: interrupted; the sandbox was killed")}
			}
			if runErr != nil {
				return runErr
			}
			return exitStatus(res.ExitCode)
		},
	}
	f := c.Flags()
	f.StringVar(&rootfs, "rootfs", sandbox.RootfsHost, `"host" (a read-only view of the host's /usr /bin /sbin /lib /lib64 /etc, secrets masked) or a directory used as / (read-only)`)
	f.StringArrayVar(&binds, "bind", nil, "bind a host path, SRC:DST[:rw]; read-only unless :rw (repeatable)")
	f.StringArrayVar(&tmpfs, "tmpfs", nil, "a private tmpfs, DST[:SIZE] (repeatable); /tmp and /dev/shm are always private")
	f.StringArrayVar(&masks, "mask", nil, "PATH is hidden inside: an empty file or an empty read-only dir (repeatable)")
	f.StringVar(&workdir, "workdir", "/", "working directory inside")
	f.StringArrayVar(&env, "env", nil, "K=V added to an environment that starts with only PATH and HOME (repeatable)")
	f.StringVar(&hostname, "hostname", "proctor", "host name inside")
	f.StringVar(&memory, "memory", "", "memory limit, e.g. 512M, 2G")
	f.Int64Var(&pids, "pids", 0, "maximum number of processes and threads")
	f.Float64Var(&cpus, "cpus", 0, "CPU quota, e.g. 1.5")
	f.DurationVar(&timeout, "timeout", 0, "wall-clock limit, e.g. 30s; the whole tree is killed at the deadline")
	f.StringVar(&outputLimit, "output-limit", "", "cap on stdout+stderr, e.g. 10M; beyond it the tree is killed")
	f.StringVar(&resultPath, "result", "", "write a JSON result to this file")
	f.BoolVar(&allowDegraded, "allow-degraded", false, "run even if a resource limit cannot be applied here (named in the result's degraded list)")
	return c
}

func parseBinds(specs []string) ([]sandbox.Bind, error) {
	var out []sandbox.Bind
	for _, s := range specs {
		parts := strings.Split(s, ":")
		b := sandbox.Bind{}
		switch {
		case len(parts) == 2:
		case len(parts) == 3 && parts[2] == "rw":
			b.Writable = true
		case len(parts) == 3 && parts[2] == "ro":
		default:
			return nil, usageErr("--bind %q: want SRC:DST or SRC:DST:rw", s)
		}
		if parts[0] == "" || parts[1] == "" {
			return nil, usageErr("--bind %q: want SRC:DST or SRC:DST:rw", s)
		}
		src, err := filepath.Abs(parts[0])
		if err != nil {
			return nil, err
		}
		b.Src, b.Dst = src, parts[1]
		out = append(out, b)
	}
	return out, nil
}

func parseTmpfs(specs []string) ([]sandbox.Tmpfs, error) {
	var out []sandbox.Tmpfs
	for _, s := range specs {
		dst, size, hasSize := strings.Cut(s, ":")
		t := sandbox.Tmpfs{Dst: dst}
		if hasSize {
			n, err := parseSize(size)
			if err != nil {
				return nil, usageErr("--tmpfs %q: %v", s, err)
			}
			t.SizeBytes = n
		}
		out = append(out, t)
	}
	return out, nil
}

func parseSizeFlag(name, v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := parseSize(v)
	if err != nil {
		return 0, usageErr("%s %q: %v", name, v, err)
	}
	return n, nil
}

// parseSize reads a byte count: digits with an optional K, M, G or T suffix
// (powers of 1024), optionally followed by "B" or "iB".
func parseSize(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.ToUpper(s), "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("want a positive size such as 512M or 2G")
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("too large")
	}
	return n * mult, nil
}

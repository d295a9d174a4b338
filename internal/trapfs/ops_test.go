//go:build linux

package trapfs

import (
	"bytes"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// do performs one op in the child and reports what happened.
func do(o op) (out outcome) {
	p := o.Path
	switch o.Do {
	case "stat":
		var st unix.Stat_t
		err := unix.Stat(p, &st)
		return outcome{Errno: errno(err), Mode: st.Mode, Size: st.Size, UID: st.Uid}
	case "open": // open, read everything, close
		fd, err := unix.Open(p, o.Flags|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return outcome{Errno: errno(err)}
		}
		defer unix.Close(fd)
		var data []byte
		buf := make([]byte, 4096)
		for {
			n, err := unix.Read(fd, buf)
			if n <= 0 {
				if err != nil {
					return outcome{Errno: errno(err), Data: string(data)}
				}
				return outcome{Data: string(data)}
			}
			data = append(data, buf[:n]...)
		}
	case "pread": // at a far offset
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return outcome{Errno: errno(err)}
		}
		defer unix.Close(fd)
		buf := make([]byte, 4096)
		n, err := unix.Pread(fd, buf, 1<<20)
		return outcome{Errno: errno(err), Data: string(buf[:max(n, 0)])}
	case "mmap": // map a page and touch it
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return outcome{Errno: errno(err)}
		}
		defer unix.Close(fd)
		m, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ, unix.MAP_PRIVATE)
		if err != nil {
			return outcome{Errno: errno(err)}
		}
		defer unix.Munmap(m)
		return touch(m)
	case "copyrange", "sendfile": // from p into a temp file
		in, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return outcome{Errno: errno(err)}
		}
		defer unix.Close(in)
		tmp, err := os.CreateTemp("", "trapfs")
		if err != nil {
			return outcome{Errno: -1}
		}
		defer os.Remove(tmp.Name())
		defer tmp.Close()
		var n int
		if o.Do == "sendfile" {
			n, err = unix.Sendfile(int(tmp.Fd()), in, nil, 4096)
		} else {
			n, err = unix.CopyFileRange(in, nil, int(tmp.Fd()), nil, 4096, 0)
		}
		return outcome{Errno: errno(err), Size: int64(max(n, 0))}
	case "readdir":
		ents, err := os.ReadDir(p)
		var ns []string
		for _, e := range ents {
			ns = append(ns, e.Name())
		}
		return outcome{Errno: errno(err), Names: ns}
	case "getdents": // raw, to see "." and ".."
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return outcome{Errno: errno(err)}
		}
		defer unix.Close(fd)
		buf := make([]byte, 4096)
		var ns []string
		for {
			n, err := unix.Getdents(fd, buf)
			if n <= 0 || err != nil {
				return outcome{Errno: errno(err), Names: ns}
			}
			ns = append(ns, direntNames(buf[:n])...)
		}
	case "readlink":
		buf := make([]byte, 256)
		n, err := unix.Readlink(p, buf)
		return outcome{Errno: errno(err), Data: string(buf[:max(n, 0)])}
	case "mkdir":
		return outcome{Errno: errno(unix.Mkdir(p, 0o755))}
	case "mknod":
		return outcome{Errno: errno(unix.Mknod(p, unix.S_IFIFO|0o644, 0))}
	case "symlink":
		return outcome{Errno: errno(unix.Symlink(o.Arg, p))}
	case "link":
		return outcome{Errno: errno(unix.Link(p, o.Arg))}
	case "unlink":
		return outcome{Errno: errno(unix.Unlink(p))}
	case "rmdir":
		return outcome{Errno: errno(unix.Rmdir(p))}
	case "rename":
		return outcome{Errno: errno(unix.Rename(p, o.Arg))}
	case "chmod":
		return outcome{Errno: errno(unix.Chmod(p, uint32(o.Flags)))}
	case "chown":
		return outcome{Errno: errno(unix.Chown(p, 1, 1))}
	case "utimes": // touch an existing file: both times to now
		return outcome{Errno: errno(unix.UtimesNanoAt(unix.AT_FDCWD, p, []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}, 0))}
	case "truncate":
		return outcome{Errno: errno(unix.Truncate(p, 0))}
	case "setxattr":
		return outcome{Errno: errno(unix.Setxattr(p, o.Arg, []byte("v"), 0))}
	case "removexattr":
		return outcome{Errno: errno(unix.Removexattr(p, o.Arg))}
	case "getxattr":
		buf := make([]byte, 256)
		n, err := unix.Getxattr(p, o.Arg, buf)
		return outcome{Errno: errno(err), Data: string(buf[:max(n, 0)])}
	case "listxattr":
		buf := make([]byte, 256)
		n, err := unix.Listxattr(p, buf)
		return outcome{Errno: errno(err), Names: names(buf[:max(n, 0)])}
	case "access":
		return outcome{Errno: errno(unix.Access(p, uint32(o.Flags)))}
	case "statfs":
		var st unix.Statfs_t
		return outcome{Errno: errno(unix.Statfs(p, &st))}
	case "exec":
		return outcome{Errno: errno(unix.Exec(p, []string{p}, nil))}
	case "cmd":
		cmd := exec.Command(o.Argv[0], o.Argv[1:]...)
		data, err := cmd.CombinedOutput()
		out := outcome{Data: string(data), Exit: cmd.ProcessState.ExitCode()}
		if err != nil && cmd.ProcessState == nil {
			out.Errno = -1
		}
		if cmd.Process != nil {
			out.PID = cmd.Process.Pid
		}
		return out
	case "statmany": // o.Flags lookups of missing names from 8 threads
		return statMany(p, o.Flags)
	case "statloop": // stat p until something other than ENOENT, at most 10 s
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			var st unix.Stat_t
			err := unix.Stat(p, &st)
			if errno(err) != int(unix.ENOENT) {
				return outcome{Errno: errno(err), Count: out.Count}
			}
			out.Count++
		}
		return outcome{Errno: int(unix.ENOENT), Count: out.Count}
	}
	return outcome{Errno: -1, Data: "unknown op " + o.Do}
}

// touch reads the first byte of a mapping, reporting a fault instead of
// dying of it.
func touch(m []byte) (out outcome) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if recover() != nil {
			out = outcome{Fault: true}
		}
	}()
	return outcome{Data: string(m[:1])}
}

// statMany stats n missing names under dir from 8 goroutines at once.
func statMany(dir string, n int) outcome {
	var (
		mu     sync.Mutex
		out    outcome
		wg     sync.WaitGroup
		others = map[int]bool{}
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				var st unix.Stat_t
				e := errno(unix.Stat(dir+"/"+strconv.Itoa(i), &st))
				mu.Lock()
				if e == int(unix.ENOENT) {
					out.Count++
				} else {
					others[e] = true
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for e := range others {
		out.Others = append(out.Others, e)
	}
	return out
}

// direntNames lists the names in getdents64 records, "." and ".." included
// (unix.ParseDirent drops them).
func direntNames(b []byte) []string {
	var out []string
	for len(b) >= 19 {
		reclen := int(ne.Uint16(b[16:]))
		if reclen < 19 || reclen > len(b) {
			break
		}
		name := b[19:reclen]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		out = append(out, string(name))
		b = b[reclen:]
	}
	return out
}

// Command internet serves, on the host's loopback, a stand-in for the
// hosts the Terminal-Bench examples' verifiers fetch their tools from
// (astral.sh, github.com, pypi.org, files.pythonhosted.org:
// internal/standin), for a machine without the internet, the demo and CI.
// It prints, on one line, the flags that point proctor at it, then serves
// until interrupted, a line on stderr for each request:
//
//	go run ./examples/tb/internet -pytest-from DIR [-dir DIR] [-addr 127.0.0.1:0]
//	--host-map astral.sh=127.0.0.1:PORT … --ca-file DIR/ca.pem --verifier-allow-host astral.sh …
//
// -pytest-from is a directory of Python packages holding pytest 8 with
// pluggy, iniconfig and packaging, e.g. Debian trixie's python3-pytest
// extracted by mmdebstrap --variant=extract (examples/tb/README.md).
// -dir keeps the stand-in's CA, so that a later run with the same -addr
// gives the same flags, and proctor finds the recordings it made of the
// verifiers' fetches.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/proctor-sandbox/proctor/internal/standin"
)

func main() {
	pytest := flag.String("pytest-from", "", "a directory of Python packages holding pytest, pluggy, iniconfig and packaging")
	dir := flag.String("dir", "", "where the stand-in's CA is kept (default a directory under the user cache dir)")
	addr := flag.String("addr", "127.0.0.1:0", "where to listen")
	quiet := flag.Bool("q", false, "no line for each request")
	flag.Parse()
	if err := run(*pytest, *dir, *addr, *quiet); err != nil {
		fmt.Fprintln(os.Stderr, "internet:", err)
		os.Exit(1)
	}
}

func run(pytest, dir, addr string, quiet bool) error {
	if pytest == "" {
		return fmt.Errorf("-pytest-from is required (hint: see examples/tb/README.md)")
	}
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("-dir: not set and no user cache dir: %w", err)
		}
		dir = filepath.Join(cache, "proctor-examples", "internet")
	}
	o := standin.Options{SitePackages: pytest, Dir: dir, Addr: addr}
	if !quiet {
		o.Log = os.Stderr
	}
	n, err := standin.Start(o)
	if err != nil {
		return err
	}
	defer n.Close()
	var flags []string
	for _, m := range n.HostMap {
		flags = append(flags, "--host-map", m)
	}
	flags = append(flags, "--ca-file", n.CAFile)
	for _, h := range standin.Hosts {
		flags = append(flags, "--verifier-allow-host", h)
	}
	fmt.Println(strings.Join(flags, " "))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	return nil
}

// Command replayproxy serves a proctor trial's recording of its verifier's
// fetches (hermetic.json and its bodies, beside the trial's bundle) as
// Proctor's grader gets it, on the host's loopback, for a peer harness to
// grade with the same network: the same Replayer, TLS ended by the same
// store's CA. It writes the trust bundle (the environment's own, then the
// CA's certificate) and an env file (the proxy variables and the CA
// variables the grader gets, for podman run --env-file), prints the
// proxy's address, and serves until interrupted; at exit it says how many
// requests it refused (a peer that fetched something the pristine verifier
// did not).
//
//	go run ./bench/replayproxy -store CACHE/hermetic -trial OUT -system ROOTFS/etc/ssl/certs/ca-certificates.crt -trust FILE -env FILE
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/proctor-sandbox/proctor/internal/hermetic"
)

func main() {
	store := flag.String("store", "", "the hermetic store of the proctor cache that made the recording (CACHE/hermetic): its CA")
	trial := flag.String("trial", "", "a trial's output directory (verdict.json, hermetic.json and the bodies)")
	system := flag.String("system", "", "the environment's own CA bundle (none: empty)")
	trust := flag.String("trust", "", "where to write the trust bundle")
	envFile := flag.String("env", "", "where to write the environment (KEY=VALUE lines)")
	addr := flag.String("addr", "127.0.0.1:0", "where to listen")
	flag.Parse()
	if err := run(*store, *trial, *system, *trust, *envFile, *addr); err != nil {
		fmt.Fprintln(os.Stderr, "replayproxy:", err)
		os.Exit(1)
	}
}

func run(store, trial, system, trustFile, envFile, addr string) error {
	if store == "" || trial == "" || trustFile == "" || envFile == "" {
		return errors.New("-store, -trial, -trust and -env are required")
	}
	var v struct {
		Hermetic *struct {
			Digest string `json:"digest"`
		} `json:"hermetic"`
	}
	b, err := os.ReadFile(filepath.Join(trial, "verdict.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &v); err != nil || v.Hermetic == nil {
		return fmt.Errorf("%s: no recording in the verdict (%v)", trial, err)
	}
	rec, err := hermetic.LoadDir(trial, v.Hermetic.Digest)
	if err != nil {
		return err
	}
	st, err := hermetic.OpenStore(store)
	if err != nil {
		return err
	}
	ca, err := st.CA()
	if err != nil {
		return err
	}
	sys, err := os.ReadFile(system)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	tr, err := ca.Trust(sys)
	if err != nil {
		return err
	}
	if err := os.WriteFile(trustFile, tr.Bundle, 0o644); err != nil {
		return err
	}
	var refused atomic.Int64
	p, err := hermetic.NewReplayer(rec, ca, hermetic.ReplayOptions{Record: func(d hermetic.Decision) {
		if d.Violation {
			refused.Add(1)
		}
	}})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	url := "http://" + l.Addr().String()
	var env []string
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env = append(env, k+"="+url, strings.ToLower(k)+"="+url)
	}
	env = append(env, tr.Env...)
	if err := os.WriteFile(envFile, []byte(strings.Join(env, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	go p.Serve(l)
	fmt.Println(l.Addr().String())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	<-stop
	p.Close()
	fmt.Fprintf(os.Stderr, "replayproxy: %d request(s) the recording does not hold\n", refused.Load())
	return nil
}

// Command mkimage makes a container image from a directory, without
// Docker: one layer holding the directory's tree (owned by root, or with
// -keep-owners as the tree has them: a Debian root made by mmdebstrap), a
// config with PATH and a working directory, written as a `docker save`
// archive that `proctor image import` reads (internal/rootimage).
//
//	go run ./examples/images/mkimage -from ROOTFS -tag NAME:TAG -o IMAGE.tar [-workdir /app] [-cmd /bin/bash] [-keep-owners]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/proctor-sandbox/proctor/internal/rootimage"
)

func main() {
	from := flag.String("from", "", "the root directory of the image")
	tag := flag.String("tag", "", "the image's name, e.g. proctor-examples/busybox:1")
	out := flag.String("o", "", "the docker-save archive to write")
	workdir := flag.String("workdir", "/app", "the image's working directory")
	cmd := flag.String("cmd", "/bin/sh", "the image's command")
	keep := flag.Bool("keep-owners", false, "keep each file's owner and group (else all are root's)")
	flag.Parse()
	if *from == "" || *tag == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "mkimage: -from, -tag and -o are required")
		os.Exit(2)
	}
	if err := rootimage.Write(*from, *out, rootimage.Options{Tag: *tag, Workdir: *workdir, Cmd: []string{*cmd}, KeepOwners: *keep}); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

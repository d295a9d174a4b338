// Command proctor runs AI coding agents on benchmark tasks in tamper-proof
// sandboxes. See the README for what it guarantees.
package main

import (
	"os"

	"github.com/proctor-sandbox/proctor/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Package cli wires proctor's subcommands to the packages that do the work:
// one file per subcommand, each writing to injected streams, never to the
// process's own. It holds no logic beyond parsing flags and reporting errors.
package cli

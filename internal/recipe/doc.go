// Package recipe provides agent recipes: how to install and run a real
// agent CLI (Claude Code, Codex CLI, …) by name, as data rather than code.
//
// A recipe is a TOML file (the ones shipped live in recipes/ and are built
// into the binary; a user adds or overrides them in the config file's
// [agents.NAME] tables). It names the npm package and its exact version
// (and, for the shipped ones, the registry's integrity hash of it), the
// executable inside the installed package, the arguments that run it
// headless with its own sandboxing off (Proctor is the sandbox), how the
// instruction and the model are passed, the providers it can be pointed at
// through a model gateway, the environment it needs (telemetry off), and
// where under /tmp its own logs and session files land, to be collected as
// artifacts.
//
//	name = "claude-code"
//	providers = ["anthropic"]
//	args = ["-p", "{instruction}", "--model", "{model}", "--dangerously-skip-permissions"]
//	logs = ["/tmp/proctor-agent/claude"]
//
//	[package]
//	npm = "@anthropic-ai/claude-code"
//	version = "2.1.328"
//	integrity = "sha512-…"
//	bin = "node_modules/@anthropic-ai/claude-code-linux-x64/claude"
//
//	[package.pins]
//	"@anthropic-ai/claude-code-linux-x64" = "sha512-…"
//
//	[env]
//	CLAUDE_CONFIG_DIR = "/tmp/proctor-agent/claude"
//
// Placeholders in args: {instruction} (the task's instruction, read from
// its file when the agent starts), {model} (the model's name as its
// provider knows it), {provider} and {layer} (where the installed package
// is mounted). ${NAME} in args and env values is the sandbox's variable
// NAME (a gateway's NAME_BASE_URL, say), expanded when the agent starts.
//
// Command turns a recipe, a provider and a model into the shell command the
// agent phase runs; it quotes every word, so nothing a recipe or a model
// name holds is read as shell syntax.
//
// What the package must never do:
//
//   - accept a recipe whose version is not pinned (a range, a tag such as
//     latest, a URL): the same recipe must install the same agent;
//   - accept a pinned recipe whose executable lies in a package it does
//     not pin (a platform package beside a pinned launcher);
//   - accept a recipe whose provider cannot go through a gateway: the real
//     key never enters the sandbox, so such an agent could not run;
//   - accept unknown keys, or a log directory outside /tmp (what lies there
//     is the harness's, never part of the changeset).
package recipe

# Sourced by the trial benchmarks: check the tools named, root, and build
# proctor into a fresh work directory ($work, removed on exit).
bench_setup() {
	local tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null || { echo "bench: $tool is missing (apt-get install $tool)" >&2; exit 1; }
	done
	[ "$(id -u)" = 0 ] || { echo "bench: proctor run needs root" >&2; exit 1; }
	work=$(mktemp -d /var/tmp/proctor-bench.XXXXXX)
	trap 'rm -rf "$work"' EXIT
	chmod 755 "$work"
	CGO_ENABLED=0 go build -trimpath -o "$work/proctor" ./cmd/proctor
}

# bench_baseline: with BASELINE=REV (a commit of this repository), build
# proctor at REV into $work/proctor-base, to be timed beside this tree's.
bench_baseline() {
	[ -n "${BASELINE:-}" ] || return 0
	git worktree add -q --detach "$work/base-src" "$BASELINE"
	(cd "$work/base-src" && CGO_ENABLED=0 go build -trimpath -o "$work/proctor-base" ./cmd/proctor)
	git worktree remove --force "$work/base-src"
}

# bench_oracle_agent SOLUTION DIR: an agent directory DIR that does the
# task's solution's work, as /agent/decode.sh. Carried as written, the
# solution would be found by the search for smuggled answers and the trial
# compromised (docs/trial.md): these benchmarks time a trial that does the
# oracle's work, so its files are carried base64-encoded (which the search
# does not read), decoded into the sandbox's /tmp/agent and run from there.
bench_oracle_agent() {
	local f
	mkdir -p "$2"
	for f in "$1"/*; do
		sed 's#/solution/#/tmp/agent/#g' "$f" | base64 > "$2/$(basename "$f").b64"
	done
	cat > "$2/decode.sh" <<'SH'
#!/bin/sh
set -e
mkdir -p /tmp/agent
for f in /agent/*.b64; do base64 -d "$f" > "/tmp/agent/$(basename "$f" .b64)"; done
chmod +x /tmp/agent/solve.sh
exec /tmp/agent/solve.sh
SH
	chmod -R a+rX "$2"
	chmod a+x "$2/decode.sh"
}

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

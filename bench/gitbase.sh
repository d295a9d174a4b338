#!/usr/bin/env bash
# The cost of building a task's sanitized git workspace (internal/workspace/
# gitbase) the first time, side by side in one run: `proctor run` of a task
# whose workspace is a git repository of real size (Go's own source tree
# and tests, in a few commits) with git_base set, its workspace cache
# emptied before every run, against `git clone --no-local` of the same
# repository and `git -C copy fsck` (what a copy-per-trial harness pays to
# get a repository, and to check it). The copy is cached by commit: later
# trials pay nothing of this.
#
#   bench/gitbase.sh [RUNS]        (root; needs hyperfine, git)
#
# BASELINE=REV also builds proctor at REV and times its build beside this
# tree's, in the same run.
set -euo pipefail
runs=${1:-10}
cd "$(dirname "$0")/.."

. bench/lib.sh
bench_setup hyperfine git
bench_baseline

goroot=$(go env GOROOT)
t="$work/task"
ws="$t/environment/workspace"
mkdir -p "$t/tests" "$ws"
printf '[environment]\nmemory_mb = 1024\n[proctor]\nrootfs = "host"\nworkspace = "environment/workspace"\ngit_base = "base"\n' > "$t/task.toml"
echo "Do nothing." > "$t/instruction.md"
printf '#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n' > "$t/tests/test.sh"
g() { git -C "$ws" -c gc.auto=0 -c user.name=bench -c user.email=bench@example.invalid "$@"; }
g init -q
cp -a "$goroot/src" "$ws/src"; g add -A; g commit -qm "src"
cp -a "$goroot/test" "$ws/test"; g add -A; g commit -qm "test"
cp -a "$goroot/misc" "$ws/misc" 2>/dev/null || true; g add -A; g commit -qm "misc" --allow-empty
g tag base
echo later > "$ws/later.txt"; g add -A; g commit -qm "later"
g gc -q
chmod -R a+rX "$t"
echo "bench: repository $(du -sh "$ws/.git" | cut -f1), $(g count-objects -v | awk '/^in-pack/ {print $2}') objects"

"$work/proctor" keygen "$work/key" >/dev/null
# run BINARY CACHE: a trial; cache-warm is never emptied.
run() { echo "$work/$1 run -q --key $work/key --task $t --agent true --out $work/out-$2 --cache-dir $work/cache-$2"; }
$(run proctor built) >/dev/null
$(run proctor warm) >/dev/null
base=()
if [ -n "${BASELINE:-}" ]; then
	$(run proctor-base base) >/dev/null
	base=(-n "baseline: trial, workspace built" "$(run proctor-base base)")
fi
hyperfine -N --runs "$runs" --export-json "$work/h.json" \
	--prepare "rm -rf $work/out-built $work/out-base $work/out-warm $work/cache-built/workspaces $work/cache-base/workspaces $work/clone" \
	-n "trial, workspace built" "$(run proctor built)" \
	"${base[@]}" \
	-n "git clone --no-local" "git clone -q --no-local $ws $work/clone" \
	-n "git clone --no-local + fsck" "sh -c 'git clone -q --no-local $ws $work/clone && git -C $work/clone fsck --no-progress'" \
	-n "trial, workspace cached" "$(run proctor warm)" >/dev/null

python3 - "$work/h.json" <<'PY'
import json, sys
res = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
med = {k: v["median"] * 1000 for k, v in res.items()}
for k, v in med.items():
    print(f"{k:<34} median {v:9.1f} ms")
new = med["trial, workspace built"] - med["trial, workspace cached"]
print(f"building the copy: {new:.0f} ms (trial with the copy built, less the trial with it cached)")
if "baseline: trial, workspace built" in med:
    print(f"this tree / baseline (trial, workspace built): {med['trial, workspace built'] / med['baseline: trial, workspace built']:.2f}x")
print(f"against git clone --no-local: {med['trial, workspace built'] / med['git clone --no-local']:.2f}x; with fsck: {med['trial, workspace built'] / med['git clone --no-local + fsck']:.2f}x")
PY

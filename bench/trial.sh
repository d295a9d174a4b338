#!/usr/bin/env bash
# The cost of one whole trial, and of preparing a big workspace, side by side
# in one run:
#
#   1. `proctor run` of a trivial task (do-nothing agent, one-line grader):
#      prepare, agent sandbox, freeze, grader sandbox, verdict;
#   2. the same with a 1 GiB, 50,000-file workspace: the difference is what
#      preparing that workspace costs (overlay layers, not copies), against
#      `cp -a` of the same tree, the copy a container-per-trial harness makes.
#
#   bench/trial.sh [RUNS]        (root; needs hyperfine, python3)
#
# BASELINE=REV (a commit of this repository) also builds proctor at REV and
# times its trials beside this tree's, in the same run.
set -euo pipefail
runs=${1:-30}
cd "$(dirname "$0")/.."

. bench/lib.sh
bench_setup hyperfine python3
bench_baseline

mktask() { # DIR: a task whose grader only writes a reward
	mkdir -p "$1/tests" "$1/environment/workspace"
	printf '[environment]\nmemory_mb = 1024\n[proctor]\nrootfs = "host"\n' > "$1/task.toml"
	echo "Do nothing." > "$1/instruction.md"
	printf '#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n' > "$1/tests/test.sh"
	chmod -R a+rX "$1"
}
mktask "$work/small"
echo 'print("hello")' > "$work/small/environment/workspace/main.py"
mktask "$work/big"
# 1 GiB in 50,000 files: 500 directories of 100 files of ~21 KiB.
python3 - "$work/big/environment/workspace" <<'PY'
import os, sys
root = sys.argv[1]
chunk = os.urandom(21475)
for d in range(500):
    p = os.path.join(root, f"d{d:03}")
    os.mkdir(p)
    for f in range(100):
        with open(os.path.join(p, f"f{f:03}.bin"), "wb") as fh:
            fh.write(chunk)
PY
chmod -R a+rX "$work/big"
du -sh "$work/big/environment/workspace" | sed 's/^/bench: workspace /'

"$work/proctor" keygen "$work/key" >/dev/null
run() { echo "$work/${2:-proctor} run -q --key $work/key --task $work/$1 --agent true --out $work/out-$1 --cache-dir $work/cache"; }
# Each must work once (and the digests get cached: the first digest of the
# host environment reads all of /usr) before timing.
$(run small) >/dev/null; rm -rf "$work/out-small"
$(run big) >/dev/null; rm -rf "$work/out-big"
base=()
if [ -n "${BASELINE:-}" ]; then
	$(run small proctor-base) >/dev/null; rm -rf "$work/out-small"
	$(run big proctor-base) >/dev/null; rm -rf "$work/out-big"
	base=(-n "baseline trial (trivial task)" "$(run small proctor-base)" -n "baseline trial (1 GiB workspace)" "$(run big proctor-base)")
fi

hyperfine -N --warmup 3 --runs "$runs" --export-json "$work/h.json" \
	--prepare "rm -rf $work/out-small $work/out-big $work/copy" \
	-n "trial (trivial task)" "$(run small)" \
	-n "trial (1 GiB workspace)" "$(run big)" \
	"${base[@]}" \
	-n "cp -a (1 GiB workspace)" "cp -a $work/big/environment/workspace $work/copy" >/dev/null

# The harness's own steps, as the verdicts record them (median over runs).
for i in $(seq 1 "$runs"); do
	rm -rf "$work/out-big"
	$(run big) >/dev/null
	cp "$work/out-big/verdict.json" "$work/verdict-$i.json"
done

python3 - "$work/h.json" "$work"/verdict-*.json <<'PY'
import json, statistics, sys
res = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
steps = {}
for f in sys.argv[2:]:
    v = json.load(open(f))
    for k, ms in v["timings_ms"].items():
        steps.setdefault(k, []).append(ms)
    for k, p in v["phases"].items():
        steps.setdefault(k + " phase", []).append(p["wall_ms"])
med = {k: v["median"] * 1000 for k, v in res.items()}
for k, v in med.items():
    print(f"{k:<26} median {v:9.1f} ms   mean {res[k]['mean']*1000:9.1f} ms")
small, big, cp = med["trial (trivial task)"], med["trial (1 GiB workspace)"], med["cp -a (1 GiB workspace)"]
for k in ("trivial task", "1 GiB workspace"):
    if f"baseline trial ({k})" in med:
        b = med[f"baseline trial ({k})"]
        print(f"this tree / baseline ({k}): {med[f'trial ({k})']:.1f} / {b:.1f} ms = {med[f'trial ({k})'] / b:.2f}x")
prep = max(big - small, 0.0)
print(f"trial difference (1 GiB workspace - trivial): {prep:.1f} ms; cp -a takes {cp:.0f} ms")
print("steps of the 1 GiB trial, medians from its verdicts (inputs: the digest before the agent; recheck: the same beside freeze and grading):")
for k in sorted(steps):
    print(f"  {k:<14} {statistics.median(steps[k]):7.1f} ms")
p = statistics.median(steps["prepare"]) + statistics.median(steps["layout"])
a = statistics.median(steps["agent phase"])
print(f"preparing the workspace: prepare + layout {p:.1f} ms; the overlays are mounted as the agent's sandbox starts,")
print(f"and the whole agent phase (sandbox start, overlay mounts, the agent, teardown) takes {a:.1f} ms: cp -a is {cp / a:.0f}x that")
PY

#!/usr/bin/env bash
# The suite runner's cost and scaling, and the report's time, side by side
# in one run:
#
#   1. N trivial trials (do-nothing agent, one-line grader) run one by one as
#      separate `proctor run` processes, against `proctor bench --jobs 1` and
#      `--jobs 2` on the same N trials: the runner's overhead per trial and
#      its scaling on this machine;
#   2. `proctor report` (json, html; bundles verified, no regrade) of a
#      suite of 10,000 trials (10 agents x 100 tasks x 10 trials), made by
#      bench/reportscale from copies of one real trial.
#
#   bench/suite.sh [N] [RUNS]        (root; needs hyperfine)
set -euo pipefail
n=${1:-10}
runs=${2:-5}
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup hyperfine

task=$work/task
mkdir -p "$task/tests" "$task/environment/workspace"
printf '[environment]\nmemory_mb = 512\n[proctor]\nrootfs = "host"\n' > "$task/task.toml"
echo "Do nothing." > "$task/instruction.md"
printf '#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n' > "$task/tests/test.sh"
echo 'print("hello")' > "$task/environment/workspace/main.py"
chmod -R a+rX "$task"
"$work/proctor" keygen "$work/key" >/dev/null
p="$work/proctor"
common="--key $work/key --cache-dir $work/cache"
# Once, untimed: the host scan and digests get cached.
$p run -q $common --task "$task" --agent true --out "$work/warm" >/dev/null || true

hyperfine -N --warmup 1 --runs "$runs" --export-json "$work/h.json" \
	--prepare "rm -rf $work/seq $work/b1 $work/b2" \
	-n "$n x proctor run" "sh -c 'for i in \$(seq $n); do $p run -q $common --task $task --agent true --out $work/seq/\$i >/dev/null || true; done'" \
	-n "proctor bench --jobs 1" "$p bench -q $common --tasks $task --agent a=true --trials $n --jobs 1 --out $work/b1" \
	-n "proctor bench --jobs 2" "$p bench -q $common --tasks $task --agent a=true --trials $n --jobs 2 --out $work/b2" >/dev/null
python3 - "$work/h.json" "$n" <<'PY'
import json, sys
rs = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
n = int(sys.argv[2])
seq = rs[f"{n} x proctor run"]["median"]
print(f"{n} trivial trials, medians:")
for name, r in rs.items():
    m = r["median"]
    print(f"  {name:24} {m*1000:8.0f} ms  {m*1000/n:6.1f} ms/trial  x{seq/m:.2f} vs one by one")
PY

# hyperfine's --prepare removed b1 before the last command: one more, untimed.
rm -rf "$work/b1"
$p bench -q $common --tasks "$task" --agent a=true --trials 1 --jobs 1 --out "$work/b1" >/dev/null
go run ./bench/reportscale -from "$work/b1" -out "$work/big" -agents 10 -tasks 100 -trials 10
hyperfine -N --warmup 1 --runs 3 \
	-n "report json, 10,000 trials" "$p report $work/big --format json --regrade 0 -o $work/r.json" \
	-n "report html, 10,000 trials" "$p report $work/big --format html --regrade 0 -o $work/r.html" 2>&1 |
	grep -E '^Benchmark|Time \(mean'

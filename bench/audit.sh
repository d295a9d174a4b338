#!/usr/bin/env bash
# What the audit costs a file-heavy agent, and what the egress proxy costs a
# transfer, side by side in one run:
#
#   1. `proctor run` of an agent that runs `git status`, a Python test run
#      importing and reading every file, and `find` over a 50,000-file git
#      workspace, with the audit on (the default: trap filesystem over the
#      hidden paths, seccomp notification of connects) and with --no-audit.
#      Reported: the agent phase's wall time (the verdict's
#      phases.agent.wall_ms) and the whole trial's, as medians, and their
#      ratio;
#   2. throughput of a 64 MiB transfer through the proxy's CONNECT tunnel
#      against a direct loopback connection (Go benchmark, medians of 5).
#
#   bench/audit.sh [RUNS]        (root; needs git, python3, hyperfine)
set -euo pipefail
runs=${1:-15}
cd "$(dirname "$0")/.."

. bench/lib.sh
bench_setup git python3 hyperfine

task=$work/task
mkdir -p "$task/tests" "$task/environment/workspace"
printf '[agent]\ntimeout_sec = 600\n[environment]\nmemory_mb = 4096\nstorage_mb = 2048\n[proctor]\nrootfs = "host"\n' > "$task/task.toml"
echo "Look around." > "$task/instruction.md"
printf '#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n' > "$task/tests/test.sh"
# 50,000 files: 500 packages of 100 small Python modules, and one test
# module per package that imports its package's modules.
python3 - "$task/environment/workspace" <<'PY'
import os, sys
root = sys.argv[1]
for d in range(500):
    p = os.path.join(root, f"pkg{d:03}")
    os.mkdir(p)
    open(os.path.join(p, "__init__.py"), "w").close()
    for f in range(99):
        with open(os.path.join(p, f"m{f:02}.py"), "w") as fh:
            fh.write(f"def f{f}(x):\n    return x + {f}\n" * 8)
with open(os.path.join(root, "test_all.py"), "w") as fh:
    fh.write("import importlib, unittest\n"
             "class T(unittest.TestCase):\n"
             "    def test_import(self):\n"
             "        for d in range(500):\n"
             "            for f in range(99):\n"
             "                importlib.import_module(f'pkg{d:03}.m{f:02}')\n")
PY
git -C "$task/environment/workspace" init -q
git -C "$task/environment/workspace" -c user.name=b -c user.email=b@b add -A
git -C "$task/environment/workspace" -c user.name=b -c user.email=b@b commit -qm base
# The trial rebuilds the repository at git_base (sanitized).
printf 'workspace = "environment/workspace"\ngit_base = "HEAD"\n' >> "$task/task.toml"
chmod -R a+rX "$task"
echo "bench: workspace of $(find "$task/environment/workspace" -path '*/.git' -prune -o -type f -print | wc -l) files"

agent='git status --porcelain | wc -l && PYTHONDONTWRITEBYTECODE=1 python3 -m unittest -q test_all 2>&1 | tail -1 && find . -type f | wc -l'
"$work/proctor" keygen "$work/key" >/dev/null
run() { echo "$work/proctor run -q --key $work/key --task $task --agent '$agent' --out $work/out-$1 --cache-dir $work/cache $2"; }
# Once each, untimed: workspaces and digests get cached.
eval "$(run on '')" >/dev/null; rm -rf "$work/out-on"
eval "$(run off --no-audit)" >/dev/null; rm -rf "$work/out-off"

# Alternate the two, so that drift hits both alike.
: > "$work/times"
for i in $(seq "$runs"); do
	for mode in on off; do
		flag=''; [ $mode = off ] && flag=--no-audit
		rm -rf "$work/out-$mode"
		start=$(date +%s%N)
		eval "$(run $mode "$flag")" >/dev/null || true
		end=$(date +%s%N)
		agent_ms=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["phases"]["agent"]["wall_ms"])' "$work/out-$mode/verdict.json")
		echo "$mode $agent_ms $(( (end - start) / 1000000 ))" >> "$work/times"
	done
done
python3 - "$work/times" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
def med(mode, col):
    return statistics.median(int(r[col]) for r in rows if r[0] == mode)
print(f"audit over {len(rows)//2} runs each (medians):")
for col, name in ((1, "agent phase"), (2, "whole trial")):
    on, off = med("on", col), med("off", col)
    print(f"  {name:12}  audit on {on:7.0f} ms   --no-audit {off:7.0f} ms   on/off {on/off:.3f} ({(on/off-1)*100:+.1f}%)")
PY

echo "proxy throughput, 64 MiB over loopback (go test -bench, 5 runs):"
go test -run '^$' -bench 'BenchmarkTunnelThroughput' -count 5 ./internal/netpolicy/ | grep -E '^Benchmark' | python3 -c '
import re, statistics, sys
by = {}
for l in sys.stdin:
    m = re.match(r"(Benchmark\S+?)(-\d+)?\s+\d+\s+[\d.]+ ns/op\s+([\d.]+) MB/s", l)
    if m:
        by.setdefault(m.group(1), []).append(float(m.group(3)))
for k, v in by.items():
    print(f"  {k:45} {statistics.median(v):9.1f} MB/s")
for way in ("up", "down"):
    d, p = by.get(f"BenchmarkTunnelThroughput/{way}/direct"), by.get(f"BenchmarkTunnelThroughput/{way}/proxy")
    if d and p:
        print(f"  {way:4} proxy/direct {statistics.median(p)/statistics.median(d):.2f}")
'

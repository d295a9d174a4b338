#!/usr/bin/env bash
# What it costs that a trial's storage is disk (internal/diskfs), side by
# side in one run:
#
#   1. `proctor run` of a trivial task (do-nothing agent, one-line grader)
#      with Terminal-Bench's default storage_mb = 10240, the sandboxes'
#      writable layers on disk (the default: an ext4 image per sandbox)
#      against the same trial on the tmpfs layers the disk replaced
#      (--storage memory); the difference is what the disk adds to a trial
#      (two sandboxes: the agent's and the grader's);
#   2. the steps of those trials as their verdicts record them: layout (the
#      agent's scratch space and layer directories) and each phase's wall
#      time (the grader's includes making its scratch space);
#   3. one sandbox's scratch space made and taken away, disk against tmpfs
#      (go test -bench Scratch ./internal/diskfs, template cached).
#
#   bench/storage.sh [RUNS]        (root; needs hyperfine, python3, mkfs.ext4)
set -euo pipefail
runs=${1:-30}
cd "$(dirname "$0")/.."

. bench/lib.sh
bench_setup hyperfine python3
[ -x /usr/sbin/mkfs.ext4 ] || command -v mkfs.ext4 >/dev/null || { echo "bench: mkfs.ext4 is missing (apt-get install e2fsprogs)" >&2; exit 1; }

task="$work/task"
mkdir -p "$task/tests" "$task/environment/workspace" "$work/scratch"
printf '[environment]\nmemory_mb = 2048\nstorage_mb = 10240\n[proctor]\nrootfs = "host"\n' > "$task/task.toml"
echo "Do nothing." > "$task/instruction.md"
printf '#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n' > "$task/tests/test.sh"
echo 'print("hello")' > "$task/environment/workspace/main.py"
chmod -R a+rX "$task"
df -hT "$work/scratch" | tail -1 | awk '{print "bench: scratch dir on " $2 " (" $1 ")"}'

"$work/proctor" keygen "$work/key" >/dev/null
run() { echo "$work/proctor run -q --key $work/key --task $task --agent true --out $work/out-$1 --cache-dir $work/cache --scratch-dir $work/scratch --storage $1"; }
# Each must work once (the host's digest and the disk's template get
# cached) before timing.
for s in disk memory; do $(run $s) >/dev/null; rm -rf "$work/out-$s"; done

hyperfine -N --warmup 3 --runs "$runs" --export-json "$work/h.json" \
	--prepare "rm -rf $work/out-disk $work/out-memory" \
	-n "trial, disk" "$(run disk)" \
	-n "trial, memory" "$(run memory)" >/dev/null

# The steps, as the verdicts record them, alternating the two.
for i in $(seq 1 "$runs"); do
	for s in disk memory; do
		rm -rf "$work/out-$s"
		$(run $s) >/dev/null
		cp "$work/out-$s/verdict.json" "$work/verdict-$s-$i.json"
	done
done

CGO_ENABLED=0 go test -run '^$' -bench Scratch -benchtime 200x -count 5 ./internal/diskfs > "$work/go-bench.txt"

python3 - "$work" "$runs" <<'PY'
import json, re, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
res = {r["command"]: r for r in json.load(open(f"{work}/h.json"))["results"]}
med = {k: v["median"] * 1000 for k, v in res.items()}
for k, v in med.items():
    print(f"{k:<14} median {v:8.1f} ms   mean {res[k]['mean']*1000:8.1f} ms")
d, m = med["trial, disk"], med["trial, memory"]
print(f"disk / memory: {d:.1f} / {m:.1f} ms = {d / m:.2f}x; the disk adds {d - m:.1f} ms to a trial (two sandboxes)")
steps = {}
for s in ("disk", "memory"):
    for i in range(1, runs + 1):
        v = json.load(open(f"{work}/verdict-{s}-{i}.json"))
        assert v["storage"]["backend"] == s, v["storage"]
        steps.setdefault(("layout", s), []).append(v["timings_ms"]["layout"])
        for p in ("agent", "grader"):
            steps.setdefault((p + " phase", s), []).append(v["phases"][p]["wall_ms"])
        steps.setdefault(("total", s), []).append(v["timings_ms"]["total"])
print("steps, medians from the verdicts:      disk    memory   disk/memory")
for k in ("layout", "agent phase", "grader phase", "total"):
    a, b = statistics.median(steps[(k, "disk")]), statistics.median(steps[(k, "memory")])
    print(f"  {k:<32} {a:7.1f} ms {b:7.1f} ms   {a / b if b else float('nan'):6.2f}")
ns = {}
for line in open(f"{work}/go-bench.txt"):
    m = re.match(r"BenchmarkScratch/(\w+)-\d+\s+\d+\s+([0-9.]+) ns/op", line)
    if m:
        ns.setdefault(m.group(1), []).append(float(m.group(2)))
a, b = statistics.median(ns["disk"]) / 1e6, statistics.median(ns["tmpfs"]) / 1e6
print(f"one sandbox's scratch space, made and taken away (median of 5 x 200): disk {a:.2f} ms, tmpfs {b:.2f} ms = {a / b:.1f}x")
PY

#!/usr/bin/env bash
# The cluster's costs, side by side in one run, on an embedded JetStream
# server (proctor cluster serve) on loopback:
#
#   1. Queue overhead: N trivial trials (do-nothing agent, one-line grader)
#      by a local `proctor bench --jobs 1`, against `proctor bench --cluster`
#      with one `proctor worker --jobs 1` (the same trials, one at a time).
#      The difference over N is what the queue adds to a trial: upload,
#      publish, delivery, fetching and checking the task, packing and
#      storing the output, the coordinator's fetch, unpack and verification.
#   2. Throughput on trials that mostly wait (agent: sleep S): M trials with
#      1, 2 and 4 worker processes of --jobs 1 each. Waiting trials keep
#      this machine's CPUs out of the way, so the workers' count is what
#      scales.
#   3. The coordinator's memory: its peak resident set (VmHWM) and its
#      anonymous memory (RssAnon: the heap, SQLite's page cache, buffers;
#      the rest is the binary's own pages) once 100, 1,000, 10,000 and
#      100,000 trials are queued with no worker to take them.
#
#   bench/cluster.sh [N] [RUNS] [M] [S]      (root; needs hyperfine)
#   PHASES=3 bench/cluster.sh                 runs only the phases named
set -euo pipefail
n=${1:-10}
runs=${2:-5}
m=${3:-12}
sleep_s=${4:-2}
phases=${PHASES:-123}
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup hyperfine python3

p="$work/proctor"
task=$work/task
mkdir -p "$task/tests" "$task/environment/workspace"
printf '[environment]\nmemory_mb = 512\n[proctor]\nrootfs = "host"\n' > "$task/task.toml"
echo "Do nothing." > "$task/instruction.md"
printf '#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n' > "$task/tests/test.sh"
echo 'print("hello")' > "$task/environment/workspace/main.py"
chmod -R a+rX "$task"
"$p" keygen "$work/key" >/dev/null
"$p" keygen "$work/coord" >/dev/null
cache="--cache-dir $work/cache"
coord="--key $work/coord"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url=nats://127.0.0.1:$port
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

serve() { # serve STORE: a fresh server on $port
	"$p" cluster serve --store "$1" --listen "127.0.0.1:$port" >"$work/serve.log" 2>&1 &
	server=$!
	pids+=("$server")
	for _ in $(seq 100); do "$p" cluster status --cluster "$url" >/dev/null 2>&1 && return; sleep 0.1; done
	echo "bench: the server did not start" >&2
	exit 1
}
workers=()
start_workers() { # start_workers K
	local i
	for i in $(seq "$1"); do
		"$p" worker --cluster "$url" --jobs 1 --name "w$i" --key "$work/key" --trust "$work/coord.pub" $cache -q >"$work/w$i.log" 2>&1 &
		workers+=("$!")
		pids+=("$!")
	done
	local tries=0
	until "$p" cluster status --cluster "$url" | grep -q "^workers: $1 live"; do
		sleep 0.2
		tries=$((tries + 1))
		[ "$tries" -lt 150 ] || { echo "bench: the workers did not start:" >&2; cat "$work"/w*.log >&2; exit 1; }
	done
}
stop_workers() {
	local pid
	for pid in "${workers[@]}"; do kill -INT "$pid"; done
	for pid in "${workers[@]}"; do wait "$pid" || true; done
	workers=()
}

serve "$work/nats"
# Once, untimed: the host scan, digests and the worker's task cache.
$p run -q --key "$work/key" $cache --task "$task" --agent true --out "$work/warm" >/dev/null || true

if [[ $phases == *1* ]]; then
echo "== 1. queue overhead: $n trivial trials, one at a time; medians of $runs"
start_workers 1
hyperfine -N --warmup 1 --runs "$runs" --export-json "$work/h1.json" \
	--prepare "rm -rf $work/local $work/clus" \
	-n "local bench --jobs 1" "$p bench -q --key $work/key $cache --tasks $task --agent a=true --trials $n --jobs 1 --regrade 0 --out $work/local" \
	-n "bench --cluster, 1 worker" "$p bench -q $cache --tasks $task --agent a=true --trials $n --regrade 0 --cluster $url $coord --trust $work/key.pub --out $work/clus" >/dev/null
stop_workers
python3 - "$work/h1.json" "$n" <<'PY'
import json, sys
rs = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
n = int(sys.argv[2])
loc, clu = rs["local bench --jobs 1"]["median"], rs["bench --cluster, 1 worker"]["median"]
for name, r in rs.items():
    print(f"  {name:28} {r['median']*1000:8.0f} ms  {r['median']*1000/n:6.1f} ms/trial")
print(f"  queue overhead: {(clu-loc)*1000/n:.1f} ms/trial (x{clu/loc:.2f} the local run)")
PY
fi

if [[ $phases == *2* ]]; then
echo "== 2. throughput: $m trials of 'sleep $sleep_s', 1, 2 and 4 workers of one job; medians of 3"
for k in 1 2 4; do
	start_workers "$k"
	hyperfine -N --runs 3 --export-json "$work/h2-$k.json" --prepare "rm -rf $work/tp" \
		-n "$k worker(s)" "$p bench -q $cache --tasks $task --agent \"a=sleep $sleep_s\" --trials $m --regrade 0 --cluster $url $coord --trust $work/key.pub --out $work/tp" >/dev/null
	stop_workers
done
python3 - "$work" "$m" "$sleep_s" <<'PY'
import json, sys
work, m, s = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
base = None
for k in (1, 2, 4):
    med = json.load(open(f"{work}/h2-{k}.json"))["results"][0]["median"]
    tp = m / med
    base = base or tp
    print(f"  {k} worker(s): {med:6.2f} s  {tp*60:6.1f} trials/min  x{tp/base:.2f} vs 1 worker  (ideal {m*s/k:.1f} s)")
PY
fi

[[ $phases == *3* ]] || exit 0
echo "== 3. coordinator memory with trials queued and no worker"
kill -INT "$server"; wait "$server" || true
for q in 100 1000 10000 100000; do
	serve "$work/nats-$q"
	start=$(date +%s.%N)
	$p bench -q $cache --tasks "$task" --agent a=true --trials "$q" --regrade 0 --cluster "$url" $coord --trust "$work/key.pub" --out "$work/mem-$q" 2>/dev/null &
	cpid=$!
	until "$p" cluster status --cluster "$url" | grep -q "^queue: $q trial(s) not yet acked: $q waiting"; do sleep 0.2; done
	end=$(date +%s.%N)
	sleep 1 # settled
	hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$cpid/status")
	rss=$(awk '/^RssAnon/ {print $2}' "/proc/$cpid/status")
	awk -v q="$q" -v h="$hwm" -v r="$rss" -v s="$start" -v e="$end" 'BEGIN {
		printf "  %6d queued: peak RSS %6.1f MB, anonymous %6.1f MB; planned and published in %.1f s\n", q, h/1024, r/1024, e-s }'
	kill -INT "$cpid"; wait "$cpid" 2>/dev/null || true
	kill -INT "$server"; wait "$server" || true
done

#!/usr/bin/env bash
# A Terminal-Bench 2 task as published (examples/tb/sales-report, built
# from its Dockerfile), one whole trial: `proctor run` against the same
# image started and graded with podman as Harbor does with Docker (podman
# run; podman exec of the agent, then of the verifier; the reward read;
# the container removed). Then the hermetic grader against a networked
# one. Side by side in one run; prints medians and ratios.
#
#   bench/tb.sh [RUNS]      (root; needs hyperfine, go, podman, runc, mmdebstrap)
#
# Same image: Proctor builds it (proctor image build), and podman loads
# the built root as a docker-save archive (mkimage -keep-owners). Same
# verifier work: the published test.sh, its fetches (apt-get update and
# install from the Debian mirror, astral.sh's installer, uv from github.com,
# pytest from pypi.org) recorded once by Proctor's learning run, then
# replayed on both sides by the same replayer on loopback (Proctor's
# grader gets it in its sandbox; podman's container the same proxy with
# --network=host, bench/replayproxy), so neither side waits on the
# internet and both fetch the same bytes. The networked rows fetch live:
# Proctor's first trial (learning: the recorder fetches from the mirror
# and the stand-in, then the grade is replayed), and podman's verifier
# fetching from the mirror and from the stand-in directly.
#
# podman: Debian's podman 4.3 with runc (crun refuses this hybrid-cgroup
# VM), lowered ulimits (no CAP_SYS_RESOURCE to raise them).
set -euo pipefail
runs=${1:-5}
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup hyperfine podman mmdebstrap
command -v runc >/dev/null || { echo "bench: runc is missing (apt-get install runc): podman's crun refuses this machine" >&2; exit 1; }
p="$work/proctor"
c="--cache-dir $work/cache"
pod="podman --runtime runc"
task=$PWD/examples/tb/sales-report
mirrors=$(sh examples/tb/debian-sources.sh --hosts)
"$p" keygen "$work/key" >/dev/null

# The base and the task's image.
bash examples/tb/base-image.sh "$p" $c >/dev/null
build=(image build -q $c -t proctor-bench/sales-report:1)
for h in $mirrors; do build+=(--allow-host "$h"); done
digest=$("$p" "${build[@]}" "$task/environment" | awk '{print $1}')
rootfs=$work/cache/images/sha256/${digest#sha256:}/rootfs
[ -d "$rootfs" ] || { echo "bench: no rootfs for $digest" >&2; exit 1; }
go run ./examples/images/mkimage -from "$rootfs" -keep-owners -workdir /app -cmd /bin/bash -tag proctor-bench/sales-report:1 -o "$work/image.tar"
$pod load -q -i "$work/image.tar" >/dev/null

# The stand-in internet, at 127.0.0.1:443 so that podman's container can
# reach it by name (--add-host); its pytest is Debian trixie's.
pytest=$(bash examples/tb/pytest-trixie.sh)
go build -o "$work/internet" ./examples/tb/internet
go build -o "$work/replayproxy" ./bench/replayproxy
"$work/internet" -q -addr 127.0.0.1:443 -dir "$work/inet" -pytest-from "$pytest" >"$work/inet.flags" &
inet_pid=$!
trap 'kill $inet_pid ${replay_pid:-} 2>/dev/null; $pod rmi -f proctor-bench/sales-report:1 >/dev/null 2>&1; rm -rf "$work"' EXIT
for i in $(seq 50); do [ -s "$work/inet.flags" ] && break; sleep 0.1; done
read -r -a net <"$work/inet.flags"
for h in $mirrors; do net+=(--verifier-allow-host "$h" --build-allow-host "$h"); done

bench_oracle_agent "$task/solution" "$work/agent"
run="$p run -q --key $work/key $c --task $task --agent /agent/decode.sh --agent-dir $work/agent ${net[*]}"
# The first trial learns (the recorder fetches); keep it for the replay.
eval "$run --out $work/first" >/dev/null
"$work/replayproxy" -store "$work/cache/hermetic" -trial "$work/first" -system "$rootfs/etc/ssl/certs/ca-certificates.crt" \
	-trust "$work/trust.pem" -env "$work/replay.env" >"$work/replay.addr" &
replay_pid=$!
for i in $(seq 50); do [ -s "$work/replay.addr" ] && break; sleep 0.1; done
cat "$rootfs/etc/ssl/certs/ca-certificates.crt" "$work/inet/ca.pem" >"$work/live.pem"
printf 'SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt\n' >"$work/live.env"
hostsargs=$(for h in astral.sh github.com pypi.org files.pythonhosted.org; do printf -- '--add-host %s:127.0.0.1 ' "$h"; done)

# One podman trial, as Harbor runs one with Docker: a container of the
# task's image, the agent and then the verifier exec'd in it, the reward
# read, the container removed. ENV: replay.env or live.env; TRUST: the CA
# bundle mounted over the image's.
cat >"$work/podman-trial.sh" <<SH
#!/bin/bash
set -e
env=\$1 trust=\$2
id=\$($pod run -d --network=host $hostsargs --env-file "\$env" -v "\$trust:/etc/ssl/certs/ca-certificates.crt:ro" \
	-v $task/solution:/solution:ro -v $task/tests:/tests:ro --ulimit nofile=1024:1024 --ulimit nproc=4000:4000 \
	proctor-bench/sales-report:1 sleep infinity)
$pod exec "\$id" bash /solution/solve.sh
$pod exec "\$id" mkdir -p /logs/verifier
s=\$(date +%s%N)
$pod exec -w /app "\$id" bash /tests/test.sh >$work/podman-verifier.log 2>&1 || true
echo \$(( (\$(date +%s%N) - s) / 1000000 )) >>"\$env.verifier-ms"
reward=\$($pod exec "\$id" cat /logs/verifier/reward.txt)
$pod rm -f -t 0 "\$id" >/dev/null
[ "\$reward" = 1 ] || { echo "podman trial: reward \$reward" >&2; exit 1; }
SH
chmod +x "$work/podman-trial.sh"
# Both sides pass before anything is timed.
eval "$run --out $work/check" >/dev/null
"$work/podman-trial.sh" "$work/replay.env" "$work/trust.pem"
"$work/podman-trial.sh" "$work/live.env" "$work/live.pem"

h() { hyperfine --export-json "$work/$1.json" "${@:2}" >/dev/null; }
# The grader's time (the verifier in its sandbox) of each trial, kept
# before the next: the rest of a trial is the harness's.
grader="python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]][sys.argv[3]][sys.argv[4]])' $work/o/verdict.json phases grader wall_ms >>$work/grader-ms 2>/dev/null"
h prun --warmup 1 --runs "$runs" --prepare "$grader; rm -rf $work/o" -n "proctor run (replayed verifier)" "$run --out $work/o"
eval "$grader"
rm -f "$work"/*.verifier-ms
h podrun --warmup 1 --runs "$runs" -n "podman run + exec (replayed verifier)" "$work/podman-trial.sh $work/replay.env $work/trust.pem"
h plearn --runs "$runs" --prepare "rm -rf $work/o $work/cache/tooling $work/cache/hermetic/recordings" \
	-n "proctor run, learning (recorder live)" "$run --out $work/o"
h podlive --runs "$runs" -n "podman run + exec (verifier live)" "$work/podman-trial.sh $work/live.env $work/live.pem"
kill "$replay_pid"; wait "$replay_pid" 2>/dev/null || true

python3 - "$work" <<'PY'
import json, os, statistics, sys
w = sys.argv[1]
def med(name):
    return statistics.median(json.load(open(os.path.join(w, name + ".json")))["results"][0]["times"]) * 1000
v = json.load(open(os.path.join(w, "o", "verdict.json")))
print("medians:")
pr, po = med("prun"), med("podrun")
print(f"  one trial, verifier replayed on both sides   proctor {pr:8.1f} ms   podman {po:8.1f} ms   podman/proctor {po / pr:5.2f}")
ms = lambda f: statistics.median(int(x) for x in open(os.path.join(w, f)).read().split()[1:])
gr, pver = ms("grader-ms"), ms("replay.env.verifier-ms")
print(f"  of which grading (the verifier run)          proctor {gr:8.1f} ms   podman {pver:8.1f} ms")
print(f"  the rest: the harness's own                  proctor {pr - gr:8.1f} ms   podman {po - pver:8.1f} ms   podman/proctor {(po - pver) / (pr - gr):5.2f}")
pl, pv = med("plearn"), med("podlive")
print(f"  verifier fetching live                       proctor (first trial: learn, then replay) {pl:8.1f} ms   podman {pv:8.1f} ms")
print(f"  hermetic against networked                   proctor: later/first trial {pr / pl:5.2f}   podman: replayed/live {po / pv:5.2f}")
print(f"  proctor's last first trial: the learning run (verifier through the recorder, traced) {v['timings_ms'].get('tooling', 0)} ms, then its grading, replayed, {v['phases']['grader']['wall_ms']} ms")
PY

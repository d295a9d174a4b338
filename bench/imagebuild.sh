#!/usr/bin/env bash
# Building an image from a Dockerfile: `proctor image build` against
# Debian's `podman build` on the same Dockerfile, context and base image,
# cold (no step cached) and warm (every step cached), side by side in one
# run. Prints medians and ratios.
#
#   bench/imagebuild.sh [RUNS]     (root; needs hyperfine, busybox, go, podman)
#
# podman: Debian's podman 4.3 with runc (apt-get install podman runc).
# On this hybrid-cgroup VM it picks runc and the cgroupfs manager by
# itself and builds as root with the overlay driver; crun, if installed,
# refuses the machine ("cgroups in hybrid mode not supported"), so runc
# is asked for by name.
set -euo pipefail
runs=${1:-5}
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup hyperfine busybox podman
command -v runc >/dev/null || { echo "bench: runc is missing (apt-get install runc): podman's crun refuses this machine" >&2; exit 1; }
p="$work/proctor"
pod="podman --runtime runc"

# The base: static busybox and its applets, the same archive for both.
root=$work/rootfs
mkdir -p "$root/bin" "$root/etc" "$root/tmp"
cp "$(command -v busybox)" "$root/bin/busybox"
for a in $(busybox --list); do [ "$a" = busybox ] || ln -s busybox "$root/bin/$a"; done
echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
chmod 1777 "$root/tmp"
go run ./examples/images/mkimage -from "$root" -tag proctor-bench/bbase:1 -o "$work/base.tar"
"$p" image import --cache-dir "$work/cache" "$work/base.tar" >/dev/null
$pod load -q -i "$work/base.tar" >/dev/null

# A context like a task's: 2,000 source files (~16 MB) and a config.
ctx=$work/ctx
mkdir -p "$ctx/src"
for d in $(seq 0 19); do
	mkdir -p "$ctx/src/d$d"
	for i in $(seq 0 99); do head -c 8192 /dev/urandom | base64 > "$ctx/src/d$d/f$i.txt"; done
done
echo "key = value" > "$ctx/app.conf"
printf 'src/d19/f99.txt\n' > "$ctx/.dockerignore"
cat > "$ctx/Dockerfile" <<'EOF'
FROM proctor-bench/bbase:1
WORKDIR /app
COPY src/ /app/src/
RUN find src -type f | sort | xargs cat | sha256sum > /app/sum && mkdir -p /opt/gen && for i in $(seq 500); do echo $i > /opt/gen/f$i; done
RUN rm -rf /app/src/d0 && chmod -R a-w /opt/gen
COPY app.conf /etc/app.conf
CMD ["/bin/sh"]
EOF
du -sh "$ctx" | awk '{print "bench: context " $1}'

h() { hyperfine -N --export-json "$work/$1.json" "${@:2}" >/dev/null; }
build="$p image build -q --cache-dir $work/cache -t proctor-bench/built:1 $ctx"
# Cold: no step cached and the built image gone (the base stays stored).
h pcold --runs "$runs" --prepare "sh -c 'rm -rf $work/cache/build; $p image rm --cache-dir $work/cache proctor-bench/built:1 2>/dev/null || true'" \
	-n "proctor image build (cold)" "$build"
h pwarm --warmup 1 --runs "$runs" -n "proctor image build (warm)" "$build"
h podcold --runs "$runs" --prepare "sh -c '$pod rmi -f proctor-bench/built:1 >/dev/null 2>&1; true'" \
	-n "podman build (cold)" "$pod build -q --no-cache -t proctor-bench/built:1 $ctx"
h podwarm --warmup 1 --runs "$runs" -n "podman build (warm)" "$pod build -q -t proctor-bench/built:1 $ctx"

# Both built the same files.
$build >/dev/null 2>&1 || true
pr=$(ls -d "$work"/cache/images/sha256/*/rootfs | while read -r d; do [ -f "$d/app/sum" ] && echo "$d"; done | head -n 1)
echo "bench: proctor /app/sum $(cat "$pr/app/sum")"
echo "bench: podman  /app/sum $($pod run --rm --network=none --ulimit nofile=1024:1024 --ulimit nproc=1000:1000 proctor-bench/built:1 cat /app/sum 2>&1 | tail -1 || echo '(podman run failed here)')"
$pod rmi -f proctor-bench/built:1 proctor-bench/bbase:1 >/dev/null 2>&1 || true
$pod image prune -f >/dev/null 2>&1 || true

python3 - "$work" <<'PY'
import json, os, statistics, sys
w = sys.argv[1]
def med(name):
    return statistics.median(json.load(open(os.path.join(w, name + ".json")))["results"][0]["times"]) * 1000
print("medians:")
for label, a, b in (("cold (no step cached)", "pcold", "podcold"), ("warm (every step cached)", "pwarm", "podwarm")):
    pv, qv = med(a), med(b)
    print(f"  {label:<26} proctor {pv:8.1f} ms   podman {qv:8.1f} ms   podman/proctor {qv / pv:5.2f}")
PY

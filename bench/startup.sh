#!/usr/bin/env bash
# Startup cost of one sandbox, side by side in one run: proctor exec against
# bubblewrap and unshare, each running /bin/true in the same busybox rootfs.
# Prints each median, the ratios to proctor, and proctor's peak RSS.
#
#   bench/startup.sh [RUNS]        (root; needs hyperfine, bwrap, busybox-static)
set -euo pipefail
runs=${1:-200}
cd "$(dirname "$0")/.."

for tool in hyperfine bwrap busybox unshare python3; do
	command -v "$tool" >/dev/null || { echo "bench: $tool is missing (apt-get install hyperfine bubblewrap busybox-static)" >&2; exit 1; }
done

work=$(mktemp -d /tmp/proctor-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
CGO_ENABLED=0 go build -trimpath -o "$work/proctor" ./cmd/proctor

# A busybox rootfs; proc, dev and tmp exist because bwrap mounts onto them.
root="$work/rootfs"
mkdir -p "$root/bin" "$root/proc" "$root/dev" "$root/tmp" "$root/etc"
cp "$(command -v busybox)" "$root/bin/busybox"
for app in sh true; do ln -s busybox "$root/bin/$app"; done
chmod -R a+rX "$root"

proctor="$work/proctor exec --rootfs $root -- /bin/true"
bwrap="bwrap --unshare-all --ro-bind $root / --proc /proc --dev /dev /bin/true"
unshare="unshare --user --map-root-user --mount --pid --fork --net --ipc --uts /bin/true"

# Each must work before it is timed.
$proctor && $bwrap && $unshare

hyperfine -N --warmup 20 --runs "$runs" --export-json "$work/h.json" \
	-n proctor "$proctor" -n bwrap "$bwrap" -n unshare "$unshare" >/dev/null

# Peak RSS of the supervisor (GNU time is not always there: use wait4's rusage).
rss_kb=$(python3 - "$work/proctor" "$root" <<'PY'
import os, resource, subprocess, sys
peaks = []
for _ in range(20):
    p = subprocess.Popen([sys.argv[1], "exec", "--rootfs", sys.argv[2], "--", "/bin/true"])
    _, _, ru = os.wait4(p.pid, 0)
    peaks.append(ru.ru_maxrss)
peaks.sort()
print(peaks[len(peaks) // 2])
PY
)

python3 - "$work/h.json" "$rss_kb" <<'PY'
import json, sys
res = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
med = {k: v["median"] * 1000 for k, v in res.items()}
print(f"{'sandbox':<10} {'median':>9} {'mean':>9} {'proctor/x':>10}")
for k in ("proctor", "bwrap", "unshare"):
    print(f"{k:<10} {med[k]:>7.2f}ms {res[k]['mean']*1000:>7.2f}ms {med['proctor']/med[k]:>10.2f}")
print(f"proctor supervisor peak RSS (median of 20): {int(sys.argv[2]) / 1024:.1f} MiB")
PY

#!/usr/bin/env bash
# Images without a daemon: importing a ~500 MB image, then the first and the
# second trial on it, side by side with podman (load, run) when podman is
# installed. Prints medians and ratios.
#
#   bench/image.sh [RUNS]        (root; needs hyperfine, busybox, go)
set -euo pipefail
runs=${1:-5}
cd "$(dirname "$0")/.."
. bench/lib.sh
bench_setup hyperfine busybox

root=$work/rootfs
mkdir -p "$root/bin" "$root/etc" "$root/tmp" "$root/app" "$root/data"
cp "$(command -v busybox)" "$root/bin/busybox"
for a in $(busybox --list); do [ "$a" = busybox ] || ln -s busybox "$root/bin/$a"; done
echo 'root:x:0:0:root:/root:/bin/sh' > "$root/etc/passwd"
# ~500 MB in 500 files of 1 MiB that do not compress.
for i in $(seq 500); do head -c 1048576 /dev/urandom > "$root/data/f$i"; done
go run ./examples/images/mkimage -from "$root" -tag proctor-bench/big:1 -o "$work/big.tar"
ls -la "$work/big.tar" | awk '{printf "bench: image archive %.0f MB\n", $5/1048576}'

task=$work/task
mkdir -p "$task/tests"
printf '[environment]\ndocker_image = "proctor-bench/big:1"\nmemory_mb = 512\n' > "$task/task.toml"
echo "Do nothing." > "$task/instruction.md"
printf '#!/bin/sh\necho 1 > /logs/verifier/reward.txt\n' > "$task/tests/test.sh"
chmod -R a+rX "$task"
p="$work/proctor"
"$p" keygen "$work/key" >/dev/null

h() { hyperfine -N --export-json "$work/$1.json" "${@:2}" >/dev/null; }
h import --runs "$runs" --prepare "rm -rf $work/cache" \
	-n "proctor image import (500 MB)" "$p image import --cache-dir $work/cache $work/big.tar"

# The first trial on a freshly imported image, then the next ones.
: >"$work/first.txt"
for i in $(seq "$runs"); do
	rm -rf "$work/cache" "$work/o"
	"$p" image import --cache-dir "$work/cache" "$work/big.tar" >/dev/null
	s=$(date +%s%N)
	"$p" run -q --key "$work/key" --cache-dir "$work/cache" --task "$task" --agent true --out "$work/o" >/dev/null
	e=$(date +%s%N)
	echo $(( (e - s) / 1000 )) >>"$work/first.txt"
done
h later --warmup 1 --runs "$runs" --prepare "rm -rf $work/o2" \
	-n "later trials" "$p run -q --key $work/key --cache-dir $work/cache --task $task --agent true --out $work/o2"
rootfs=$(ls -d "$work"/cache/images/sha256/*/rootfs | head -n 1)
h exec --warmup 2 --runs "$runs" -n "proctor exec (the image's root) true" "$p exec --rootfs $rootfs -- /bin/true"

prun=""
if command -v podman >/dev/null; then
	h load --runs "$runs" --prepare "podman rmi -f proctor-bench/big:1" \
		-n "podman load (500 MB)" "podman load -q -i $work/big.tar"
	podman load -q -i "$work/big.tar" >/dev/null
	# Lower ulimits: the runtime cannot raise them here (no CAP_SYS_RESOURCE).
	# crun refuses this hybrid-cgroup machine; runc, where installed, runs.
	for rt in "" "--runtime runc"; do
		try="podman $rt run --rm --network=none --ulimit nofile=1024:1024 --ulimit nproc=1000:1000 proctor-bench/big:1 true"
		if err=$($try 2>&1); then
			prun=$try
			break
		fi
		echo "bench: podman ${rt:+($rt) }run does not work on this machine: $(echo "$err" | tail -1)"
	done
	if [ -n "$prun" ]; then
		echo "bench: $prun"
		h prun --warmup 2 --runs "$runs" -n "podman run --network=none true" "$prun"
	fi
	podman rmi -f proctor-bench/big:1 >/dev/null
else
	echo "bench: podman is not installed (apt-get install podman): no side-by-side figures"
fi

python3 - "$work" <<'PY'
import json, os, statistics, sys
w = sys.argv[1]
def med(name):
    p = os.path.join(w, name + ".json")
    return statistics.median(json.load(open(p))["results"][0]["times"]) * 1000 if os.path.exists(p) else None
first = statistics.median(int(x) / 1000 for x in open(os.path.join(w, "first.txt")))
rows = [("proctor image import (500 MB)", med("import"), med("load"), "podman load"),
        ("first trial on the image (whole proctor run)", first, med("prun"), "podman run"),
        ("later trials (whole proctor run)", med("later"), med("prun"), "podman run"),
        ("proctor exec on the image's root", med("exec"), med("prun"), "podman run")]
print("medians:")
for name, v, peer, pname in rows:
    line = f"  {name:<46} {v:9.1f} ms"
    if peer is not None:
        line += f"   {pname} {peer:9.1f} ms   {pname}/proctor {peer / v:5.2f}"
    print(line)
PY

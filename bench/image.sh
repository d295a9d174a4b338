#!/usr/bin/env bash
# Images without a daemon: importing a ~500 MB image, then the first and the
# second trial on it, side by side with podman (load, run) when podman is
# installed.
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

hyperfine -N --runs "$runs" --prepare "rm -rf $work/cache" \
	-n "proctor image import (500 MB)" "$p image import --cache-dir $work/cache $work/big.tar" 2>&1 | grep -E '^Benchmark|Time \(mean|Range'

# The first trial on a freshly imported image, then the next ones.
first=()
for i in $(seq "$runs"); do
	rm -rf "$work/cache" "$work/o"
	"$p" image import --cache-dir "$work/cache" "$work/big.tar" >/dev/null
	s=$(date +%s%N)
	"$p" run -q --key "$work/key" --cache-dir "$work/cache" --task "$task" --agent true --out "$work/o" >/dev/null
	e=$(date +%s%N)
	first+=($(( (e - s) / 1000000 )))
done
printf 'bench: first trial on the image, ms: %s\n' "${first[*]}"
hyperfine -N --warmup 1 --runs "$runs" --prepare "rm -rf $work/o2" \
	-n "second and later trials" "$p run -q --key $work/key --cache-dir $work/cache --task $task --agent true --out $work/o2" 2>&1 |
	grep -E '^Benchmark|Time \(mean|Range'

if command -v podman >/dev/null; then
	hyperfine -N --runs "$runs" --prepare "podman rmi -f proctor-bench/big:1" \
		-n "podman load (500 MB)" "podman load -q -i $work/big.tar" 2>&1 | grep -E '^Benchmark|Time \(mean|Range'
	podman load -q -i "$work/big.tar" >/dev/null
	# Lower ulimits: crun cannot raise them here (no CAP_SYS_RESOURCE).
	prun="podman run --rm --network=none --ulimit nofile=1024:1024 --ulimit nproc=1000:1000 proctor-bench/big:1 true"
	if err=$($prun 2>&1); then
		hyperfine -N --warmup 1 --runs "$runs" -n "podman run --network=none true" "$prun" 2>&1 | grep -E '^Benchmark|Time \(mean|Range'
	else
		echo "bench: podman run does not work on this machine: $(echo "$err" | tail -1)"
	fi
else
	echo "bench: podman is not installed (apt-get install podman): no side-by-side figures"
fi

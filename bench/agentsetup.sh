#!/usr/bin/env bash
# Agent setup per trial, side by side in one run, for each recipe named
# (default claude-code and codex):
#
#   1. Proctor: the recipe's layer, installed once per recipe digest, found
#      in the cache and mounted read-only: `proctor agent install NAME` (a
#      cache hit), then the agent's executable prints its version in a
#      sandbox over the layer (`proctor exec --bind LAYER:/proctor/agent`);
#   2. as Harbor does: the same pinned package installed in every trial
#      (`npm install` of the recipe's package and version into a fresh
#      prefix with an empty npm cache, install scripts off), then the same
#      executable prints its version.
#
# Both reach the registry through this machine's ordinary npm client and
# configuration; the install of (2) is what each of Harbor's trials pays.
#
#   bench/agentsetup.sh [RUNS] [RECIPE...]     (root; needs hyperfine, npm, python3)
set -euo pipefail
runs=${1:-5}
shift || true
recipes=("$@")
[ ${#recipes[@]} -gt 0 ] || recipes=(claude-code codex)
cd "$(dirname "$0")/.."

. bench/lib.sh
bench_setup hyperfine python3 npm

cache="$work/cache"
args=()
for r in "${recipes[@]}"; do
	"$work/proctor" agent install --cache-dir "$cache" "$r" > "$work/install-$r.txt" 2>/dev/null
	layer=$(sed -n 's/.* in \(\/.*\/layer\)$/\1/p' "$work/install-$r.txt")
	read -r npmpkg version bin < <(python3 - "$r" <<'PY'
import sys, tomllib
r = tomllib.load(open(f"internal/recipe/recipes/{sys.argv[1]}.toml", "rb"))
print(r["package"]["npm"], r["package"]["version"], r["package"]["bin"])
PY
)
	cached="$work/proctor agent install --cache-dir $cache $r && $work/proctor exec --bind $layer:/proctor/agent --env HOME=/tmp -- /proctor/agent/$bin --version"
	fresh="d=\$(mktemp -d $work/npm.XXXXXX) && npm install --prefix \$d/p --cache \$d/c --ignore-scripts --no-audit --no-fund --loglevel=error $npmpkg@$version >/dev/null && \$d/p/$bin --version; rm -rf \$d"
	args+=(-n "$r: cached layer" "$cached" -n "$r: npm install per trial" "$fresh")
done

hyperfine --warmup 1 --runs "$runs" --export-json "$work/h.json" "${args[@]}" >/dev/null

python3 - "$work/h.json" <<'PY'
import json, sys
res = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
names = sorted({k.split(": ")[0] for k in res})
for n in names:
    a, b = res[f"{n}: cached layer"], res[f"{n}: npm install per trial"]
    ma, mb = a["median"] * 1000, b["median"] * 1000
    print(f"{n:<12} cached layer median {ma:9.1f} ms   npm install per trial median {mb:9.1f} ms   = {mb / ma:6.1f}x")
PY

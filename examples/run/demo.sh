#!/usr/bin/env bash
# The main job on the bundled examples: validate each example task (its
# solution passes, a do-nothing agent fails), then run the honest agent and
# every cheating agent through `proctor run`, one trial each, and print the
# verdicts. Every cheat must fail.
#   examples/run/demo.sh [PATH-TO-PROCTOR]   (as root)
set -euo pipefail
proctor=${1:-proctor}
cd "$(dirname "$0")/.."
out=${PROCTOR_DEMO_OUT:-$(mktemp -d /tmp/proctor-demo.XXXXXX)}
say() { printf '\n\033[1m%s\033[0m\n' "$*"; }

# git cannot carry a repository inside this one: build the git example's.
sh tasks/git-history/environment/make-workspace.sh

say "proctor validate: each task's solution must pass, a do-nothing agent must fail"
for t in py-bugfix hello-state git-history; do
	"$proctor" validate -q "tasks/$t"
done

trial() { # TASK AGENT [TASKS-DIR [PROCTOR-RUN-FLAGS...]]: the task is TASKS-DIR/TASK (tasks/ by default)
	local task=$1 agent=$2 tasks=${3:-tasks} dir="$out/$1-$2"
	shift $(($# < 3 ? $# : 3))
	"$proctor" run -q --task "$tasks/$task" --agent "sh /agent/$agent.sh" --agent-dir agents --out "$dir" "$@" || true
	python3 - "$dir/verdict.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
for x in v["violations"][:3]:
    print(f"    violation {x['kind']}: {x['path']}")
PY
}

say "proctor run: the honest agent"
for t in py-bugfix hello-state git-history; do trial "$t" honest; done

say "proctor run: the cheats (each must FAIL)"
trial py-bugfix read-tests
trial git-history mine-git
trial py-bugfix network
trial py-bugfix prewrite-reward
trial py-bugfix daemon
trial hello-state trojan
trial py-bugfix symlinks
trial py-bugfix conftest
trial py-bugfix kill-verifier
trial py-bugfix trace-verifier

say "proctor run --model-gateway: the agent gets its model, never the key"
export FAKE_API_KEY=demo-real-key-$RANDOM$RANDOM
coproc provider { exec python3 run/fake-provider.py; }
read -r port <&"${provider[0]}"
"$proctor" run -q --task tasks/py-bugfix --agent "sh /agent/model-thief.sh" --agent-dir agents \
	--model-gateway "fake=http://127.0.0.1:$port/v1" --out "$out/py-bugfix-model-thief" || true
sed 's/^/    agent: /' "$out/py-bugfix-model-thief/agent.log"
kill "$provider_PID" 2>/dev/null || true
unset FAKE_API_KEY

say "Terminal-Bench 2 tasks as published, built from their Dockerfiles, without a Docker daemon"
# The tasks' base image, from the host's Debian mirror (kept once made);
# their Dockerfiles install python3 and curl from the same mirror, which is
# all the builds may reach.
bash tb/base-image.sh "$proctor"
mirrors=$(sh tb/debian-sources.sh --hosts)
# The verifiers fetch their tools (apt-get, curl | sh, uvx): from the host's
# Debian mirror, and from a stand-in on loopback for astral.sh, github.com,
# pypi.org and files.pythonhosted.org (examples/tb/internet), whose pytest
# is Debian trixie's, extracted once. With the internet, pass
# --verifier-allow-host for those four hosts instead (examples/tb/README.md).
pytest=$(bash tb/pytest-trixie.sh)
(cd .. && go build -o "$out/internet" ./examples/tb/internet)
coproc internet { exec "$out/internet" -q -pytest-from "$pytest" -dir "${XDG_CACHE_HOME:-$HOME/.cache}/proctor-examples/internet"; }
read -r -a net <&"${internet[0]}"
for h in $mirrors; do net+=(--verifier-allow-host "$h" --build-allow-host "$h"); done
for t in sales-report log-summary; do
	"$proctor" validate -q "${net[@]}" "tb/$t"
done

say "proctor run on the Terminal-Bench 2 tasks: the cheats (each must FAIL)"
for a in read-tests prewrite-reward trojan conftest symlinks daemon kill-verifier trace-verifier; do
	trial sales-report "$a" tb "${net[@]}"
done
for a in read-tests prewrite-reward trojan; do
	trial log-summary "$a" tb "${net[@]}"
done
kill "$internet_PID" 2>/dev/null || true

say "verdicts, logs and changesets are under $out"

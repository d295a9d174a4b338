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

trial() { # TASK AGENT
	local dir="$out/$1-$2"
	"$proctor" run -q --task "tasks/$1" --agent "sh /agent/$2.sh" --agent-dir agents --out "$dir" || true
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

say "Terminal-Bench-style tasks in a container image, without a Docker daemon"
sh images/busybox.sh "$proctor"
for t in hello-world count-lines; do
	"$proctor" validate -q "tb/$t"
done
"$proctor" run -q --task tb/hello-world --agent 'mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt' \
	--out "$out/tb-hello-world-prewrite" || true

say "verdicts, logs and changesets are under $out"

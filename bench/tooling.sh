#!/usr/bin/env bash
# What learning the verifier's tooling costs (internal/tooling,
# internal/trial/tooling.go), and what applying it costs, side by side in
# one run, on two tasks:
#
#   a. a Terminal-Bench-style task: state grading, the host's root, a
#      grader that runs `cd /app && python3 -m pytest /tests/test_outputs.py`
#      and writes the reward from its exit code;
#   b. a SWE-bench instance, imported by `proctor swebench import`: Jinja2
#      3.1.2 and the xmlattr fix (CVE-2024-22195), built as
#      internal/swebench/upstream_test.go builds it from what
#      scripts/upstream.sh fetched into $PROCTOR_TEST_CACHE/upstream (make
#      test does it; default .test-cache); without it, a small library of
#      the same shape (src layout, PYTHONPATH=src, pytest with JUnit).
#
# For each, `proctor run` (the task's solution as the agent) with the
# tooling cache emptied before every run (the oracle's traced trial
# included) against the same with the profile cached; from the cold runs'
# verdicts, the learning time (timings_ms.tooling) against the trial's own
# grader phase (phases.grader wall_ms), the untraced grader run that the
# learning adds to.
#
#   bench/tooling.sh [RUNS]        (root; needs hyperfine, git, pytest for
#                                   /usr/bin/python3, markupsafe for Jinja2)
#
# BASELINE=REV (a commit of this repository; edf58ba is the one before the
# tooling work) also builds proctor at REV and times its trials beside the
# cached-profile ones: the difference is what applying a profile costs.
set -euo pipefail
runs=${1:-10}
cd "$(dirname "$0")/.."
upstream=${PROCTOR_TEST_CACHE:-$PWD/.test-cache}/upstream/jinja2

. bench/lib.sh
bench_setup hyperfine git
bench_baseline
/usr/bin/python3 -c 'import pytest' 2>/dev/null || { echo "bench: pytest for /usr/bin/python3 is missing (apt-get install python3-pytest)" >&2; exit 1; }

# a. Terminal-Bench style: a script to fix, the tests hidden in /tests.
tb="$work/tbench"
mkdir -p "$tb/tests" "$tb/solution"
printf '[verifier]\ntimeout_sec = 120.0\n[environment]\nworkdir = "/app"\nmemory_mb = 1024\n[proctor]\nrootfs = "host"\ngrading = "state"\n' > "$tb/task.toml"
echo "Write /app/wc.py: python3 /app/wc.py FILE prints the number of words in FILE." > "$tb/instruction.md"
cat > "$tb/solution/solve.sh" <<'EOF'
#!/bin/bash
mkdir -p /app
cat > /app/wc.py <<'PY'
import sys
print(len(open(sys.argv[1]).read().split()))
PY
EOF
cat > "$tb/tests/test.sh" <<'EOF'
#!/bin/bash
cd /app && python3 -m pytest /tests/test_outputs.py -rA
if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
EOF
cat > "$tb/tests/test_outputs.py" <<'EOF'
import subprocess
from pathlib import Path


def test_script_exists():
    assert Path("/app/wc.py").is_file()


def test_counts_words(tmp_path):
    f = tmp_path / "in.txt"
    f.write_text("one two  three\nfour\n")
    out = subprocess.run(["python3", "/app/wc.py", str(f)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "4"
EOF
chmod -R a+rX "$tb"

# b. A SWE-bench instance, from a repository with the fix in its later history.
repos="$work/repos"
g() { git -C "$1" -c gc.auto=0 -c user.name=bench -c user.email=bench@example.invalid "${@:2}"; }
if [ -f "$upstream/.done" ] && /usr/bin/python3 -c 'import markupsafe' 2>/dev/null; then
	r="$repos/pallets__jinja"
	mkdir -p "$r"
	cp -r "$upstream/Jinja2-3.1.2/." "$r"
	g "$r" init -q -b main; g "$r" add -A; g "$r" commit -qm "Jinja2 3.1.2"
	fix=0001-xmlattr-filter-disallows-keys-with-spaces.patch
	for p in $(cat "$upstream/debian/patches/series"); do
		[ "$p" = "$fix" ] && base=$(g "$r" rev-parse HEAD)
		g "$r" apply "$upstream/debian/patches/$p"; g "$r" add -A; g "$r" commit -qm "debian: $p"
		[ "$p" = "$fix" ] && fixed=$(g "$r" rev-parse HEAD)
	done
	inst=pallets__jinja-cve-2024-22195 repo=pallets/jinja
	f2p='["tests/test_filters.py::TestFilter::test_xmlattr_key_with_spaces"]'
	p2p='["tests/test_filters.py::TestFilter::test_xmlattr", "tests/test_filters.py::TestFilter::test_escape"]'
	echo "bench: SWE-bench instance: Jinja2 3.1.2, CVE-2024-22195 (from $upstream)"
else
	r="$repos/example__textlib"
	mkdir -p "$r/src/textlib" "$r/tests"
	printf 'from .core import words, title\n' > "$r/src/textlib/__init__.py"
	printf 'def words(s):\n    return s.split(" ")\n\n\ndef title(s):\n    return " ".join(w.capitalize() for w in words(s))\n' > "$r/src/textlib/core.py"
	printf 'from textlib import title\n\n\ndef test_title():\n    assert title("a b") == "A B"\n' > "$r/tests/test_core.py"
	printf '[project]\nname = "textlib"\nversion = "1.0"\n' > "$r/pyproject.toml"
	g "$r" init -q -b main; g "$r" add -A; g "$r" commit -qm "textlib"
	base=$(g "$r" rev-parse HEAD)
	sed -i 's/return s.split(" ")/return s.split()/' "$r/src/textlib/core.py"
	printf 'from textlib import title, words\n\n\ndef test_title():\n    assert title("a b") == "A B"\n\n\ndef test_words_runs_of_spaces():\n    assert words("a  b") == ["a", "b"]\n' > "$r/tests/test_core.py"
	g "$r" commit -qam "words: split on runs of white space"
	fixed=$(g "$r" rev-parse HEAD)
	inst=example__textlib-1 repo=example/textlib
	f2p='["tests/test_core.py::test_words_runs_of_spaces"]' p2p='["tests/test_core.py::test_title"]'
	echo "bench: SWE-bench instance: a small src-layout library ($upstream not there: scripts/upstream.sh fetches Jinja2)"
fi
patch=$(g "$r" diff "$base" "$fixed" -- src; echo x) test_patch=$(g "$r" diff "$base" "$fixed" -- tests; echo x)
PATCH=${patch%x} TEST_PATCH=${test_patch%x} /usr/bin/python3 - "$inst" "$repo" "$base" "$f2p" "$p2p" > "$work/instances.jsonl" <<'PY'
import json, os, sys
inst, repo, base, f2p, p2p = sys.argv[1:]
print(json.dumps({"instance_id": inst, "repo": repo, "base_commit": base, "problem_statement": "Make the failing test pass.",
                  "patch": os.environ["PATCH"], "test_patch": os.environ["TEST_PATCH"],
                  "FAIL_TO_PASS": json.loads(f2p), "PASS_TO_PASS": json.loads(p2p)}))
PY
printf '{"%s": {"PYTHONPATH": "src"}}\n' "$repo" > "$work/env.json"
"$work/proctor" swebench import "$work/instances.jsonl" --repos "$repos" --out "$work/swe" --env-map "$work/env.json" >/dev/null
ln -s "$work/swe/$inst" "$work/swebench"
chmod -R a+rX "$work/swe"

# The agent does the task's own solution (bench_oracle_agent): the trial's
# grader then does the work the learning run's traced grader does.
for t in tbench swebench; do
	bench_oracle_agent "$work/$t/solution" "$work/agent-$t"
done
"$work/proctor" keygen "$work/key" >/dev/null
run() { # TASK cold|warm|base: base is BASELINE's proctor (on the warm cache, whose profiles it never reads)
	local bin=proctor cache=warm
	[ "$2" = base ] && bin=proctor-base
	[ "$2" = cold ] && cache=cold
	echo "$work/$bin run -q --key $work/key --task $work/$1 --agent-dir $work/agent-$1 --agent /agent/decode.sh --out $work/out-$1-$2 --cache-dir $work/$cache"
}
# Each must work before timing (and the host's digests and the workspace
# copy get cached). Twice: the first trial on a fresh cache keys its
# profile differently from the later ones (the host scan it hashes holds
# no directory digests yet), so the second learns it again under the key
# every later trial uses. The cold cache is that, but its profiles.
profile() { /usr/bin/python3 -c 'import json, sys; v = json.load(open(sys.argv[1]))["tooling"]; print(v["source"], "(cached)" if v["cached"] else "(learned now)", v.get("reason", ""))' "$1"; }
for t in tbench swebench; do
	for i in 1 2 3; do
		rm -rf "$work/out-$t-warm"
		$(run "$t" warm) >/dev/null || { echo "bench: $t: the solution does not pass" >&2; exit 1; }
		echo "bench: $t: trial $i: tooling profile $(profile "$work/out-$t-warm/verdict.json")"
	done
	if [ -n "${BASELINE:-}" ]; then
		$(run "$t" base) >/dev/null
	fi
done
rm -rf "$work"/out-*
cp -a "$work/warm" "$work/cold"
rm -rf "$work/cold/tooling"
mkdir "$work/verdicts"
# Each command has its own --prepare (hyperfine takes them in order): it
# keeps the verdict of the run before, and empties the output directory
# (and, for the cold runs, the tooling cache).
keep() { # TASK cold|warm|base [PATH]
	echo "sh -c 'cp $work/out-$1-$2/verdict.json $work/verdicts/$1-$2-\$(date +%s%N).json 2>/dev/null; rm -rf $work/out-$1-$2 ${3:-}'"
}
cmds=() prep=()
for t in tbench swebench; do
	cmds+=(-n "$t, cold tooling cache" "$(run "$t" cold)")
	prep+=(--prepare "$(keep "$t" cold "$work/cold/tooling")")
	cmds+=(-n "$t, warm tooling cache" "$(run "$t" warm)")
	prep+=(--prepare "$(keep "$t" warm)")
	if [ -n "${BASELINE:-}" ]; then
		cmds+=(-n "$t, baseline" "$(run "$t" base)")
		prep+=(--prepare "$(keep "$t" base)")
	fi
done
hyperfine -N --warmup 1 --runs "$runs" --export-json "$work/h.json" "${prep[@]}" "${cmds[@]}" >/dev/null
for t in tbench swebench; do
	for c in cold warm base; do [ ! -f "$work/out-$t-$c/verdict.json" ] || cp "$work/out-$t-$c/verdict.json" "$work/verdicts/$t-$c-last.json"; done
done

/usr/bin/python3 - "$work" "$runs" <<'PY'
import glob, json, os, statistics, sys
work, runs = sys.argv[1], int(sys.argv[2])
res = {r["command"]: r for r in json.load(open(os.path.join(work, "h.json")))["results"]}
med = {k: statistics.median(r["times"]) * 1000 for k, r in res.items()}
print(f"{'':<28} {'median':>10} {'mean':>10}   ({runs} runs each, side by side)")
for k, r in res.items():
    print(f"{k:<28} {med[k]:7.1f} ms {r['mean'] * 1000:7.1f} ms")
# The verdicts of every run (the warm-up's too), by cache.
def steps(t, cache):
    tool, grader, total, srcs = [], [], [], set()
    for f in sorted(glob.glob(os.path.join(work, "verdicts", f"{t}-{cache}-*.json"))):
        v = json.load(open(f))
        tool.append(v["timings_ms"].get("tooling", 0))
        grader.append(v["phases"]["grader"]["wall_ms"])
        total.append(v["timings_ms"]["total"])
        if "tooling" in v:
            srcs.add(v["tooling"]["source"] + (" (cached)" if v["tooling"]["cached"] else " (learned now)"))
    return statistics.median(tool), statistics.median(grader), statistics.median(total), ", ".join(sorted(srcs))
for t in ("tbench", "swebench"):
    cold, warm = med[f"{t}, cold tooling cache"], med[f"{t}, warm tooling cache"]
    lt, lg, ltot, lsrc = steps(t, "cold")
    wt, wg, wtot, wsrc = steps(t, "warm")
    print(f"\n{t} (verdict figures: medians over the runs and the warm-up):")
    print(f"  trial, cold / warm tooling cache: {cold:.1f} / {warm:.1f} ms = {cold / warm:.2f}x (+{cold - warm:.1f} ms)")
    print(f"  learning (timings_ms.tooling, cold; {lsrc}): {lt:.0f} ms, against the same trial's grader phase {lg:.0f} ms = {lt / lg:.2f}x")
    print(f"  loading the cached profile (timings_ms.tooling, warm; {wsrc}): {wt:.0f} ms; grader phase {wg:.0f} ms; verdict total {wtot:.0f} ms")
    if f"{t}, baseline" in med:
        b = med[f"{t}, baseline"]
        _, bg, btot, _ = steps(t, "base")
        print(f"  applying: warm / baseline trial: {warm:.1f} / {b:.1f} ms = {warm / b:.3f}x, {warm - b:+.1f} ms a trial (target < 5 ms)")
        print(f"    baseline grader phase {bg:.0f} ms, verdict total {btot:.0f} ms ({wtot - btot:+.0f} ms)")
PY

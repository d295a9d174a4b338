#!/bin/bash
# Terminal-Bench-style verifier: inspect the final state of the machine.
fail() { echo "FAIL: $*"; echo 0 > /logs/verifier/reward.txt; exit 0; }
[ -f /app/hello.txt ] || fail "/app/hello.txt missing"
printf 'Hello, Proctor!\n' | cmp -s - /app/hello.txt || fail "/app/hello.txt has the wrong content"
[ -x /usr/local/bin/greet ] || fail "/usr/local/bin/greet missing or not executable"
out=$(/usr/local/bin/greet) || fail "greet failed"
want=$(printf 'Hello, Proctor!\n%s' "$(whoami)")
[ "$out" = "$want" ] || fail "greet printed: $out"
echo PASS
echo '{"reward": 1.0}' > /logs/verifier/reward.json

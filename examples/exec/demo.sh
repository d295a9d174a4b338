#!/usr/bin/env bash
# A short tour of `proctor exec`: what the host supports, then a sandboxed
# shell that tries the cheats agents use, each one failing.
#   examples/exec/demo.sh [PATH-TO-PROCTOR]   (as root, or where user namespaces are allowed)
set -uo pipefail
proctor=${1:-proctor}
say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

say proctor probe
"$proctor" probe

say "proctor exec -- sh -c 'id; hostname; ls /; ls /dev'"
"$proctor" exec -- sh -c 'id; hostname; ls /; ls /dev'

say "proctor exec -- cat /etc/shadow        # host secrets are masked"
"$proctor" exec -- cat /etc/shadow; echo "(exit $?, empty)"

say "proctor exec -- ls /root /home /proc/1/root   # nothing else of the host"
"$proctor" exec -- ls /root /home /proc/1/root; echo "(exit $?)"

say "proctor exec -- sh -c 'exec 3<>/dev/tcp/127.0.0.1/22' via bash   # no network"
"$proctor" exec -- bash -c 'exec 3<>/dev/tcp/127.0.0.1/22 && echo connected'; echo "(exit $?)"

say "proctor exec --pids 32 --timeout 3s -- sh -c 'fork bomb'   # limits hold and are reported"
"$proctor" exec --pids 32 --timeout 3s --result /tmp/proctor-demo.json -- sh -c 'b() { b & b; }; b' >/dev/null 2>&1
cat /tmp/proctor-demo.json

say "proctor exec --timeout 1s -- sh -c 'setsid sleep 1000 & sleep 1000'   # the whole tree dies"
"$proctor" exec --timeout 1s -- sh -c 'setsid sleep 1000 & sleep 1000'; echo "(exit $?)"
pgrep -f 'sleep 1000' >/dev/null && echo "LEFT BEHIND" || echo "nothing left on the host"

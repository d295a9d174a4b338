#!/usr/bin/env bash
# Installs the Debian packages proctor's tests, demo and benchmarks use, if any
# is missing: busybox-static (a tiny rootfs for tests), bubblewrap and hyperfine
# (the startup benchmark's peer and timer), gcc (the race detector, and a
# compiler the sandbox tests run inside), git and python3 (also run inside),
# chromium (renders the HTML report headless in its tests), python3-pytest
# (structured results graded from JUnit reports), python3-markupsafe (the
# one dependency of Jinja2, the real Python library a SWE-bench test grades),
# mmdebstrap (Debian root filesystems as tasks' rootfs directories), curl
# and nodejs (clients an agent uses, run inside to reach servers on the
# host's loopback: curl honours NO_PROXY, Node's fetch ignores the proxy),
# python3-pip (a verifier's client, recorded and replayed by the hermetic
# grading tests).
# e2fsprogs (mkfs.ext4 formats the sandboxes' disks: a task's storage).
# npm (installs the agent CLIs of recipes into their layers, in a sandbox).
set -euo pipefail
need=()
command -v busybox >/dev/null || need+=(busybox-static)
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v hyperfine >/dev/null || need+=(hyperfine)
command -v gcc >/dev/null || need+=(gcc libc6-dev)
command -v git >/dev/null || need+=(git)
[ -x /usr/sbin/mkfs.ext4 ] || [ -x /sbin/mkfs.ext4 ] || command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
# Root filesystems as users make them, for the tests of real input shapes
# (and, with a newer Debian's git, reftable repositories).
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v python3 >/dev/null || need+=(python3)
command -v chromium >/dev/null || need+=(chromium)
command -v curl >/dev/null || need+=(curl)
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
# pytest for the python3 sandboxes find first on their PATH (/usr/bin).
py=/usr/bin/python3; [ -x "$py" ] || py=python3
"$py" -c 'import pytest' 2>/dev/null || need+=(python3-pytest)
"$py" -c 'import markupsafe' 2>/dev/null || need+=(python3-markupsafe)
"$py" -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "deps: missing ${need[*]}; run as root or: sudo apt-get install -y ${need[*]}" >&2
	exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null

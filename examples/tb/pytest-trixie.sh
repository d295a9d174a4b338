#!/usr/bin/env bash
# Prints a directory of Python packages holding Debian trixie's pytest
# (with pluggy, iniconfig and packaging), for the stand-in internet's
# pytest wheel (examples/tb/internet -pytest-from): python3-pytest and its
# dependencies extracted, not installed, by mmdebstrap --variant=extract
# from the host's Debian mirror, once, under DIR (default
# ${XDG_CACHE_HOME:-~/.cache}/proctor-examples).
#   examples/tb/pytest-trixie.sh [DIR]
set -euo pipefail
keep=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/proctor-examples}
dir=$keep/pytest-trixie
if [ ! -d "$dir/usr/lib/python3/dist-packages/pytest" ]; then
	command -v mmdebstrap >/dev/null || { echo "pytest-trixie.sh: needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 1; }
	mapfile -t sources < <(sh "$(dirname "$0")/debian-sources.sh" trixie)
	rm -rf "$dir.tmp" && mkdir -p "$keep"
	mmdebstrap --variant=extract --include=python3-pytest --quiet trixie "$dir.tmp" "${sources[@]}" >&2
	mv "$dir.tmp" "$dir"
fi
echo "$dir/usr/lib/python3/dist-packages"

#!/usr/bin/env bash
# Fetches the real upstream code the SWE-bench tests build instances from
# (internal/swebench/upstream_test.go), through the ordinary clients:
#
#   - two releases of a Go module from the Go module proxy (go mod download):
#     github.com/bmatcuk/doublestar/v4 v4.10.3 and v4.10.4, which bracket a
#     one-line fix and the tests that show it;
#   - Debian's source package of Jinja2 3.1.2 (apt-get source): the upstream
#     release tarball and Debian's patches, one of them upstream's fix for
#     the xmlattr filter (CVE-2024-22195) with its test.
#
# Usage: scripts/upstream.sh DIR. DIR/jinja2 gets the extracted release and
# debian/ directory; the Go module lands in the Go module cache. Nothing is
# fetched again once it is there. apt-get works on a private state beside
# DIR (deb-src entries made from the system's own Debian entries), so the
# system's apt configuration is left alone.
set -euo pipefail
dir=${1:?usage: scripts/upstream.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# The Go module's two releases.
(cd / && GOFLAGS= go mod download github.com/bmatcuk/doublestar/v4@v4.10.3 github.com/bmatcuk/doublestar/v4@v4.10.4)

# Jinja2's Debian source package.
j="$dir/jinja2"
if [ -f "$j/.done" ]; then
	exit 0
fi
rm -rf "$j" "$dir/apt"
mkdir -p "$dir/apt/sources.list.d" "$dir/apt/lists/partial" "$dir/apt/cache/archives/partial" "$j/dl"
. /etc/os-release
code=${VERSION_CODENAME:?no VERSION_CODENAME in /etc/os-release}
# deb-src twins of the system's entries for this release and its security
# and updates suites (one-line and deb822 forms); other repositories are
# left out, since most publish no sources.
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
	[ -f "$f" ] || continue
	awk -v c="$code" '$1 == "deb" {
		i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
		if ($(i+1) ~ ("^" c "(-security|-updates)?$")) { $1 = "deb-src"; print }
	}' "$f"
done >"$dir/apt/sources.list.d/src.list"
for f in /etc/apt/sources.list.d/*.sources; do
	[ -f "$f" ] || continue
	awk -v c="$code" -v RS= -v ORS='\n\n' '{
		n = split($0, l, "\n"); keep = 0; deb = 0; out = ""
		for (k = 1; k <= n; k++) {
			if (l[k] ~ /^Types:/) { if (l[k] ~ /[ \t]deb([ \t]|$)/) deb = 1; l[k] = "Types: deb-src" }
			if (l[k] ~ /^Suites:/) {
				m = split(substr(l[k], 8), s, /[ \t]+/); keepS = ""
				for (q = 1; q <= m; q++) if (s[q] ~ ("^" c "(-security|-updates)?$")) keepS = keepS " " s[q]
				if (keepS != "") keep = 1
				l[k] = "Suites:" keepS
			}
			out = out l[k] "\n"
		}
		if (deb && keep) printf "%s", out "\n"
	}' "$f"
done >"$dir/apt/sources.list.d/src.sources"
apt=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$dir/apt/sources.list.d"
	-o "Dir::State::Lists=$dir/apt/lists" -o "Dir::Cache=$dir/apt/cache" -o APT::Sandbox::User=root)
apt-get "${apt[@]}" -qq update
(cd "$j/dl" && apt-get "${apt[@]}" -qq source --download-only jinja2)
orig=$(ls "$j"/dl/jinja2_3.1.2.orig.tar.gz 2>/dev/null | head -n 1)
deb=$(ls "$j"/dl/jinja2_3.1.2-*.debian.tar.* 2>/dev/null | head -n 1)
if [ -z "$orig" ] || [ -z "$deb" ]; then
	echo "upstream: Debian's jinja2 source is not 3.1.2 any more; internal/swebench/upstream_test.go needs a new pin" >&2
	exit 1
fi
tar --no-same-owner -xf "$orig" -C "$j"
tar --no-same-owner -xf "$deb" -C "$j"
cp "$orig" "$j/jinja2_3.1.2.orig.tar.gz"
rm -rf "$j/dl" "$dir/apt"
touch "$j/.done"

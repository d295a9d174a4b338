#!/bin/sh
# Prints the host's Debian mirrors as apt source lines for SUITE (default
# trixie): each `deb` entry of the host's apt sources (one-line *.list and
# deb822 *.sources) whose suite is the host's release (bookworm,
# bookworm-updates, bookworm-security, ...) with that release's name
# replaced by SUITE, component main, e.g. "deb http://MIRROR/debian
# trixie main". With
# --hosts, only the mirrors' host names, one a line: the build's and the
# verifier's allow-lists. No mirror is written in this repository: it is
# the host's, or $DEBIAN_MIRROR (a URL) when set.
#   examples/tb/debian-sources.sh [--hosts] [SUITE]
set -eu
hosts=
[ "${1:-}" = --hosts ] && { hosts=1; shift; }
suite=${1:-trixie}
lines() {
	if [ -n "${DEBIAN_MIRROR:-}" ]; then
		echo "deb $DEBIAN_MIRROR $suite main"
		return
	fi
	codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
	[ -n "$codename" ] || { echo "debian-sources.sh: no VERSION_CODENAME in /etc/os-release (hint: set DEBIAN_MIRROR=URL)" >&2; exit 1; }
	{
		for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
			[ -f "$f" ] && sed -n 's/^[[:space:]]*deb[[:space:]]\{1,\}\(\[[^]]*\][[:space:]]\{1,\}\)\{0,1\}//p' "$f" |
				awk '{c=""; for (i = 3; i <= NF && $i !~ /^#/; i++) c = c " " $i; print $1, $2 c}'
		done
		for f in /etc/apt/sources.list.d/*.sources; do
			[ -f "$f" ] && awk '
				function flush() { if (deb && en) for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) print u[i], s[j], comp; deb = 0; en = 1; nu = ns = 0; comp = "" }
				BEGIN { en = 1 }
				/^[[:space:]]*$/ { flush(); next }
				/^#/ { next }
				tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
				tolower($1) == "uris:" { for (i = 2; i <= NF; i++) u[++nu] = $i }
				tolower($1) == "suites:" { for (i = 2; i <= NF; i++) s[++ns] = $i }
				tolower($1) == "components:" { comp = ""; for (i = 2; i <= NF; i++) comp = comp (i > 2 ? " " : "") $i }
				tolower($1) == "enabled:" { en = tolower($2) != "no" }
				END { flush() }' "$f"
		done
	} | awk -v from="$codename" -v to="$suite" '
		$1 ~ /^https?:\/\// && ($2 == from || index($2, from "-") == 1) {
			print "deb", $1, to substr($2, length(from) + 1), "main"
		}' | awk '!seen[$0]++'
}
out=$(lines)
[ -n "$out" ] || { echo "debian-sources.sh: no Debian mirror of this host's release in its apt sources (hint: set DEBIAN_MIRROR=URL)" >&2; exit 1; }
if [ -n "$hosts" ]; then
	echo "$out" | awk '{ h = $2; sub(/^[a-z]+:\/\//, "", h); sub(/\/.*/, "", h); if (!seen[h]++) print h }'
else
	echo "$out"
fi

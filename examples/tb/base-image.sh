#!/usr/bin/env bash
# Builds the base image of the Terminal-Bench examples,
# proctor-examples/debian:trixie, without Docker: a minimal Debian trixie
# root (mmdebstrap --variant=minbase, from the host's own Debian mirror:
# debian-sources.sh; configured as Debian's images for Docker are: dpkg
# without fsync, no documentation, no translations), made into
# a docker-save archive by mkimage with its owners kept, imported into
# proctor's image store. The tasks' Dockerfiles say FROM it and install
# what they need with apt through the build's proxy.
# An image already stored is kept (BASE_IMAGE_REBUILD=1 makes it again: a
# new root is a new digest, and every task's build starts over).
#   examples/tb/base-image.sh [PATH-TO-PROCTOR] [--cache-dir DIR]
set -euo pipefail
proctor=${1:-proctor}
shift || true
tag=proctor-examples/debian:trixie
cd "$(dirname "$0")/../.."
if [ -z "${BASE_IMAGE_REBUILD:-}" ] && "$proctor" image ls "$@" | grep -q "docker.io/$tag[],]"; then
	echo "base-image.sh: $tag is in the store (BASE_IMAGE_REBUILD=1 makes it again)" >&2
	exit 0
fi
command -v mmdebstrap >/dev/null || { echo "base-image.sh: needs mmdebstrap (apt-get install mmdebstrap)" >&2; exit 1; }
mapfile -t sources < <(sh examples/tb/debian-sources.sh trixie)
work=$(mktemp -d /var/tmp/proctor-base-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
mmdebstrap --variant=minbase --mode=root --quiet --dpkgopt=force-unsafe-io \
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' --aptopt='Acquire::Languages "none"' \
	trixie "$work/rootfs" "${sources[@]}"
go run ./examples/images/mkimage -from "$work/rootfs" -keep-owners -workdir / -cmd /bin/bash -tag "$tag" -o "$work/base.tar"
"$proctor" image import "$work/base.tar" "$@"

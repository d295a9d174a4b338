#!/bin/sh
# Builds the example image proctor-examples/busybox:1 without Docker: a root
# of static busybox and its applets, made into a docker-save archive by
# mkimage, imported into proctor's image store.
#   examples/images/busybox.sh [PATH-TO-PROCTOR] [--cache-dir DIR]
set -eu
proctor=${1:-proctor}
shift || true
cd "$(dirname "$0")/../.."
bb=$(command -v busybox) || { echo "busybox.sh: needs busybox (apt-get install busybox-static)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root/bin" "$root/etc" "$root/root" "$root/tmp" "$root/app" "$root/logs" "$root/usr/bin" "$root/usr/sbin" "$root/sbin"
chmod 1777 "$root/tmp"
cp "$bb" "$root/bin/busybox"
for app in $("$bb" --list); do
	[ "$app" = busybox ] || ln -s busybox "$root/bin/$app"
done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' > "$root/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
go run ./examples/images/mkimage -from "$root" -tag proctor-examples/busybox:1 -o "$work/busybox.tar"
"$proctor" image import "$work/busybox.tar" "$@"

#!/usr/bin/env bash
# moonwire's container image, from this repository and nothing else: builds moonwire,
# makes a root file system of the binary, every library `ldd` lists for it (the Swift
# runtime among them) and the dynamic loader, a user 10001 and /results, then builds
# Containerfile (FROM scratch) with podman or docker. No registry is contacted.
#
# usage: scripts/image.sh [--debug | --binary PATH] [--tag NAME] [--engine podman|docker|none]
#   --debug        use the debug build (swift build) instead of the release build
#   --binary PATH  use this moonwire binary, built already
#   --tag NAME     the image's name (default moonwire:latest)
#   --engine E     podman (default when installed), docker, or none (only the root file system)
# Extra podman options (such as --root DIR for a storage of its own) go in PODMAN_OPTS.
# Prints the image's name and size on stdout; the root file system is .build/image/rootfs.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=release binary="" tag="moonwire:latest" engine=""
while [ $# -gt 0 ]; do
    case "$1" in
        --debug) mode=debug ;;
        --binary) binary="$2"; shift ;;
        --tag) tag="$2"; shift ;;
        --engine) engine="$2"; shift ;;
        *) echo "image.sh: unknown option '$1' (see the head of scripts/image.sh)" >&2; exit 2 ;;
    esac
    shift
done
if [ -z "$engine" ]; then
    if command -v podman >/dev/null 2>&1; then engine=podman
    elif command -v docker >/dev/null 2>&1; then engine=docker
    else engine=none; fi
fi

if [ -z "$binary" ]; then
    if [ "$mode" = release ]; then
        scripts/release_build.sh --product moonwire >&2
        binary="$(scripts/release_build.sh --show-bin-path)/moonwire"
    else
        swift build --product moonwire >&2
        binary="$(swift build --show-bin-path)/moonwire"
    fi
fi
[ -x "$binary" ] || { echo "image.sh: no moonwire binary at '$binary'" >&2; exit 1; }

out=.build/image
rootfs="$out/rootfs"
rm -rf "$rootfs" "$out/owned" "$out/rootfs.tar"
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc" "$out/owned/results" "$out/owned/tmp"

# The binary, without its symbols (a debug build's are most of its size).
cp "$binary" "$rootfs/usr/local/bin/moonwire"
strip --strip-unneeded "$rootfs/usr/local/bin/moonwire" 2>/dev/null || true

# Every library the loader resolves (`name => /path`) and the loader itself (`/path`),
# each at the path ldd prints, symbolic links followed.
libs="$(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)"
missing="$(ldd "$binary" | awk '/not found/ { print $1 }')"
[ -z "$missing" ] || { echo "image.sh: ldd finds no $missing" >&2; exit 1; }
for lib in $libs; do
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
done
# Debian's loader is reached through /lib64 and /lib (usrmerge): keep the links, so
# the paths the binary names exist as on the build machine.
for link in /lib /lib64; do
    if [ -L "$link" ] && [ -d "$rootfs/usr$link" ]; then
        ln -s "usr$link" "$rootfs$link"
    fi
done

# Users, name lookup (glibc reads /etc/hosts itself), the CA roots for wss://.
printf 'root:x:0:0:root:/:/sbin/nologin\nmoonwire:x:10001:10001:moonwire:/results:/sbin/nologin\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\nmoonwire:x:10001:\n' > "$rootfs/etc/group"
printf 'hosts: files dns\n' > "$rootfs/etc/nsswitch.conf"
printf '127.0.0.1 localhost\n::1 localhost\n' > "$rootfs/etc/hosts"
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    mkdir -p "$rootfs/etc/ssl/certs"
    cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/"
fi

# One tarball: root's files, then /results for the user and /tmp for everyone,
# whoever runs this script (ADD keeps a tarball's owners).
tar -cf "$out/rootfs.tar" --numeric-owner --owner=0 --group=0 -C "$rootfs" .
chmod 0775 "$out/owned/results"
chmod 1777 "$out/owned/tmp"
tar -rf "$out/rootfs.tar" --numeric-owner --owner=10001 --group=10001 -C "$out/owned" ./results
tar -rf "$out/rootfs.tar" --numeric-owner --owner=0 --group=0 -C "$out/owned" ./tmp
rm -rf "$out/owned"

size_mb() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "image.sh: root file system $(size_mb "$(stat -c %s "$out/rootfs.tar")") MB ($(echo "$libs" | wc -l) libraries)" >&2

case "$engine" in
    none) exit 0 ;;
    podman)
        # shellcheck disable=SC2086
        podman ${PODMAN_OPTS:-} build --quiet -f Containerfile -t "$tag" "$out" >&2
        bytes="$(podman ${PODMAN_OPTS:-} image inspect --format '{{.Size}}' "$tag")" ;;
    docker)
        docker build --quiet -f Containerfile -t "$tag" "$out" >&2
        bytes="$(docker image inspect --format '{{.Size}}' "$tag")" ;;
    *) echo "image.sh: --engine is podman, docker or none" >&2; exit 2 ;;
esac
echo "$tag $(size_mb "$bytes") MB"

#!/usr/bin/env bash
# The binary formats' codec benchmark: mw.msgpack and mw.cbor against lua-cjson's JSON
# (and mw.json) on the same data, same process (bench/formats/codec.lua), and Debian's
# msgpack-c and libcbor on the same bytes (bench/formats/libs.c: their own trees, no Lua).
# Writes bench/results/formats-codec.md.
#   bench/formats/run.sh [RUNS] [SECONDS]        MOONWIRE_BIN=... skips the build
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
need=()
for p in lua-cjson libmsgpack-dev libcbor-dev; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need[@]}" >/dev/null
fi
if [ -z "${MOONWIRE_BIN:-}" ]; then
    scripts/release_build.sh --product moonwire >&2
    MOONWIRE_BIN="$(scripts/release_build.sh --show-bin-path)/moonwire"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$MOONWIRE_BIN" run bench/json/codec.lua --write "$work"
"$MOONWIRE_BIN" run bench/formats/codec.lua "$work" --write-binary
cc -O2 -o "$work/libs" bench/formats/libs.c $(pkg-config --cflags --libs lua5.4) -lmsgpackc -lcbor
mkdir -p bench/results
{
    echo "# mw.msgpack and mw.cbor vs lua-cjson, same process"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo
    "$MOONWIRE_BIN" run --callback-warning 0 --callback-timeout 0 bench/formats/codec.lua "$work" "${1:-3}" "${2:-1}"
    echo
    echo "Debian's libraries on the same bytes, decode + encode, µs: 'tree' into their own tree and back (no Lua);"
    echo "'+ Lua' as a codec on them would run (tree, then Lua values, and back; no UTF-8 check, no key order):"
    echo
    "$work/libs" "$work" "${2:-1}"
} | tee bench/results/formats-codec.md

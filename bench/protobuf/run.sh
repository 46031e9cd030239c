#!/usr/bin/env bash
# mw.protobuf's codec benchmark (bench/protobuf/codec.lua): decode + encode per
# message, small / medium / large, against mw.json and lua-cjson on the same data.
# Writes bench/results/protobuf-codec.md.
#   bench/protobuf/run.sh [RUNS] [SECONDS]        MOONWIRE_BIN=... skips the build
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
if ! dpkg -s lua-cjson >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq lua-cjson >/dev/null
fi
if [ -z "${MOONWIRE_BIN:-}" ]; then
    scripts/release_build.sh --product moonwire >&2
    MOONWIRE_BIN="$(scripts/release_build.sh --show-bin-path)/moonwire"
fi
mkdir -p bench/results
{
    echo "# mw.protobuf vs mw.json and lua-cjson, same process"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo
    "$MOONWIRE_BIN" run --callback-warning 0 --callback-timeout 0 bench/protobuf/codec.lua "${1:-3}" "${2:-1}"
} | tee bench/results/protobuf-codec.md

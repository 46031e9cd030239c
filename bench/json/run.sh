#!/usr/bin/env bash
# The same-process JSON codec benchmark (bench/json/codec.lua): mw.json against
# Debian's lua-cjson and lua-dkjson. Writes bench/results/json-codec.md.
#   bench/json/run.sh [RUNS] [SECONDS]        MOONWIRE_BIN=... skips the build
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
need=()
dpkg -s lua-cjson >/dev/null 2>&1 || need+=(lua-cjson)
dpkg -s lua-dkjson >/dev/null 2>&1 || need+=(lua-dkjson)
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
mkdir -p bench/results
{
    echo "# mw.json vs lua-cjson, same process"
    echo
    echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo
    # One long main chunk that never returns to the loop: no callback time limit.
    "$MOONWIRE_BIN" run --callback-warning 0 --callback-timeout 0 bench/json/codec.lua "${1:-3}" "${2:-1}"
} | tee bench/results/json-codec.md

#!/usr/bin/env bash
# moonwire's benchmarks against its peers, one command:
#   bench/run.sh                      everything (about 6 minutes, plus the build)
#   QUICK=1 bench/run.sh              smoke run, under a minute: small N, 200 connections
#   WORKLOADS=rtt,pipelined PEERS=picows,moonwire bench/run.sh
#   MOONWIRE_BIN=.build/release/moonwire bench/run.sh     skip the build, use this binary
# Installs the peers (apt: node-ws, python3-venv, time; a venv with websockets,
# picows and uvloop), builds moonwire and moonwire-bench in release and the C
# floor client (bench/floor/wsfloor.c, cc -O2, into .build/bench-floor/ unless
# FLOOR_BIN is set), then runs bench/lib/driver.py, which writes
# bench/results/latest.md and latest.json.
# Every knob is in bench/README.md.
set -euo pipefail
if [ $# -gt 0 ]; then
    echo "usage: [KNOB=value ...] bench/run.sh   (knobs: see bench/README.md)" >&2
    exit 2
fi
cd "$(dirname "$0")/.."
venv=${BENCH_VENV:-/tmp/moonwire-benchvenv}

need=()
dpkg -s node-ws >/dev/null 2>&1 || need+=(node-ws)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
[ -x /usr/bin/time ] || need+=(time)
command -v taskset >/dev/null || need+=(util-linux)
command -v ss >/dev/null || need+=(iproute2)
command -v cc >/dev/null || need+=(gcc)
# The json section's same-process codec comparison (bench/json/codec.lua).
dpkg -s lua-cjson >/dev/null 2>&1 || need+=(lua-cjson)
dpkg -s lua-dkjson >/dev/null 2>&1 || need+=(lua-dkjson)
if [ ${#need[@]} -gt 0 ]; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "bench: installing ${need[*]}" >&2
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${need[@]}" >/dev/null
fi
if ! "$venv/bin/python" -c 'import websockets, picows, uvloop, orjson' 2>/dev/null; then
    echo "bench: creating $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check websockets==17.4 picows==2.3.1 uvloop==0.23.0 orjson==3.10.18
fi

if [ -z "${MOONWIRE_BIN:-}" ]; then
    echo "bench: scripts/release_build.sh (moonwire, moonwire-bench)" >&2
    scripts/release_build.sh --product moonwire >&2
    scripts/release_build.sh --product moonwire-bench >&2
    bin_dir=$(scripts/release_build.sh --show-bin-path)
    export MOONWIRE_BIN="$bin_dir/moonwire" MOONWIRE_BENCH_BIN="$bin_dir/moonwire-bench" BENCH_BUILT=1
fi

if [ -z "${FLOOR_BIN:-}" ]; then
    . bench/lib/floor_build.sh
    floor_bin=$(floor_build wsfloor)
    export FLOOR_BIN="$floor_bin" FLOOR_BUILT=1
fi

# 10 000 fanout connections need as many descriptors in the client and in the server.
ulimit -n "$(ulimit -Hn)"
export BENCH_VENV="$venv" PYTHONDONTWRITEBYTECODE=1
exec timeout --kill-after=30 "${BENCH_TIMEOUT:-2400}" python3 bench/lib/driver.py

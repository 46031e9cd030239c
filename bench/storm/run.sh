#!/usr/bin/env bash
# A reconnect storm: N clients (default 5000) connected to one moonwire server, all
# dropped at once; prints when they are back (seconds after the drop: p50, p99, max),
# how long the server's loop of N aborts took (drop), the server's CPU per client over
# the storm (cpu_us) and the machine's load, RUNS times (default 4).
# CLIENTS=moonwire (the default): moonwire's own clients, `moonwire run --workers 2`
# (bench/storm/clients.lua, -q: a log line per reconnect is not the storm's work);
# CLIENTS=floor: the C floor client (bench/floor/stormfloor.c, one thread, the same
# reconnect schedule), so that what is left is the server's and the kernel's time.
# BACKLOG sets the server's `backlog` option (default: the system's maximum).
#   bench/storm/run.sh [N [RUNS]]      MOONWIRE_BIN=... BACKLOG=256 CLIENTS=floor bench/storm/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/lib/floor_build.sh
n=${1:-5000}
runs=${2:-4}
clients=${CLIENTS:-moonwire}
ulimit -n $((n * 2 + 1024))
bin="${MOONWIRE_BIN:-$(scripts/release_build.sh --product moonwire >/dev/null && scripts/release_build.sh --show-bin-path)/moonwire}"
case $clients in
    moonwire) ;;
    floor) floor_bin=$(floor_build stormfloor) ;;
    *) echo "CLIENTS must be moonwire or floor, not $clients" >&2; exit 2 ;;
esac
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
for run in $(seq "$runs"); do
    out=$(mktemp)
    "$bin" run bench/storm/server.lua "$port" "$n" ${BACKLOG:-} > "$out" &
    server=$!
    client=""
    trap 'kill -9 $server $client 2>/dev/null || true' EXIT
    for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
    if [ "$clients" = floor ]; then
        "$floor_bin" 127.0.0.1 "$port" "$n" &
    else
        "$bin" run -q --workers 2 bench/storm/clients.lua "ws://127.0.0.1:$port/" "$n" >/dev/null 2>&1 &
    fi
    client=$!
    wait $server || true
    kill -9 $client 2>/dev/null || true
    wait $client 2>/dev/null || true
    echo "run $run ($clients clients, load $(cut -d' ' -f1-3 /proc/loadavg)): $(grep '^{' "$out")"
    rm -f "$out"
done

#!/usr/bin/env bash
# A reconnect storm: N clients (default 5000, two client workers) connected to one
# moonwire server, all dropped at once; prints when they are back (seconds after
# the drop: p50, p99, max), RUNS times (default 4). BACKLOG sets the server's
# `backlog` option (default: the system's maximum, which mw.listen uses).
#   bench/storm/run.sh [N [RUNS]]      MOONWIRE_BIN=... BACKLOG=256 bench/storm/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-5000}
runs=${2:-4}
ulimit -n $((n * 2 + 1024))
bin="${MOONWIRE_BIN:-$(scripts/release_build.sh --product moonwire >/dev/null && scripts/release_build.sh --show-bin-path)/moonwire}"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
for run in $(seq "$runs"); do
    out=$(mktemp)
    "$bin" run bench/storm/server.lua "$port" "$n" ${BACKLOG:-} > "$out" &
    server=$!
    client=""
    trap 'kill -9 $server $client 2>/dev/null || true' EXIT
    for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.05; done
    "$bin" run --workers 2 bench/storm/clients.lua "ws://127.0.0.1:$port/" "$n" >/dev/null 2>&1 &
    client=$!
    wait $server || true
    kill -9 $client 2>/dev/null || true
    wait $client 2>/dev/null || true
    echo "run $run: $(grep '^{' "$out")"
    rm -f "$out"
done

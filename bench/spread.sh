#!/usr/bin/env bash
# The seed's broadcast latency test: CLIENTS (default 1000) WebSocket clients, a
# moonwire server broadcasting ROUNDS (default 100) timestamped messages INTERVAL
# seconds apart (default 0.05: 20 rounds a second).
# Prints one JSON line: spread (first to last receipt of a round, over every client)
# and latency percentiles in milliseconds.
#
# One process holds at most (hard `ulimit -n`) - 256 connections (19 744 with this
# machine's 20 000), so above that the test runs in pairs of processes: server i
# serves the clients of client process i, and every server starts broadcasting at the
# same moment of the shared monotonic clock, so a round is still one instant across
# all clients. PROCESSES forces the number of pairs.
#
# FLOOR=1 runs the floor instead: bench/floor/bcastfloor.c (compiled into
# .build/bench-floor/ unless BCASTFLOOR_BIN is set), the same writes and reads with no
# framework, one server process and one client process, the same JSON line plus the
# server's write-loop time and each side's CPU per round. FLOOR_ARGS adds its variant
# options (--client-sched batch, --write dontwait, --server-threads N).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/ready.sh
clients=${1:-1000}
rounds=${2:-100}
hard=$(ulimit -Hn)
[ "$hard" = unlimited ] && hard=1048576
ulimit -n "$hard"
per_process=$((hard - 256))
pairs=${PROCESSES:-$(( (clients + per_process - 1) / per_process ))}
if [ "${FLOOR:-}" = 1 ]; then
    # The floor (bench/floor/bcastfloor.c): one process pair, no moonwire, no pairs above the limit.
    if [ "$clients" -gt "$per_process" ]; then
        echo "spread: FLOOR=1 runs one process pair; $clients connections exceed one process's $per_process (hard ulimit -n $hard - 256)" >&2
        exit 1
    fi
    if [ -z "${BCASTFLOOR_BIN:-}" ]; then
        . bench/lib/floor_build.sh
        BCASTFLOOR_BIN=$(floor_build bcastfloor)
    fi
    # shellcheck disable=SC2086 # FLOOR_ARGS: the floor's variant options, word-split on purpose
    exec "$BCASTFLOOR_BIN" --interval "${INTERVAL:-0.05}" ${FLOOR_ARGS:-} "$clients" "$rounds"
fi
bin="${MOONWIRE_BIN:-$(scripts/release_build.sh --product moonwire >/dev/null && scripts/release_build.sh --show-bin-path)/moonwire}"
work=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$work"' EXIT

share() { # the clients of pair $1 (from 0)
    echo $(( clients / pairs + ($1 < clients % pairs ? 1 : 0) ))
}

for ((i = 0; i < pairs; i++)); do
    "$bin" run bench/spread_server.lua ws://127.0.0.1:0/ "$(share $i)" "$rounds" "$work/go" "${INTERVAL:-0.05}" > "$work/server.$i" &
    pids+=($!)
done
for ((i = 0; i < pairs; i++)); do
    url=$(ready_address "$work/server.$i")
    [ -n "$url" ] || { echo "spread: server $i did not start" >&2; exit 1; }
    "$bin" run bench/spread_clients.lua "$url" "$(share $i)" "$rounds" > "$work/clients.$i" &
    pids+=($!)
done
# Every server has all its clients: start the rounds half a second from now.
deadline=$((SECONDS + 180))
for ((i = 0; i < pairs; i++)); do
    waited=0
    wait_line "$work/server.$i" CONNECTED "${pids[$i]}" $((deadline - SECONDS)) || waited=$?
    [ $waited -ne 1 ] || { echo "spread: server $i ended before its clients connected" >&2; exit 1; }
    [ $waited -ne 2 ] || { echo "spread: server $i's clients did not all connect within 180 s" >&2; exit 1; }
done
python3 -c 'import time; print(time.monotonic() + 0.5)' > "$work/go.tmp"
mv "$work/go.tmp" "$work/go"
for ((i = 0; i < pairs; i++)); do wait "${pids[$((pairs + i))]}" || true; done

python3 - "$clients" "$rounds" "$pairs" "$work"/clients.* <<'EOF'
import json, math, sys
clients, rounds, pairs = map(int, sys.argv[1:4])
parts = []
for path in sys.argv[4:]:
    lines = [l for l in open(path) if l.startswith("{")]
    if lines:
        parts.append(json.loads(lines[-1]))
spreads, complete, histogram = [], 0, {}
for r in range(rounds):
    got = [p["per_round"][r] for p in parts if p["per_round"][r][0] is not False]
    if not got:
        continue
    spreads.append(max(g[1] for g in got) - min(g[0] for g in got))
    complete += sum(g[2] for g in got) == clients
for p in parts:
    for bucket, n in p["latency_01ms"]:
        histogram[bucket] = histogram.get(bucket, 0) + n

def pct(sorted_values, p):
    return sorted_values[max(0, math.ceil(len(sorted_values) * p) - 1)] if sorted_values else None

def hist_pct(p):
    total, seen = sum(histogram.values()), 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= total * p:
            return (bucket + 0.5) / 10
    return None

spreads.sort()
print(json.dumps({
    "clients": clients, "rounds": rounds, "processes": pairs, "complete_rounds": complete,
    "spread_p50_ms": pct(spreads, 0.5) and pct(spreads, 0.5) * 1e3,
    "spread_p99_ms": pct(spreads, 0.99) and pct(spreads, 0.99) * 1e3,
    "latency_p50_ms": hist_pct(0.5), "latency_p99_ms": hist_pct(0.99),
}))
EOF

#!/usr/bin/env bash
# Per-message cost of the moonwire client, in numbers machine load does not change:
# user-space instructions (valgrind callgrind) and system calls (strace -c -f).
#   bench/profile.sh rtt 32                 rtt, 32-byte text messages
#   bench/profile.sh pipelined 1024         pipelined, 1 KiB binary messages
#   SERVER=moonwire bench/profile.sh rtt 32 against bench/servers/echo.lua instead of picows
#   bench/profile.sh fanout 10000           10 000 connections, each sending one 32-byte
#                                           message per round (N rounds, lockstep: no deadline)
#   bench/profile.sh heartbeat 300          300 idle connections with a 1 s heartbeat
#                                           (bench/clients/conns_client.lua, moonwire echo)
#   bench/profile.sh json                   the JSON echo bot: bench/json/trade.json (332 B)
#                                           over codec = "json", decoded, read, encoded, sent
#   bench/profile.sh broadcast 400          the broadcasting server instead of a client:
#                                           bench/spread_server.lua sending N rounds (10) to
#                                           400 moonwire clients in another process (as
#                                           bench/spread.sh runs it): per peer per round,
#                                           the rounds only (not the handshakes)
# Each measurement runs the client twice, with N and 2N messages and no warm-up, and
# divides the difference by N, so start-up and teardown cancel out (heartbeat: held 4 s
# and 8 s, divided by the pings sent in between, counted by callgrind: per ping + pong). Prints one line per
# measurement: instructions per message (also without the run's one-off costs that differ
# between runs, see oneoff), then system calls per message by name.
# Knobs: N (2000; 500 at 64 KiB), MOONWIRE_BIN (release build), BENCH_VENV, SKIP_STRACE=1,
# KEEP (a directory: keep the callgrind.out files there for callgrind_annotate),
# CACHE_SIM=1 (callgrind's cache simulation: also level-1 instruction-cache misses per
# message, which tell how much of the path's code is fetched again for every message).
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib/ready.sh
workload=${1:-rtt}
size=${2:-32}
[ "$workload" = json ] && size=332   # the message is bench/json/trade.json
if [ "$workload" = heartbeat ]; then
    n=4 per=$((size * 4)) SERVER=moonwire   # per: the expected pings, for strace
elif [ "$workload" = fanout ]; then
    n=${N:-2}; per=$((n * size))              # size: connections; n: broadcast rounds
elif [ "$workload" = broadcast ]; then
    n=${N:-10}; per=$((n * size))             # size: peers; n: rounds
elif [ "$size" -ge 65536 ]; then
    n=${N:-500}; per=$n
else
    n=${N:-2000}; per=$n
fi
built=${MOONWIRE_BIN:-$(scripts/release_build.sh --show-bin-path)/moonwire}
venv=${BENCH_VENV:-/tmp/moonwire-benchvenv}
for tool in valgrind strace objcopy; do
    command -v $tool >/dev/null || { echo "profile: $tool missing (apt-get install valgrind strace binutils)" >&2; exit 2; }
done
work=$(mktemp -d)
server_pid=""
trap '[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null; rm -rf "$work"' EXIT
# Debian's valgrind cannot read the DWARF 5 the Swift toolchain writes; the symbol
# table is enough for per-function counts.
bin="$work/moonwire"
objcopy --strip-debug "$built" "$bin"

if [ "$workload" = broadcast ]; then
    :   # the measured process is the server; its clients are bench/spread_clients.lua
elif [ "${SERVER:-picows}" = moonwire ]; then
    "$bin" run bench/servers/echo.lua 0 > "$work/server.out" 2>/dev/null &
else
    "$venv/bin/python" bench/peers/echo_picows.py 0 > "$work/server.out" 2>/dev/null &
fi
if [ "$workload" != broadcast ]; then
    server_pid=$!
    port=$(ready_address "$work/server.out")
    [ -n "$port" ] || { echo "profile: the echo server did not start" >&2; exit 1; }
fi
type=text
[ "$workload" = rtt ] || [ "$workload" = json ] || type=binary

client() { # N, then the tool's command line
    local count=$1; shift
    local tool=$1
    if [ "$workload" = heartbeat ]; then
        "$@" "$bin" run bench/clients/conns_client.lua "ws://127.0.0.1:$port/" "$size" 1 "$count" > "$work/client.out"
    elif [ "$workload" = fanout ]; then
        # Every connection sends one 32-byte message per round and reads its echo. Under
        # valgrind a round's send loop runs for seconds: no callback time limit.
        # Only the rounds are counted, not the dials: callgrind starts with instrumentation
        # off, the client says CONNECTED when every connection is open and waits for the
        # gate file, which is created once callgrind_control has turned instrumentation on
        # (strace counts everything).
        rm -f "$work/gate" "$work/gate.done" "$work/client.err"
        "$@" "$bin" run --callback-warning 0 --callback-timeout 0 bench/clients/peerbench_client.lua --url "ws://127.0.0.1:$port/" \
            --workload fanout --conns "$size" --duration "$count" --lockstep 1 --size 32 --gate "$work/gate" \
            > "$work/client.out" 2> "$work/client.err" &
        local pid=$!
        # Waits for the client's line $1, switches instrumentation $2 (under valgrind),
        # then opens the gate file $3.
        gate() {
            wait_line "$work/client.err" "$1" "$pid" || true
            if [ "$tool" = valgrind ]; then callgrind_control -i "$2" "$pid" >/dev/null 2>&1; fi
            touch "$3"
        }
        gate CONNECTED on "$work/gate"
        gate ROUNDS off "$work/gate.done"   # ... off again before the teardown
        wait "$pid" || true
    elif [ "$workload" = broadcast ]; then
        # The server, measured, broadcasts `count` rounds 0.5 s apart once its `size`
        # clients are connected and the go file holds a start time (bench/spread.sh's
        # protocol); the clients run uninstrumented. Under valgrind a round runs for
        # seconds: no callback time limit. Only the rounds are counted: callgrind starts
        # with instrumentation off and it is switched on once every client is connected,
        # off again once the clients have their last round. (Counting the handshakes too
        # and letting them cancel out between the two runs did not always work: one
        # build gave 2 300 or 4 300 per peer per round, most likely from how the 400
        # accepts and upgrades fell under valgrind, millions of instructions.)
        rm -f "$work/go" "$work/bserver.out"
        "$@" "$bin" run --callback-warning 0 --callback-timeout 0 bench/spread_server.lua ws://127.0.0.1:0/ \
            "$size" "$count" "$work/go" 0.5 > "$work/bserver.out" &
        local pid=$! url
        url=$(ready_address "$work/bserver.out" 60)
        [ -n "$url" ] || { echo "profile: the broadcasting server did not start" >&2; exit 1; }
        "$built" run bench/spread_clients.lua "$url" "$size" "$count" > "$work/client.out" &
        local clients=$!
        wait_line "$work/bserver.out" CONNECTED "$pid" \
            || { kill "$clients" 2>/dev/null; echo "profile: the server ended before its clients connected" >&2; exit 1; }
        if [ "$tool" = valgrind ]; then callgrind_control -i on "$pid" >/dev/null 2>&1; fi
        python3 -c 'import time; print(time.monotonic() + 0.5)' > "$work/go.tmp"
        mv "$work/go.tmp" "$work/go"
        wait "$clients" || true
        if [ "$tool" = valgrind ]; then callgrind_control -i off "$pid" >/dev/null 2>&1; fi
        wait "$pid" || true
        # Every client got every round.
        python3 -c 'import json, sys; r = json.loads(open(sys.argv[1]).read()); sys.exit(not all(c == int(sys.argv[2]) for _, _, c in r["per_round"]))' \
            "$work/client.out" "$size" || { echo "profile: a round did not reach every client: $(head -c 300 "$work/client.out")" >&2; exit 1; }
    else
        "$@" "$bin" run bench/clients/peerbench_client.lua --url "ws://127.0.0.1:$port/" \
            --workload "$workload" --n "$count" --size "$size" --type "$type" --warmup 0 --stats 0 > "$work/client.out"
    fi
    [ "$workload" = broadcast ] || grep -q '"ok":true' "$work/client.out" || { echo "profile: client failed: $(cat "$work/client.out")" >&2; exit 1; }
}

instructions() { # N -> total instructions of the run (every thread)
    local start=()
    [ "$workload" = fanout ] || [ "$workload" = broadcast ] && start=(--instr-atstart=no)
    [ -z "${CACHE_SIM:-}" ] || start+=(--cache-sim=yes)
    client "$1" valgrind --tool=callgrind "${start[@]}" --callgrind-out-file="$work/cg.$1" -q
    [ -z "${KEEP:-}" ] || cp "$work/cg.$1" "$KEEP/callgrind.out.$workload-$size-$1"
    total Ir "$1"
}

# EVENT N -> the run's total of callgrind's EVENT (Ir: instructions; I1mr: level-1
# instruction-cache misses, CACHE_SIM=1), from the totals line (the summary line is 0
# once instrumentation was switched off).
total() {
    awk -v event="$1" '/^events:/ {for (k = 2; k <= NF; k++) if ($k == event) col = k} /^totals:/ {print $col; exit}' "$work/cg.$2"
}

# The run's one-off costs that differ between two runs of one binary (run N -> instructions,
# inclusive): hdrhistogram's resizes when the open records the connect times (their size
# follows the values: about 50 million instructions, thousands per message between N and 2N)
# and the metrics snapshot at the end, which walks those histograms.
oneoff() {
    callgrind_annotate --inclusive=yes --threshold=100 "$work/cg.$1" 2>/dev/null \
        | awk '/HistogramAAV6resize24newHighestTrackableValue|MetricsRegistryC8snapshot8duration/ { gsub(",", "", $1); s += $1 } END { print s + 0 }'
}

syscalls() { # N -> "name calls" lines
    client "$1" strace -c -f -o "$work/st.$1"
    awk '$1 ~ /^[0-9.]+$/ && NF >= 5 {print $NF, $4}' "$work/st.$1"
}

i1=$(instructions "$n")
i2=$(instructions $((2 * n)))
if [ "$workload" = heartbeat ]; then
    # Pings sent, from callgrind's call counts: a late timer under valgrind sends fewer.
    pings() {
        callgrind_annotate --tree=caller --threshold=100 "$work/cg.$1" 2>/dev/null \
            | awk '/^ *$/ {blk = ""; next} {blk = blk "\n" $0} /\*  .*WebSocketHandlerC4ping/ {print blk}' \
            | grep -o '([0-9,]*x)' | tr -d '(),x' | awk '{s += $1} END {print s + 0}'
    }
    per=$(( $(pings $((2 * n))) - $(pings "$n") ))
    [ "$per" -gt 0 ] || { echo "profile: no pings counted" >&2; exit 1; }
fi
steady=$(( (i2 - $(oneoff $((2 * n))) - i1 + $(oneoff "$n")) / per ))
who=client
[ "$workload" = broadcast ] && who="server, per peer per round"
echo "$workload $size: $(( (i2 - i1) / per )) instructions per message (callgrind, $who, n=$n vs $((2 * n))); $steady without the one-off costs (histogram resizes at the open, the end-of-run snapshot)"
[ -z "${CACHE_SIM:-}" ] \
    || echo "$workload $size: $(( ($(total I1mr $((2 * n))) - $(total I1mr "$n")) / per )) level-1 instruction-cache misses per message (callgrind --cache-sim=yes, $who)"
[ -z "${SKIP_STRACE:-}" ] || exit 0
syscalls "$n" > "$work/s1"
syscalls $((2 * n)) > "$work/s2"
echo "$workload $size: system calls per message (strace -c -f, $who):"
awk -v n="$per" 'NR == FNR {a[$1] = $2; next} {d = ($2 - a[$1]) / n; if (d >= 0.005 || d <= -0.005) printf "  %-16s %.3f\n", $1, d}' \
    "$work/s1" "$work/s2" | sort -k2 -nr

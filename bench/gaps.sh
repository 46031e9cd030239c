#!/usr/bin/env bash
# The client's own time between its system calls, per round trip: rtt, 32-byte text,
# each client against a fresh picows echo, client and server on one CPU:
#   bench/gaps.sh                                  moonwire, picows, floor; 30 000 round trips
#   CLIENTS=moonwire,picows N=50000 bench/gaps.sh
# perf, running on another CPU, records every system call's entry and exit and every
# context switch on that CPU (the raw_syscalls and sched_switch tracepoints);
# bench/lib/gaps.py adds up, for the client's busiest thread, the time it ran in user
# space from one system call's exit to the next one's entry (time switched out is not
# counted), by the pair of calls. That is what the client's own code costs per message,
# in time, which instruction counts (bench/profile.sh) do not show: cache misses after
# the server ran on the same CPU are in it. Each figure also holds the two tracepoints'
# own cost, the same for every client: the floor's recvfrom -> sendto, which runs
# almost nothing, shows how much. Times: run it on a quiet machine, compare rows of
# one run. Needs perf, two CPUs and the venv bench/run.sh creates.
# Knobs: CLIENTS, N, PIN_CPU (1), PERF_CPU (0), MOONWIRE_BIN (release build), BENCH_VENV.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${N:-30000} pin=${PIN_CPU:-1} perf_cpu=${PERF_CPU:-0}
venv=${BENCH_VENV:-/tmp/moonwire-benchvenv}
command -v perf >/dev/null || { echo "gaps: needs perf (apt: linux-perf)" >&2; exit 2; }
"$venv/bin/python" -c 'import picows, uvloop' 2>/dev/null ||
    { echo "gaps: no picows in $venv: run bench/run.sh once (QUICK=1 is enough), which creates it" >&2; exit 2; }
if [ -z "${MOONWIRE_BIN:-}" ]; then
    scripts/release_build.sh --product moonwire >&2
    MOONWIRE_BIN=$(scripts/release_build.sh --show-bin-path)/moonwire
fi
. bench/lib/floor_build.sh
floor=$(floor_build wsfloor)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for client in $(echo "${CLIENTS:-moonwire,picows,floor}" | tr , ' '); do
    coproc SERVER { exec taskset -c "$pin" "$venv/bin/python" bench/peers/echo_picows.py 0; }
    server_pid=$SERVER_PID
    read -r ready <&"${SERVER[0]}"
    port=${ready#READY }; port=${port%% *}
    args=(--url "ws://127.0.0.1:$port/" --workload rtt --n "$n" --size 32 --type text --conns 1)
    case $client in
        moonwire) cmd=("$MOONWIRE_BIN" run bench/clients/peerbench_client.lua "${args[@]}") ;;
        picows) cmd=("$venv/bin/python" bench/peers/picows_client.py "${args[@]}") ;;
        floor) cmd=("$floor" "${args[@]}") ;;
        *) echo "gaps: moonwire, picows or floor, not $client" >&2; exit 2 ;;
    esac
    taskset -c "$perf_cpu" perf record -q -o "$work/$client.data" -C "$pin" \
        -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit -e sched:sched_switch \
        -- taskset -c "$pin" "${cmd[@]}" | tail -1 > "$work/$client.json"
    echo "$server_pid" > "$work/$client.server"
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    perf script --ns -i "$work/$client.data" -F pid,tid,time,event,trace 2>/dev/null > "$work/$client.txt"
done
python3 bench/lib/gaps.py "$n" "$work" $(echo "${CLIENTS:-moonwire,picows,floor}" | tr , ' ')
